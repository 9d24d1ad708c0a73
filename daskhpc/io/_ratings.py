"""Rating triplets: MovieLens CSV (optional header), tab or space separated, or MovieLens
1M's ``user::item::rating::timestamp``; integer or string ids, re-indexed densely."""

from __future__ import annotations

import re

import numpy as np

from daskhpc._narrow import index_dtype, narrow_values

from ._common import (Lines, SparseInput, arrow_head, as_int, check_finite, csr, dense_ids,
                      first_repeat, parses, read_bytes)
from ._errors import ReadError

# a comma at the start of a line, or followed by another comma or the line end
_EMPTY_FIELD = re.compile(rb"(?m)^[ \t]*,|,[ \t]*(?=,|\r?$)")
#: A line's first token that is not a comment, and the rest of the line
_DATA_LINE = re.compile(rb"(?m)^[^\S\n]*([^#%\s][^\n]*)")


def read_ratings(path, *, header: bool | None = None, matrix: bool = True) -> SparseInput:
    """Read user-item ratings into a users x items CSR matrix and triplets.

    Ids are re-indexed densely (sorted unique ids -> ``0..n-1``); ``index_maps == (user_ids,
    item_ids)`` gives the file id of each row and column (None where already dense; int64,
    or str for a mode that is not all integers). A rating of 0 stays a stored entry.

    Parameters
    ----------
    path : str or os.PathLike
    header : bool or None, default None
        Whether the first data line is a header; by default when its rating is not a number.
    matrix : bool, default True
        False: no CSR matrix (``meta["shape"]`` gives the shape).

    Returns
    -------
    SparseInput
        ``matrix`` (float64) and ``meta``: ``rows``, ``cols`` (int32 where they fit),
        ``vals`` (float32 where that keeps every rating) in file order; ``timestamps``
        (int64) with a fourth column; ``header`` (column names or None), ``delimiter``.

    Examples
    --------
    >>> r = read_ratings("ratings.csv")             # doctest: +SKIP
    >>> r.shape, r.nnz, r.meta["header"][:2]        # doctest: +SKIP
    ((610, 9724), 100836, ['userId', 'movieId'])
    """
    fast = _read_streaming(path, header, matrix)
    if fast is not None:
        return fast
    raw = read_bytes(path)
    first = _DATA_LINE.search(raw)      # (found without indexing the file)
    if first is None:
        raise ReadError(path, None, "empty file")
    first = first.group(1).rstrip()
    # Same-length replacements: byte offsets and line numbers do not move.
    if b"," in first:
        _no_empty_fields(path, raw)
        delimiter, raw = ",", raw.replace(b",", b" ")
    elif b"::" in first:
        delimiter, raw = "::", raw.replace(b"::", b"  ")
    else:
        delimiter = "whitespace"
    lines = Lines(path, raw)
    idx = lines.data_lines(b"#%")

    names = None
    # a header names the columns: its rating (third) token is not a number (ids may be
    # strings, so the first two tokens do not tell)
    first_tokens = lines.tokens(idx[0])
    if header or (header is None and not all(parses(t, 1) for t in first_tokens[2:3] or
                                             first_tokens)):
        names = [t.decode("utf-8", errors="replace") for t in lines.tokens(idx[0])]
        idx = idx[1:]
        if idx.size == 0:
            raise ReadError(path, None, "empty file: a header but no ratings")

    width = int(lines.ntok[idx[0]])
    ntok = lines.ntok[idx]
    k = lines.first_bad(idx, (ntok != width) | ((ntok != 3) & (ntok != 4)))
    if k is not None:
        found = int(lines.ntok[k])
        if found in (3, 4) and width in (3, 4):
            raise lines.error(k, f"expected {width} columns like line {idx[0] + 1}, "
                              f"found {found}")
        raise lines.error(k, f"expected 3 or 4 columns, found {found}")

    try:
        table = lines.numbers(idx).reshape(-1, width)
    except ReadError:
        table = None            # a token that is not a number: string ids, or an error
    meta = {"header": names, "delimiter": delimiter}
    if table is not None:
        # the text, its index and the parsed table are done with: what follows holds
        # the columns only (errors still name lines through idx)
        lines.release()
        del raw
        users = as_int(lines, idx, table[:, 0], "user id")
        items = as_int(lines, idx, table[:, 1], "item id")
        vals = table[:, 2].copy()
        if width == 4:
            meta["timestamps"] = as_int(lines, idx, table[:, 3], "timestamp")
        del table
        user_map, rows = dense_ids(users)
        item_map, cols = dense_ids(items)
    else:
        tok = np.array(lines.join(idx).split()).reshape(-1, width)
        vals = _floats(lines, idx, tok[:, 2], "rating")
        if width == 4:
            meta["timestamps"] = as_int(lines, idx, _floats(lines, idx, tok[:, 3],
                                                            "timestamp"), "timestamp")
        (user_map, rows, users), (item_map, cols, items) = (
            _ids(lines, idx, tok[:, c], what) for c, what in ((0, "user id"), (1, "item id")))
        meta["string_ids"] = [bool(m is not None and m.dtype.kind == "U")
                              for m in (user_map, item_map)]
    check_finite(lines, idx, vals, "rating")
    n_users = user_map.size if user_map is not None else int(users.max()) + 1
    n_items = item_map.size if item_map is not None else int(items.max()) + 1
    _no_duplicates(lines, idx, rows * n_items + cols, users, items)

    shape = (n_users, n_items)
    meta.update(rows=rows.astype(index_dtype(n_users)), cols=cols.astype(index_dtype(n_items)),
                vals=narrow_values(vals), shape=shape)
    return SparseInput(str(path), "ratings", matrix=csr(rows, cols, vals, shape) if matrix
                       else None, index_maps=(user_map, item_map), meta=meta)


#: Bytes of the file the streaming parse reads at a time
BLOCK = 1 << 20


def _read_streaming(path, header, matrix: bool = True) -> SparseInput | None:
    """The common case (comma separated integer ids, numeric ratings) read in blocks with
    pyarrow into 32-bit columns, without the text's line index; None for anything else or
    anything wrong (the general parse then names the line)."""
    got = arrow_head(path)
    if got is None:
        return None
    pa, csv, head = got
    first = head.split(b"\n", 1)[0].removesuffix(b"\r")
    # gzip, a byte order mark, blanks or comments before the data, other delimiters,
    # old Mac \r line ends (\r\n is fine): the general parse
    if not first or first[:1] in b"#% \t\xef\x1f" or b"," not in first or \
            head.count(b"\r") != head.count(b"\r\n") or b"::" in first or \
            b"#" in head or b"%" in head:
        return None
    tokens = first.split(b",")
    if len(tokens) not in (3, 4) or any(not t or t != t.strip() or b" " in t or b"\t" in t
                                        for t in tokens):
        return None
    names = None
    if header or (header is None and not all(parses(t, 1) for t in tokens[2:3])):
        names = [t.strip().decode("utf-8", errors="replace") for t in tokens]
    width = len(tokens)
    types = [pa.int64(), pa.int64(), pa.float64(), pa.int64()][:width]
    cols = [f"c{k}" for k in range(width)]
    # the columns in place, sized by the file's line count: no list of blocks to join
    size = _line_count(path)
    out = [np.empty(size, t) for t in (np.int32, np.int32, np.float32, np.int64)[:width]]
    n, reader = 0, None
    try:
        reader = csv.open_csv(
            path, read_options=csv.ReadOptions(column_names=cols, skip_rows=int(bool(names)),
                                               block_size=BLOCK, use_threads=False),
            # no quoting: '"5"' is a bad token, as the general parse says
            parse_options=csv.ParseOptions(delimiter=",", quote_char=False),
            convert_options=csv.ConvertOptions(column_types=dict(zip(cols, types)),
                                               strings_can_be_null=False))
        for batch in reader:
            if any(c.null_count for c in batch.columns):
                return None          # an empty field
            m = batch.num_rows
            if n + m > size:
                return None          # a line break the count did not see (\r alone)
            for k, c in enumerate(batch.columns):
                a = c.to_numpy(zero_copy_only=False)
                if k < 2 and out[k].dtype == np.int32 and m and \
                        not (-2**31 <= a.min() and a.max() < 2**31):
                    out[k] = out[k].astype(np.int64)     # ids beyond 32 bits
                if k == 2 and out[k].dtype == np.float32 and \
                        narrow_values(a).dtype != np.float32:
                    out[k] = out[k].astype(np.float64)   # a rating float32 would change
                out[k][n:n + m] = a
            n += m
    except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError, OSError):
        return None
    finally:
        del reader                        # it holds its last blocks
        pa.default_memory_pool().release_unused()   # the blocks' text, given back
    if n == 0:
        return None
    # a header and blank lines are a few spare items (a view); many, a copy
    out = [a[:n] if a.size < 1.1 * n else a[:n].copy() for a in out]
    vals = out[2]
    if not np.isfinite(vals).all():
        return None
    meta = {"header": names, "delimiter": ","}
    if width == 4:
        meta["timestamps"] = out[3]
    ids_in = out[:2]
    del out
    maps, dense = [], []
    for k in range(2):
        m, d = _dense(ids_in[k])
        ids_in[k] = None
        maps.append(m)
        dense.append(d)
    shape = tuple(int(m.size) if m is not None else int(d.max()) + 1
                  for m, d in zip(maps, dense))
    if matrix:
        # from 32-bit ids the matrix's indices are 32 bits too (8 bytes a rating less)
        matrix = csr(*dense, vals, shape)
        if matrix.nnz != vals.size:
            return None              # a repeated pair: the general parse names its line
    elif _repeats(*dense, shape[1]):
        return None
    else:
        matrix = None
    meta.update(rows=dense[0], cols=dense[1], vals=vals, shape=shape)
    return SparseInput(str(path), "ratings", matrix=matrix, index_maps=tuple(maps),
                       meta=meta)


def _repeats(rows: np.ndarray, cols: np.ndarray, m: int) -> bool:
    """Whether a (row, column) pair comes twice (keys sorted in place, 32-bit if they fit)."""
    kt = np.uint32 if (int(rows.max()) + 1) * m <= 2**32 else np.uint64
    key = rows.astype(kt)
    key *= kt(m)
    # non-negative: 32-bit columns are their own uint32 keys' view
    key += cols.view(kt) if cols.dtype.itemsize == key.itemsize else cols.astype(kt)
    key.sort()
    for lo in range(0, key.size, BLOCK):      # a block's comparison at a time
        if np.any(key[lo + 1:lo + BLOCK + 1] == key[lo:lo + BLOCK][:key.size - lo - 1]):
            return True
    return False


def _line_count(path) -> int:
    """Lines of the file (line breaks, and one for a last line without one)."""
    n = 1
    with open(path, "rb") as f:
        while chunk := f.read(BLOCK):
            n += chunk.count(b"\n")
    return n


def _dense(ids: np.ndarray):
    """:func:`dense_ids` of a column, 32-bit where they fit; without a sort when the ids
    span fewer values than there are ids (a lookup table of the span)."""
    lo, hi = int(ids.min()), int(ids.max())
    if hi - lo < ids.size:
        off = np.subtract(ids, ids.dtype.type(lo), out=ids) if lo else ids     # ours
        seen = np.zeros(hi - lo + 1, bool)
        seen[off] = True
        if lo == 0 and seen.all():
            return None, ids
        # id - lo -> its dense index
        new = np.cumsum(seen, dtype=index_dtype(int(np.count_nonzero(seen)))) - 1
        return np.flatnonzero(seen).astype(np.int64) + lo, new[off]
    m, d = dense_ids(ids)
    return m, d.astype(index_dtype(m.size)) if m is not None else d


def _floats(lines, idx, col: np.ndarray, what: str) -> np.ndarray:
    """A column of byte tokens as float64; a ReadError names the first bad token."""
    try:
        return col.astype(np.float64)
    except ValueError:
        pass
    for r, t in enumerate(col):      # slow path, on failure only: find the line
        if not parses(bytes(t), 1):
            shown = bytes(t).decode("utf-8", errors="replace")
            raise lines.error(idx[r], f"bad {what} {shown!r} (not a number)")
    raise ReadError(lines.path, None, f"could not parse the {what}s")   # pragma: no cover


def _ids(lines, idx, col: np.ndarray, what: str):
    """``(id_map, dense, ids)`` of an id column: integers as :func:`dense_ids` does,
    anything else as strings (sorted unique strings -> ``0..n-1``)."""
    try:
        ints = as_int(lines, idx, col.astype(np.float64), what)
    except (ValueError, ReadError):
        ints = None
    if ints is not None:
        m, dense = dense_ids(ints)
        return m, dense, ints
    names = np.char.decode(col, "utf-8", errors="replace")
    uniq, dense = np.unique(names, return_inverse=True)
    return uniq, dense.astype(np.int64).reshape(-1), names


def _no_empty_fields(path, raw: bytes) -> None:
    """Refuse "1,,4.0": once commas become blanks it would shift the columns."""
    if not _may_have_empty_field(raw):
        return
    for match in _EMPTY_FIELD.finditer(raw):
        start = raw.rfind(b"\n", 0, match.start()) + 1
        if raw[start:start + 1] in (b"#", b"%"):
            continue   # a comment may hold anything
        line = raw.count(b"\n", 0, start) + 1
        raise ReadError(path, line, "empty field (two commas in a row, or a comma at "
                        "the start or end of the line)")


#: Bytes after (``_AFTER``) and before (``_BEFORE``) a comma that may make an empty field
_AFTER = np.zeros(256, bool)
_AFTER[list(b",\n\r \t")] = True
_BEFORE = np.zeros(256, bool)
_BEFORE[list(b"\n \t")] = True


def _may_have_empty_field(raw: bytes) -> bool:
    """Whether :data:`_EMPTY_FIELD` can match (a comma at the file's ends or beside another
    comma, a line end or a blank), checked with numpy at the commas' neighbours."""
    b = np.frombuffer(raw, np.uint8)
    at = np.flatnonzero(b == ord(","))
    if at.size == 0:
        return False
    if at[0] == 0 or at[-1] == b.size - 1:
        return True
    return bool(_AFTER[b[at + 1]].any() or _BEFORE[b[at - 1]].any())


def _no_duplicates(lines, idx, keys, users, items) -> None:
    pair = first_repeat(keys)
    if pair is not None:
        first, second = pair
        raise lines.error(idx[second], f"duplicate rating for user {users[second]}, item "
                          f"{items[second]} (first rated on line {idx[first] + 1})")
