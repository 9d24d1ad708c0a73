"""The tensor a CP-ALS run factors: validated COO coordinates, values and shape.

Arrays are as narrow as holds them exactly (int32 indices, float32 values when exact);
every computation widens them to float64, so results do not depend on the storage."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numba
import numpy as np

from daskhpc._narrow import index_dtype, narrow_values
from daskhpc.errors import InputError


@dataclass(eq=False)
class Tensor:
    """A sparse tensor in coordinate form.

    Attributes
    ----------
    coords : int32 (or int64) array (N, nnz)
        0-based index of every nonzero in every mode, lexicographically sorted, no
        duplicates (explicit zeros kept).
    vals : float32 (every value a float32 number) or float64 array (nnz,)
    shape : tuple of int
    source : dict
        The report's ``input`` section (path, shape, nnz).
    """

    coords: np.ndarray
    vals: np.ndarray
    shape: tuple
    source: dict = field(default_factory=dict)
    #: ``||X||^2`` when it was summed elsewhere (a Dask collection's, part by part)
    normx2: float | None = None

    @property
    def order(self) -> int:
        return len(self.shape)

    @property
    def nnz(self) -> int:
        return int(self.vals.size)

    def norm2(self) -> float:
        """``||X||^2``, summed in nonzero order (the serial and distributed runs share it)."""
        if self.normx2 is not None:
            return float(self.normx2)
        v = np.asarray(self.vals, np.float64)      # float32 values widen exactly
        return float(np.dot(v, v))

    def to_dense(self) -> np.ndarray:
        """The dense array (small tensors only: tests and examples)."""
        out = np.zeros(self.shape)
        out[tuple(self.coords)] = self.vals
        return out

    def describe(self) -> dict:
        out = {"shape": list(self.shape), "nnz": self.nnz}
        if "path" in self.source:
            out = {"path": self.source["path"], **out}
        return out

    def __repr__(self):
        return f"Tensor({' x '.join(map(str, self.shape))}, {self.nnz} nonzeros)"


def as_tensor(data) -> Tensor:
    """Validate ``data`` and return it as a canonical :class:`Tensor` (duplicates summed).

    Parameters
    ----------
    data : path, SparseInput, sparse.COO, Tensor, dense ndarray, or (coords, values, shape)
        A FROSTT ``.tns`` file (any reader :func:`daskhpc.io.read` knows), what a reader
        returned, a ``sparse.COO`` or dense array of order >= 3, or coordinates ``(N, nnz)``
        with values and shape.

    Raises
    ------
    InputError
        Order < 3, no nonzeros or only zeros, a non-finite value, an index out of the
        shape, or a mode with a single slice.

    Examples
    --------
    >>> t = as_tensor(([[0, 1, 1], [2, 0, 0], [1, 1, 1]], [1.0, 2.0, 3.0], (2, 3, 2)))
    >>> t.shape, t.nnz, t.vals.tolist()                # (1, 0, 1) appeared twice: summed
    ((2, 3, 2), 2, [1.0, 5.0])
    """
    where = "input"
    if isinstance(data, Tensor):
        return data
    if isinstance(data, (str, os.PathLike)):
        from daskhpc.io import detect_format, read, read_tns_arrays

        if detect_format(data) == "tns":     # int32/float32 arrays, no float64 COO
            coords, vals, shape = read_tns_arrays(data)
            return _canonical(coords, vals, shape, str(data))
        data = read(data)
    if hasattr(data, "describe") and hasattr(data, "tensor"):   # a reader's SparseInput
        where = data.path
        if data.tensor is None:
            raise InputError(f"{where}: CP-ALS needs a tensor (.tns), the file holds a "
                             f"{' x '.join(map(str, data.shape))} matrix")
        data = data.tensor
    if hasattr(data, "coords") and hasattr(data, "data") and hasattr(data, "shape"):
        coords, vals, shape = np.asarray(data.coords), np.asarray(data.data), data.shape
    elif isinstance(data, np.ndarray):
        if data.ndim < 3:
            raise InputError(f"{where}: CP-ALS needs a tensor of order 3 or more, got a "
                             f"{data.ndim}-D array")
        coords = np.asarray(np.nonzero(data))
        vals, shape = data[tuple(coords)], data.shape
    elif isinstance(data, tuple) and len(data) == 3:
        coords, vals, shape = np.asarray(data[0]), np.asarray(data[1]), data[2]
    elif hasattr(data, "shape") and len(getattr(data, "shape", ())) == 2:
        raise InputError(f"{where}: CP-ALS needs a tensor of order 3 or more, got a "
                         f"{data.shape[0]} x {data.shape[1]} matrix")
    else:
        raise InputError(f"cannot use {type(data).__name__} as a tensor: give a .tns file, "
                         "a sparse.COO or (coords, values, shape)")
    return _canonical(coords, vals, shape, where)


def _canonical(coords, vals, shape, where: str) -> Tensor:
    try:
        shape = tuple(int(s) for s in shape)
    except (TypeError, ValueError):
        raise InputError(f"{where}: shape {shape!r} is not a sequence of integers") from None
    N = len(shape)
    if N < 3:
        raise InputError(f"{where}: CP-ALS needs a tensor of order 3 or more, got a "
                         f"{'matrix' if N == 2 else 'vector'} (order {N})")
    coords = np.asarray(coords)
    if coords.ndim != 2 or coords.shape[0] != N:
        raise InputError(f"{where}: coords must have shape (order, nnz) = ({N}, nnz), got "
                         f"{coords.shape}")
    if coords.size and not np.issubdtype(coords.dtype, np.integer):
        if not np.all(coords == np.round(coords)):
            raise InputError(f"{where}: coordinates must be integers")
        coords = coords.astype(np.int64)
    vals = np.asarray(vals).ravel()
    if vals.dtype != np.float32:
        vals = vals.astype(np.float64, copy=False)
    if vals.size != coords.shape[1]:
        raise InputError(f"{where}: {coords.shape[1]} coordinates but {vals.size} values")
    if vals.size == 0:
        raise InputError(f"{where}: the tensor has no nonzeros")
    for m, n in enumerate(shape):
        if n < 2:
            raise InputError(f"{where}: mode {m + 1} has a single slice (size {n}); drop "
                             "that mode and factor the lower-order tensor")
        lo, hi = int(coords[m].min()), int(coords[m].max())
        if lo < 0 or hi >= n:
            bad = lo if lo < 0 else hi
            raise InputError(f"{where}: index {bad} in mode {m + 1} lies outside [0, {n})")
    coords = coords.astype(index_dtype(max(shape)), copy=False)     # in bounds: exact
    bad = np.flatnonzero(~np.isfinite(vals))
    if bad.size:
        e = int(bad[0])
        raise InputError(f"{where}: value {vals[e]} at {tuple(int(c) for c in coords[:, e])} "
                         f"is not a finite number ({bad.size} such values)")
    coords, vals = _sum_duplicates(coords, vals)
    if not np.any(vals != 0.0):
        raise InputError(f"{where}: the tensor is all zeros; there is nothing to factor")
    return Tensor(np.ascontiguousarray(coords), np.ascontiguousarray(narrow_values(vals)),
                  shape,
                  {"shape": list(shape), "nnz": int(vals.size),
                   **({"path": where} if where != "input" else {})})


@numba.njit(cache=True, nogil=True)
def _order_state(coords):  # pragma: no cover - numba
    # 0: strictly increasing (lexicographic); 1: non-decreasing with repeats; 2: unsorted.
    # One pass, no per-nonzero temporaries (numpy's differences held 2x the tensor).
    N, n = coords.shape
    state = 0
    for e in range(1, n):
        c = 0
        for m in range(N):
            a, b = coords[m, e - 1], coords[m, e]
            if a != b:
                c = 1 if a < b else -1
                break
        if c < 0:
            return 2
        if c == 0:
            state = 1
    return state


def _sum_duplicates(coords: np.ndarray, vals: np.ndarray):
    """Lexicographic order, equal coordinates merged by summing (in float64)."""
    state = _order_state(np.ascontiguousarray(coords))
    if state == 0:   # readers and sparse.COO hand us sorted data: no sort, no copy
        return coords, vals
    if state == 1:
        c, v = coords, vals
    else:
        order = np.lexsort(coords[::-1])
        c, v = coords[:, order], vals[order]
        del order
    new = np.ones(c.shape[1], dtype=bool)
    new[1:] = np.any(c[:, 1:] != c[:, :-1], axis=0)
    if not new.all():
        starts = np.flatnonzero(new)
        v = np.add.reduceat(np.asarray(v, np.float64), starts)
        c = c[:, starts]
    return c, v
