"""FROSTT ``.tns`` tensors: one nonzero per line, 1-based indices then a value."""

from __future__ import annotations

import numpy as np

from ._common import Lines, SparseInput, as_int, check_finite, read_bytes
from ._errors import ReadError

__all__ = ["read_tns"]


def read_tns(path, *, shape=None) -> SparseInput:
    """Read a FROSTT ``.tns`` file of any order into a ``sparse.COO`` tensor.

    Each data line holds N 1-based indices and a value, whitespace
    separated; N (the order, at least 1) is set by the first data line and
    every other line must match.  ``#`` and ``%`` lines are comments.
    Duplicate coordinates are summed (COO semantics); explicit zeros are
    kept.

    Parameters
    ----------
    path : str or os.PathLike
        The file; gzip content is detected and decompressed.
    shape : sequence of int, optional
        The tensor's shape; by default the largest index in each mode.

    Returns
    -------
    SparseInput
        ``tensor`` (float64, 0-based coords), ``index_maps == (None,) * N``,
        ``meta["order"] == N``.

    Raises
    ------
    ReadError
        Empty file, a line with a different column count than the first,
        a bad token, a non-integer index or one below 1 or beyond ``shape``,
        a NaN/inf value.

    Examples
    --------
    >>> t = read_tns("umls_head_rel_tail.tns")      # doctest: +SKIP
    >>> t.shape, t.nnz                              # doctest: +SKIP
    ((135, 46, 135), 6529)
    """
    import sparse  # imported here: it pulls in numba, slow for the other readers

    lines = Lines(path, read_bytes(path))
    idx = lines.data_lines(b"#%")
    if idx.size == 0:
        raise ReadError(path, None, "empty file")
    width = int(lines.ntok[idx[0]])
    if width < 2:
        raise lines.error(idx[0], "expected at least 2 columns (indices then a value), found 1")
    k = lines.first_bad(idx, lines.ntok[idx] != width)
    if k is not None:
        raise lines.error(k, f"expected {width} columns like line {idx[0] + 1}, "
                          f"found {lines.ntok[k]}")
    order = width - 1

    table = lines.numbers(idx).reshape(-1, width)
    coords = as_int(lines, idx.repeat(order), table[:, :order].ravel(), "index")
    coords = coords.reshape(-1, order)
    vals = table[:, order]
    check_finite(lines, idx, vals)
    low = coords < 1
    lines.check(idx, low.any(axis=1), lambda r: f"index {coords[r, np.argmax(low[r])]} in "
                f"mode {np.argmax(low[r]) + 1} is below 1 (.tns indices are 1-based)")

    if shape is None:
        shape = tuple(int(n) for n in coords.max(axis=0))
    else:
        shape = tuple(int(n) for n in shape)
        if len(shape) != order:
            raise ReadError(path, None, f"shape {shape} has {len(shape)} modes, "
                            f"the file has {order}")
        high = coords > np.array(shape)
        lines.check(idx, high.any(axis=1), lambda r: f"index {coords[r, np.argmax(high[r])]} "
                    f"in mode {np.argmax(high[r]) + 1} is beyond the given shape {shape}")

    tensor = sparse.COO((coords - 1).T, vals.astype(np.float64), shape=shape,
                        has_duplicates=True)
    return SparseInput(str(path), "tns", tensor=tensor, index_maps=(None,) * order,
                       meta={"order": order})
