"""The dense R x R steps of CP-ALS, shared by the serial reference and the Program.

``H = *_{m != n} U_m^T U_m`` (Algorithm 1), ``V = H^+`` by a symmetric eigendecomposition
(H is singular whenever a factor has rank < R, where SPLATT's Cholesky fails), the row
update ``U = M (H + reg I)^+`` (projected onto U >= 0 for a nonnegative run), the Tensor
Toolbox normalisation and fit (the paper's ref. [6])."""

from __future__ import annotations

import numpy as np


def hadamard_grams(grams, skip: int | None = None) -> np.ndarray:
    """Element-wise product of the Grams, mode order, leaving out mode ``skip``."""
    H = None
    for m, G in enumerate(grams):
        if m == skip:
            continue
        H = G.copy() if H is None else H * G
    return H


def pinv_sym(H: np.ndarray) -> np.ndarray:
    """Pseudo-inverse of a symmetric PSD matrix: eigenvalues at most ``R eps max |w|`` count
    as zero (MATLAB's ``pinv`` rule)."""
    w, Q = np.linalg.eigh(H)
    top = float(np.max(np.abs(w))) if w.size else 0.0
    keep = w > H.shape[0] * np.finfo(np.float64).eps * top
    inv = np.zeros_like(w)
    np.divide(1.0, w, out=inv, where=keep)
    return (Q * inv) @ Q.T


def solve_rows(M: np.ndarray, grams, n: int, reg: float = 0.0,
               nonnegative: bool = False) -> np.ndarray:
    """``M (H + reg I)^+``, H the Hadamard product of the other Grams; projected if nonnegative."""
    H = hadamard_grams(grams, skip=n)
    if reg:
        H[np.diag_indices_from(H)] += reg
    U = np.ascontiguousarray(M, dtype=np.float64) @ pinv_sym(H)
    if nonnegative:
        np.maximum(U, 0.0, out=U)
    return U


def column_scale(sumsq, absmax, first: bool):
    """``(lambda, divisor)`` of the new columns: 2-norms (from ``sumsq``) in the first
    iteration, ``max(absmax, 1)`` after; a zero column keeps divisor 1."""
    lam = np.sqrt(sumsq) if first else np.maximum(absmax, 1.0)
    return lam, np.where(lam > 0.0, lam, 1.0)


def fit_value(normx2: float, lam, grams, inner: float) -> float:
    """The Tensor Toolbox fit from ``||X||^2``, lambda, all Grams and ``<M_N U_N, lambda>``."""
    H = hadamard_grams(grams)
    normp2 = float(lam @ H @ lam)
    resid2 = max(normx2 + normp2 - 2.0 * inner, 0.0)
    return float(1.0 - np.sqrt(resid2) / np.sqrt(normx2))


def converged(fits, tol: float) -> bool:
    """Stop rule: after the second iteration, ``|fit_t - fit_(t-1)| < tol``."""
    return len(fits) >= 2 and abs(fits[-1] - fits[-2]) < tol
