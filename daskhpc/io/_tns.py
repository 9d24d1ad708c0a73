"""FROSTT ``.tns`` tensors: one nonzero per line, 1-based indices then a value, parsed a
block of lines at a time into narrow arrays allocated once."""

from __future__ import annotations

import contextlib

import numpy as np

from ._common import (_GZIP_MAGIC, _UTF8_BOM, Lines, SparseInput, arrow_head, as_int,
                      check_finite, read_bytes)
from ._errors import ReadError

#: Bytes of text parsed at once (a block's line index and numbers are a few times it)
BLOCK = 1 << 20


def read_tns(path, *, shape=None) -> SparseInput:
    """Read a FROSTT ``.tns`` file of any order into a ``sparse.COO`` tensor.

    Each data line holds N 1-based indices and a value; N (the order) is set by the first
    data line. ``#`` and ``%`` lines are comments. Duplicates are summed; zeros are kept.

    Parameters
    ----------
    path : str or os.PathLike
    shape : sequence of int, optional
        The tensor's shape; by default the largest index in each mode.

    Returns
    -------
    SparseInput
        ``tensor`` (float64, 0-based coords), ``index_maps == (None,) * N``,
        ``meta["order"] == N``.

    Examples
    --------
    >>> t = read_tns("umls_head_rel_tail.tns")      # doctest: +SKIP
    >>> t.shape, t.nnz                              # doctest: +SKIP
    ((135, 46, 135), 6529)
    """
    import sparse  # imported here: it pulls in numba, slow for the other readers

    coords, vals, shape = read_tns_arrays(path, shape=shape)
    tensor = sparse.COO(coords, vals.astype(np.float64), shape=shape, has_duplicates=True)
    return SparseInput(str(path), "tns", tensor=tensor, index_maps=(None,) * len(shape),
                       meta={"order": len(shape)})


def read_tns_arrays(path, *, shape=None) -> tuple[np.ndarray, np.ndarray, tuple]:
    """``(coords, vals, shape)`` of a ``.tns`` file: what :func:`read_tns` reads, as narrow
    arrays in file order (duplicates not summed).

    ``coords`` (order x nnz, 0-based) int32 and ``vals`` float32 where they hold every
    value exactly (else int64, float64); raises as :func:`read_tns` does.

    Examples
    --------
    >>> c, v, shape = read_tns_arrays("umls_head_rel_tail.tns")     # doctest: +SKIP
    >>> c.dtype, v.dtype, shape                                    # doctest: +SKIP
    (dtype('int32'), dtype('float32'), (135, 46, 135))
    """
    got = _read_arrow(path, shape)
    if got is not None:
        return got
    cap, blocks = _blocks(path)
    coords = vals = None
    n = line0 = 0
    order = first = None
    # closed on a bad line too: a generator left to the garbage collector may close its
    # file after the file's own finaliser warns it was left open
    with contextlib.closing(blocks):
        for data in blocks:
            lines = Lines(path, data)
            try:
                got = _parse(lines, order, first, line0, shape)
            except ReadError as e:
                if e.line is None:
                    raise
                raise ReadError(path, e.line + line0, e.problem) from None
            line0 += len(lines)
            lines.release()
            if got is None:
                continue
            c, v, k = got
            if order is None:                # the first data line sets the order
                order, first = c.shape[1], k + 1
                coords = np.empty((order, cap), np.int32)
                vals = np.empty(cap, np.float32)
            coords, vals = _store(coords, vals, n, c.T, v)
            n += v.size
    if n == 0:
        raise ReadError(path, None, "empty file")
    return _trimmed(coords, vals, n, cap, shape)


def _store(coords, vals, n: int, c: np.ndarray, v: np.ndarray):
    """Block ``c`` (order x m, 1-based) and ``v`` stored at nonzero ``n``, widening the
    arrays first where the block does not fit them."""
    if coords.dtype == np.int32 and int(c.max()) > 2**31:
        coords = _widened(coords, n, np.int64)
    if vals.dtype == np.float32 and not np.array_equal(v.astype(np.float32), v):
        vals = _widened(vals, n, np.float64)
    np.subtract(c, 1, out=coords[:, n:n + c.shape[1]], casting="unsafe")
    vals[n:n + v.size] = v
    return coords, vals


def _widened(a: np.ndarray, n: int, dtype) -> np.ndarray:
    """``a`` in ``dtype``, only its first ``n`` entries copied (the rest is unwritten:
    casting it could warn on a signalling NaN)."""
    out = np.empty(a.shape, dtype)
    out[..., :n] = a[..., :n]
    return out


def _trimmed(coords, vals, n: int, cap: int, shape):
    """The first ``n`` nonzeros (comment or blank lines left room) and the shape."""
    if n < cap:
        coords, vals = coords[:, :n].copy(), vals[:n].copy()
    if shape is None:
        shape = tuple(int(m) + 1 for m in coords.max(axis=1))
    return coords, vals, tuple(int(s) for s in shape)


def _read_arrow(path, shape):
    """The common file (single-space separated, no comment, tab, gzip or BOM) read with
    pyarrow's CSV reader; None for anything else or anything wrong (the general parse
    then names the line)."""
    got = arrow_head(path)
    if got is None:
        return None
    pa, csv, head = got
    first = head.split(b"\n", 1)[0].removesuffix(b"\r")
    tokens = first.split(b" ")
    if len(tokens) < 2 or not all(tokens) or head[:2] == _GZIP_MAGIC or \
            head[:3] == _UTF8_BOM or any(b in head for b in (b"#", b"%", b"\t")) or \
            head.count(b"\r") != head.count(b"\r\n"):
        return None
    order = len(tokens) - 1
    names = [f"c{k}" for k in range(order + 1)]
    types = dict(zip(names, [pa.int64()] * order + [pa.float64()]))
    cap, _ = _blocks(path)
    coords = np.empty((order, cap), np.int32)
    vals = np.empty(cap, np.float32)
    high = None if shape is None else np.array(shape, np.int64)[:, None]
    if high is not None and high.shape[0] != order:
        return None
    n = 0
    try:
        reader = csv.open_csv(
            path, read_options=csv.ReadOptions(column_names=names, block_size=BLOCK,
                                               use_threads=False),
            parse_options=csv.ParseOptions(delimiter=" ", quote_char=False),
            convert_options=csv.ConvertOptions(column_types=types,
                                               strings_can_be_null=False))
        for batch in reader:
            if any(c.null_count for c in batch.columns):
                return None          # an empty field (two spaces, a trailing one)
            m = batch.num_rows
            c = np.empty((order, m), np.int64)
            for k in range(order):
                c[k] = batch.column(k).to_numpy()
            v = batch.column(order).to_numpy()
            if n + m > cap or (m and (c.min() < 1 or (high is not None and
                                                      (c > high).any()))) or \
                    not np.isfinite(v).all():
                return None
            coords, vals = _store(coords, vals, n, c, v)
            n += m
    except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError, OSError):
        return None
    finally:
        pa.default_memory_pool().release_unused()   # the blocks' text, given back
    return _trimmed(coords, vals, n, cap, shape) if n else None


def _parse(lines: Lines, order, first, line0: int, shape):
    """The block's ``(indices (n, order) 1-based, values, file line of its first data line
    - 1)`` checked, or None without data lines."""
    path = lines.path
    idx = lines.data_lines(b"#%")
    if idx.size == 0:
        return None
    width = int(lines.ntok[idx[0]]) if order is None else order + 1
    if width < 2:
        raise lines.error(idx[0], "expected at least 2 columns (indices then a value), found 1")
    k = lines.first_bad(idx, lines.ntok[idx] != width)
    if k is not None:
        like = idx[0] + 1 + line0 if first is None else first
        raise lines.error(k, f"expected {width} columns like line {like}, "
                          f"found {lines.ntok[k]}")
    order = width - 1
    if shape is not None and len(shape) != order:
        raise ReadError(path, None, f"shape {tuple(int(s) for s in shape)} has "
                        f"{len(shape)} modes, the file has {order}")
    table = lines.numbers(idx).reshape(-1, width)
    coords = as_int(lines, idx.repeat(order), table[:, :order].ravel(), "index")
    coords = coords.reshape(-1, order)
    vals = table[:, order].copy()
    del table
    check_finite(lines, idx, vals)
    low = coords < 1
    lines.check(idx, low.any(axis=1), lambda r: f"index {coords[r, np.argmax(low[r])]} in "
                f"mode {np.argmax(low[r]) + 1} is below 1 (.tns indices are 1-based)")
    if shape is not None:
        shape = tuple(int(n) for n in shape)
        high = coords > np.array(shape)
        lines.check(idx, high.any(axis=1), lambda r: f"index {coords[r, np.argmax(high[r])]} "
                    f"in mode {np.argmax(high[r]) + 1} is beyond the given shape {shape}")
    return coords, vals, line0 + int(idx[0])


def _blocks(path) -> tuple[int, object]:
    """``(lines, blocks)``: the text's line count and its blocks of whole lines (a gzip,
    small or ``\\r``-only file read whole by :func:`read_bytes`, then cut)."""
    with open(path, "rb") as f:
        head = f.read(BLOCK)
        more = bool(f.read(1))
    if head[:2] == _GZIP_MAGIC or not more or (b"\n" not in head and b"\r" in head):
        raw = read_bytes(path)
        return raw.count(b"\n") + (not raw.endswith(b"\n")), _cut(raw)
    count, last = 0, b""
    with open(path, "rb") as f:
        while chunk := f.read(BLOCK):
            count += chunk.count(b"\n")
            last = chunk[-1:]
    return count + (last != b"\n"), _stream(path)


def _cut(raw: bytes):
    """``raw`` in blocks of whole lines."""
    at = 0
    while at < len(raw):
        end = raw.find(b"\n", min(at + BLOCK, len(raw)) - 1)
        end = len(raw) if end < 0 else end + 1
        yield raw[at:end]
        at = end


def _stream(path):
    """The file in blocks of whole lines, read :data:`BLOCK` bytes at a time."""
    carry = b""
    with open(path, "rb") as f:
        start = True
        while chunk := f.read(BLOCK):
            if start and chunk[:3] == _UTF8_BOM:
                chunk = chunk[3:]
            start = False
            buf = carry + chunk
            cut = buf.rfind(b"\n") + 1
            if cut == 0:
                carry = buf
                continue
            carry = buf[cut:]
            yield buf[:cut]
    if carry:
        yield carry
