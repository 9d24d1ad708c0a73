"""MatrixMarket coordinate files (``.mtx``, ``.mtx.gz``); dense ``array`` files, complex
and hermitian matrices are refused with a ReadError rather than half supported."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from daskhpc._narrow import index_dtype

from ._common import _GZIP_MAGIC, Lines, SparseInput, as_int, check_finite, csr, read_bytes
from ._errors import ReadError

_FIELDS = ("real", "double", "integer", "pattern")
_SYMMETRIES = ("general", "symmetric", "skew-symmetric")


def read_matrix_market(path) -> SparseInput:
    """Read a MatrixMarket coordinate matrix into a float64 CSR array.

    Field real/double/integer/pattern; symmetry general, symmetric or skew-symmetric (one
    triangle stored: both returned, the mirror negated for skew-symmetric). Pattern entries
    become 1.0; duplicates are summed (pattern: stay 1.0); explicit zeros are kept.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    SparseInput
        ``matrix``; ``meta`` holds ``field``, ``symmetry`` and ``stored_entries`` (the
        size line's count, before expansion).

    Examples
    --------
    >>> s = read_matrix_market("bcsstk13.mtx")          # doctest: +SKIP
    >>> s.shape, s.nnz, s.meta["symmetry"]              # doctest: +SKIP
    ((2003, 2003), 83883, 'symmetric')
    """
    streamed = _read_blocks(path)
    if streamed is not None:
        return streamed
    lines = Lines(path, read_bytes(path))
    if not lines.ntok.any():
        raise ReadError(path, None, "empty file")
    field, symmetry = _banner(lines)

    idx = lines.data_lines(b"%")
    if idx.size == 0:
        raise ReadError(path, None, "empty file: no size line after the banner")
    n_rows, n_cols, n_entries = _size_line(lines, int(idx[0]))
    if symmetry != "general" and n_rows != n_cols:
        raise lines.error(idx[0], f"a {symmetry} matrix must be square, not "
                          f"{n_rows} x {n_cols}")
    entries = idx[1:]

    width = 2 if field == "pattern" else 3
    k = lines.first_bad(entries, lines.ntok[entries] != width)
    if k is not None:
        what = "row col" if width == 2 else "row col value"
        raise lines.error(k, f"expected {width} columns ({what}), found {lines.ntok[k]}")
    if entries.size < n_entries:
        last = int(entries[-1]) if entries.size else int(idx[0])
        raise lines.error(last, f"file ends after {entries.size} of the {n_entries} "
                          "entries the size line announces (truncated?)")
    if entries.size > n_entries:
        raise lines.error(entries[n_entries], f"more entries than the {n_entries} "
                          "the size line announces")

    table = lines.numbers(entries).reshape(-1, width)
    rows = _index(lines, entries, table[:, 0], n_rows, "row")
    cols = _index(lines, entries, table[:, 1], n_cols, "column")
    if field == "pattern":
        vals = np.ones(entries.size)
    else:
        vals = table[:, 2]
        check_finite(lines, entries, vals)
        if field == "integer":
            as_int(lines, entries, vals, "value")

    if symmetry != "general":
        rows, cols, vals = _expand(lines, entries, rows, cols, vals, n_rows, n_cols, symmetry)
    matrix = csr(rows, cols, vals, (n_rows, n_cols))
    if field == "pattern":
        matrix.data[:] = 1.0   # a repeated pattern entry is still one edge
    meta = {"field": field, "symmetry": symmetry, "stored_entries": n_entries}
    return SparseInput(str(path), "mtx", matrix=matrix, index_maps=(None, None), meta=meta)


#: Bytes of the file the streamed parse reads at a time (about 4x that in memory)
BLOCK = 1 << 22


def _read_blocks(path) -> SparseInput | None:
    """A plain ``general`` file read BLOCK bytes of lines at a time into int32 (where they
    fit) columns, with the whole-file parse's checks: the client never holds the text and
    its line index. Rows in file order are only counted (the CSR pointers). None for
    anything else or anything wrong: the whole-file parse then names the line."""
    try:
        f = open(path, "rb")
    except OSError:
        return None                 # the whole-file parse raises as it does
    with f:
        text = f.read(BLOCK) + f.readline()
        if text[:2] == _GZIP_MAGIC or b"\r" in text:
            return None
        try:
            lines = Lines(path, text)
            field, symmetry = _banner(lines)
            idx = lines.data_lines(b"%")
            if symmetry != "general" or idx.size == 0:
                return None
            n_rows, n_cols, n_entries = _size_line(lines, int(idx[0]))
            entries = idx[1:]
            width = 2 if field == "pattern" else 3
            it = index_dtype(max(n_rows, n_cols, n_entries))
            cols, vals = np.empty(n_entries, it), np.ones(n_entries)
            rows, count, n, last = None, np.zeros(n_rows, np.int64), 0, 0
            while True:
                if entries.size:
                    if n + entries.size > n_entries or \
                            lines.first_bad(entries, lines.ntok[entries] != width) is not None:
                        return None
                    table = lines.numbers(entries).reshape(-1, width)
                    r = _index(lines, entries, table[:, 0], n_rows, "row")
                    c = _index(lines, entries, table[:, 1], n_cols, "column")
                    if field != "pattern":
                        check_finite(lines, entries, table[:, 2])
                        if field == "integer":
                            as_int(lines, entries, table[:, 2], "value")
                        vals[n:n + r.size] = table[:, 2]
                    del table
                    if rows is None and (int(r[0]) < last or bool((r[1:] < r[:-1]).any())):
                        rows = np.empty(n_entries, it)      # the rows before: counted
                        rows[:n] = np.repeat(np.arange(n_rows, dtype=it), count)
                    if rows is None:
                        count += np.bincount(r, minlength=n_rows)
                        last = int(r[-1])
                    else:
                        rows[n:n + r.size] = r
                    cols[n:n + r.size] = c
                    n += r.size
                    del r, c
                text = f.read(BLOCK)
                if not text:
                    break
                text += f.readline()
                if b"\r" in text:
                    return None
                lines = Lines(path, text)
                entries = lines.data_lines(b"%")
        except (ReadError, ValueError):
            return None
    del lines, text
    if n != n_entries:
        return None
    shape = (n_rows, n_cols)
    if rows is None:
        # rows ascending: the CSR's pointers count them, the columns are its indices
        ptr = np.zeros(n_rows + 1, it)
        np.cumsum(count, out=ptr[1:])
        matrix = sp.csr_array((vals, cols, ptr), shape=shape)
        matrix.sum_duplicates()
    else:
        matrix = csr(rows, cols, vals, shape)
    if field == "pattern":
        matrix.data[:] = 1.0
    meta = {"field": field, "symmetry": symmetry, "stored_entries": n_entries}
    return SparseInput(str(path), "mtx", matrix=matrix, index_maps=(None, None), meta=meta)


def _banner(lines: Lines) -> tuple[str, str]:
    words = [w.decode("ascii", errors="replace").lower() for w in lines.tokens(0)]
    if not words or words[0] != "%%matrixmarket":
        raise lines.error(0, "missing MatrixMarket banner (the first line must start "
                          "with %%MatrixMarket)")
    if len(words) != 5:
        raise lines.error(0, "banner must read '%%MatrixMarket matrix coordinate "
                          "<field> <symmetry>'")
    _, obj, layout, field, symmetry = words
    if obj != "matrix":
        raise lines.error(0, f"object {obj!r} is not supported (only 'matrix')")
    if layout == "array":
        raise lines.error(0, "dense 'array' MatrixMarket files are not supported; "
                          "only 'coordinate'")
    if layout != "coordinate":
        raise lines.error(0, f"unknown layout {layout!r} (expected 'coordinate')")
    if field not in _FIELDS:
        raise lines.error(0, f"field {field!r} is not supported (expected one of "
                          f"{', '.join(_FIELDS)})")
    if symmetry not in _SYMMETRIES:
        raise lines.error(0, f"symmetry {symmetry!r} is not supported (expected one of "
                          f"{', '.join(_SYMMETRIES)})")
    if field == "pattern" and symmetry == "skew-symmetric":
        raise lines.error(0, "a pattern matrix cannot be skew-symmetric")
    return ("real" if field == "double" else field), symmetry


def _size_line(lines: Lines, k: int) -> tuple[int, int, int]:
    if lines.ntok[k] != 3:
        raise lines.error(k, "size line must hold 3 integers (rows cols entries), "
                          f"found {lines.ntok[k]} tokens")
    one = np.array([k])
    size = as_int(lines, one.repeat(3), lines.numbers(one), "size")
    if (size < 0).any():
        raise lines.error(k, "size line holds a negative number")
    return int(size[0]), int(size[1]), int(size[2])


def _index(lines, entries, column, n, what) -> np.ndarray:
    """1-based file indices -> 0-based, checked against 1..n."""
    index = as_int(lines, entries, column, f"{what} index")
    lines.check(entries, (index < 1) | (index > n),
                lambda r: f"{what} index {index[r]} out of range 1..{n}")
    return index - 1


def _expand(lines, entries, rows, cols, vals, n_rows, n_cols, symmetry):
    """Add the mirror of each off-diagonal entry of a one-triangle file."""
    diag = rows == cols
    if symmetry == "skew-symmetric":
        lines.check(entries, diag & (vals != 0),
                    lambda r: "skew-symmetric matrix stores a nonzero diagonal entry")
    # A pair stored on both sides of the diagonal would be doubled silently: refused.
    upper, lower = rows < cols, rows > cols
    if upper.any() and lower.any():
        lower_keys = rows[lower] * n_cols + cols[lower]
        both = np.zeros(rows.size, dtype=bool)
        both[upper] = np.isin(cols[upper] * n_cols + rows[upper], lower_keys)
        lines.check(entries, both, lambda r: f"entry ({rows[r] + 1}, {cols[r] + 1}) and its "
                    f"mirror are both stored in a {symmetry} matrix")
    off = ~diag
    sign = -1.0 if symmetry == "skew-symmetric" else 1.0
    return (np.concatenate((rows, cols[off])), np.concatenate((cols, rows[off])),
            np.concatenate((vals, sign * vals[off])))
