"""Rating triplets: MovieLens style CSV, or ``user item rating [timestamp]``.

Accepted layouts: comma separated with an optional header row
(``userId,movieId,rating,timestamp``), tab or space separated without one,
and MovieLens 1M's ``user::item::rating::timestamp``. User and item ids are
integers or any other token without blanks or the delimiter (``alice``,
``tt0111161``, ``A1B2C3``): either way they are re-indexed densely and the
original ids are kept in ``index_maps``.
"""

from __future__ import annotations

import re

import numpy as np

from ._common import (Lines, SparseInput, as_int, check_finite, csr, dense_ids,
                      first_repeat, parses, read_bytes)
from ._errors import ReadError

__all__ = ["read_ratings"]

# a comma at the start of a line, or followed by another comma or the line end
_EMPTY_FIELD = re.compile(rb"(?m)^[ \t]*,|,[ \t]*(?=,|\r?$)")
#: A line's first token that is not a comment, and the rest of the line
_DATA_LINE = re.compile(rb"(?m)^[^\S\n]*([^#%\s][^\n]*)")


def read_ratings(path, *, header: bool | None = None) -> SparseInput:
    """Read user-item ratings into a users x items CSR matrix and triplets.

    User and item ids are re-indexed densely (sorted unique ids ->
    ``0..n-1``); ``index_maps == (user_ids, item_ids)`` gives the file id of
    each row and column (None for a mode whose ids already are ``0..n-1``): an
    int64 array for integer ids, a str array for string ids (sorted as strings;
    like SNAP ids, a mode is either all integers or taken as strings).
    A rating of 0 stays an explicit stored entry of the CSR matrix (it is
    built without ``eliminate_zeros``), so ``nnz`` counts ratings.

    Parameters
    ----------
    path : str or os.PathLike
        The file; gzip content is detected and decompressed.
    header : bool or None, default None
        Whether the first data line is a header; by default it is when it
        holds a token that is not a number.

    Returns
    -------
    SparseInput
        ``matrix`` (float64) plus ``meta``:

        - ``rows``, ``cols`` (int64, dense indices) and ``vals`` (float64):
          the ratings as COO triplets in FILE ORDER;
        - ``timestamps`` (int64, aligned with ``rows``/``cols``/``vals``,
          i.e. file order) when the file has a fourth column, else absent;
        - ``header`` (list of column names or None), ``delimiter``.

    Raises
    ------
    ReadError
        Empty file, a line without 3 or 4 columns (or unlike the first
        line), a bad token, a non-integer id or timestamp, a NaN/inf
        rating, a second rating of the same (user, item) pair (naming the
        line of the second occurrence).

    Examples
    --------
    >>> r = read_ratings("ratings.csv")             # doctest: +SKIP
    >>> r.shape, r.nnz, r.meta["header"][:2]        # doctest: +SKIP
    ((610, 9724), 100836, ['userId', 'movieId'])
    """
    raw = read_bytes(path)
    first = _first_data_line(raw)
    if first is None:
        raise ReadError(path, None, "empty file")
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

    meta.update(rows=rows, cols=cols, vals=vals)
    matrix = csr(rows, cols, vals, (n_users, n_items))
    return SparseInput(str(path), "ratings", matrix=matrix,
                       index_maps=(user_map, item_map), meta=meta)


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
    """Whether :data:`_EMPTY_FIELD` can match: only at a comma that starts or ends the
    file or stands next to another comma, a line end or a blank: found with numpy at the
    commas' neighbours, 10x faster than the expression (docs/benchmarks.md)."""
    b = np.frombuffer(raw, np.uint8)
    at = np.flatnonzero(b == ord(","))
    if at.size == 0:
        return False
    if at[0] == 0 or at[-1] == b.size - 1:
        return True
    return bool(_AFTER[b[at + 1]].any() or _BEFORE[b[at - 1]].any())


def _first_data_line(raw: bytes) -> bytes | None:
    """The first non-blank, non-comment line, found without indexing the file."""
    m = _DATA_LINE.search(raw)
    return m.group(1).rstrip() if m else None


def _no_duplicates(lines, idx, keys, users, items) -> None:
    pair = first_repeat(keys)
    if pair is not None:
        first, second = pair
        raise lines.error(idx[second], f"duplicate rating for user {users[second]}, item "
                          f"{items[second]} (first rated on line {idx[first] + 1})")
