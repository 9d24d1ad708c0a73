"""Input checks and the load-balancing permutation, shared by run and plan.

No dask here.

Examples
--------
>>> import scipy.sparse as sp
>>> check_inputs(sp.eye(3), sp.eye(4))
Traceback (most recent call last):
...
daskhpc.errors.InputError: dimension mismatch: A is 3 x 3, B is 4 x 4; A's columns must equal B's rows
"""

from __future__ import annotations

import os

import numpy as np
import scipy.sparse as sp

from daskhpc._narrow import index_dtype
from daskhpc.errors import InputError

__all__ = ["check_inputs", "as_csr", "matrix_of", "like_input", "permutations", "localize"]


def check_inputs(a, b) -> tuple[sp.csr_array, sp.csr_array]:
    """float64 CSR copies of A and B (int32 indices where they fit), or an InputError
    saying what is wrong. ``b`` None: B is A, the same array (read and copied once).

    A path (str or os.PathLike) is read with :func:`daskhpc.io.read`, as every other
    workflow's ``fit`` does; so is a reader's ``SparseInput``."""
    out = []
    for name, m in (("A", a), ("B", b)):
        if m is None:
            out.append(out[0])
            continue
        m = as_csr(m, name)
        if m.shape[0] == 0 or m.shape[1] == 0 or m.nnz == 0:
            raise InputError(f"{name} is empty ({m.shape[0]} x {m.shape[1]}, {m.nnz} nonzeros)")
        if not np.isfinite(m.data).all():
            raise InputError(f"{name} holds NaN or infinite values")
        m.sum_duplicates()
        out.append(m)
    if out[0].shape[1] != out[1].shape[0]:
        raise InputError(f"dimension mismatch: A is {out[0].shape[0]} x {out[0].shape[1]}, "
                         f"B is {out[1].shape[0]} x {out[1].shape[1]}; "
                         f"A's columns must equal B's rows")
    return out[0], out[1]


def as_csr(m, name: str) -> sp.csr_array:
    """``m`` (see :func:`matrix_of`) as a float64 CSR array, or an InputError when it is
    not 2-D (``name``: how the message starts)."""
    m = matrix_of(m)
    if not sp.issparse(m):
        m = np.asarray(m)
        if m.ndim != 2:
            raise InputError(f"{name} must be a 2-D matrix, got {m.ndim} dimension(s)")
    m = sp.csr_array(m, dtype=np.float64)
    it = index_dtype(max(m.nnz, *m.shape))
    if m.indices.dtype != it:           # a reader's int64 indices: half the bytes
        m.sum_duplicates()              # (in place first: the values stay shared)
        m = sp.csr_array((m.data, m.indices.astype(it), m.indptr.astype(it)), shape=m.shape)
    return m


def matrix_of(m):
    """The matrix of a path or a reader's ``SparseInput``; anything else as it is."""
    if isinstance(m, (str, os.PathLike)):
        from daskhpc.io import read

        m = read(m)
    if hasattr(m, "matrix") and hasattr(m, "tensor") and hasattr(m, "path"):
        if m.matrix is None:
            raise InputError(f"{m.path}: a matrix is needed, not a tensor")
        m = m.matrix
    return m


def like_input(c, *inputs):
    """C as the kind of sparse matrix the user gave: ``csr_matrix`` when every sparse
    input is a ``scipy.sparse.spmatrix`` (and at least one is), else ``csr_array``.

    Examples
    --------
    >>> type(like_input(sp.csr_array(sp.eye(2)), sp.eye(2, format="csr"))).__name__
    'csr_matrix'
    >>> type(like_input(sp.csr_array(sp.eye(2)), sp.csr_array(sp.eye(2)))).__name__
    'csr_array'
    """
    given = [m for m in inputs if sp.issparse(m)]
    if c is None or not sp.issparse(c) or not given or \
            not all(isinstance(m, sp.spmatrix) for m in given):
        return c
    return sp.csr_matrix(c)


def permutations(shape, seed: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row, inner and column permutations (identity when ``seed`` is None)."""
    m, kk, n = shape
    if seed is None:
        return np.arange(m), np.arange(kk), np.arange(n)
    rng = np.random.default_rng(seed)
    return rng.permutation(m), rng.permutation(kk), rng.permutation(n)


def localize(perm: np.ndarray, bounds) -> np.ndarray:
    """``perm`` with every segment ``bounds[u]:bounds[u + 1]`` sorted ascending.

    The random permutation decides which block each row, inner index or column
    goes to (load balance); the order inside a block is free, and keeping the
    original order there keeps the locality the input's numbering has
    (neighbours with nearby ids), which a fully random order destroys
    (measured: docs/spgemm.md).

    >>> localize(np.array([5, 1, 3, 4, 0, 2]), [0, 3, 6]).tolist()
    [1, 3, 5, 0, 2, 4]
    """
    out = np.array(perm, copy=True)
    bounds = np.asarray(bounds, dtype=np.int64)
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        out[lo:hi].sort()
    return out
