"""Initial factors other than the seeded random rows: the SVD initialisation and factors
the caller gives.

:func:`svd_factors`: per mode the R leading left singular vectors of ``X_(n)``
(tensorly's ``init="svd"``) from the sparse Gram ``X_(n) X_(n)^T``, sign-fixed; columns
beyond ``I_n`` seeded random, absolute values for a nonnegative run."""

from __future__ import annotations

import numpy as np

from daskhpc.arrays import unique_sorted
from daskhpc.errors import InputError

from ._rows import init_rows
from ._data import Tensor

#: Up to this many rows the Gram X_(n) X_(n)^T is made dense and fully diagonalised
#: (exact, deterministic); above it ARPACK (``eigsh``) finds the R leading eigenvectors.
DENSE_GRAM_ROWS = 4096


def _unfolding(X: Tensor, n: int):
    """``X_(n)`` as a CSR matrix, its columns the distinct fibres holding a nonzero."""
    import scipy.sparse as sp

    other = np.delete(X.coords, n, axis=0)
    dims = [d for m, d in enumerate(X.shape) if m != n]
    if float(np.prod(dims, dtype=np.float64)) < 2.0 ** 62:     # one int64 key per fibre
        _, col = unique_sorted(np.ravel_multi_index(tuple(other), dims), return_inverse=True)
    else:
        _, col = np.unique(other.T, axis=0, return_inverse=True)
    col = np.asarray(col).ravel()
    return sp.csr_matrix((np.asarray(X.vals, np.float64), (X.coords[n], col)), shape=(X.shape[n], int(col.max()) + 1))


def _leading(A, k: int) -> np.ndarray:
    """The k leading eigenvectors of ``A A^T`` (descending), sign-fixed."""
    from scipy.sparse.linalg import LinearOperator, eigsh

    m = A.shape[0]
    if m <= DENSE_GRAM_ROWS:
        w, Q = np.linalg.eigh((A @ A.T).toarray())
        Q = Q[:, ::-1][:, :k]
    else:
        op = LinearOperator((m, m), matvec=lambda x: A @ (A.T @ x), dtype=np.float64)
        w, Q = eigsh(op, k=k, which="LA", v0=np.ones(m))     # v0: deterministic
        Q = Q[:, np.argsort(w)[::-1]]
    big = np.argmax(np.abs(Q), axis=0)
    return Q * np.where(Q[big, np.arange(Q.shape[1])] < 0, -1.0, 1.0)


def svd_factors(X: Tensor, rank: int, seed: int, nonnegative: bool = False) -> list:
    """The SVD initial factors (see the module docstring)."""
    out = []
    for n in range(X.order):
        In = X.shape[n]
        k = min(rank, In) if In <= DENSE_GRAM_ROWS else min(rank, In - 1)
        U = np.zeros((In, rank))
        U[:, :k] = _leading(_unfolding(X, n), k)
        if k < rank:
            U[:, k:] = init_rows(seed, n, np.arange(In), rank)[:, k:]
        out.append(np.abs(U) if nonnegative else U)
    return out


def given_factors(init, X: Tensor, rank: int) -> list:
    """``init`` (N arrays ``I_n x R``) checked and copied; a mismatch is an InputError."""
    if len(init) != X.order:
        raise InputError(f"init: {len(init)} factor matrices given for a tensor of order "
                         f"{X.order}")
    out = []
    for n, F in enumerate(init):
        F = np.array(F, dtype=np.float64)
        if F.shape != (X.shape[n], rank):
            raise InputError(f"init: factor {n} has shape {F.shape}, the tensor needs "
                             f"{(X.shape[n], rank)}")
        if not np.isfinite(F).all():
            raise InputError(f"init: factor {n} has a non-finite entry")
        out.append(F)
    return out
