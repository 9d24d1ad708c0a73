"""Input checks and the load-balancing permutation, shared by run and plan (no dask)."""

from __future__ import annotations

import os

import numpy as np
import scipy.sparse as sp

from daskhpc._narrow import index_dtype
from daskhpc.errors import InputError


def check_inputs(a, b) -> tuple[sp.csr_array, sp.csr_array]:
    """float64 canonical CSR copies of A and B (a path is read), or an InputError."""
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
    """``m`` as a float64 CSR array, or an InputError when it is not 2-D."""
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
    """C as the kind of sparse matrix the user gave (``csr_matrix`` for ``spmatrix`` inputs)."""
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
    """``perm`` with every segment between ``bounds`` sorted: locality kept inside a block."""
    out = np.array(perm, copy=True)
    bounds = np.asarray(bounds, dtype=np.int64)
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        out[lo:hi].sort()
    return out
