"""The dense R x R steps of CP-ALS, shared by the serial reference and the Program.

* :func:`hadamard_grams`: ``H = *_{m != n} U_m^T U_m`` (Algorithm 1, the matrix whose
  pseudo-inverse is V);
* :func:`pinv_sym`: ``V = H^+`` by a symmetric eigendecomposition. H is positive
  semi-definite and is singular whenever some factor has rank < R (a one-nonzero tensor,
  an over-factored one); a Cholesky solve (SPLATT's DPOTRF) then fails or returns NaN,
  while the pseudo-inverse gives the minimum-norm least-squares solution;
* :func:`solve_rows`: the mode-n update ``U = M (H + reg I)^+`` of the rows of ``M``
  (``reg = 0``: plain ALS; ``reg > 0``: the L2-regularised normal equations of SPLATT's
  ``--reg`` and tensorly's ``l2_reg``), for a nonnegative run projected onto ``U >= 0``
  (projected ALS); row by row, so a part solving its own rows gets the whole matrix's bits;
* :func:`column_scale`: the Tensor Toolbox normalisation (its ``cp_als``, ref. [6] of
  the paper): 2-norms of the columns in the first iteration, ``max(|column max|, 1)``
  after; a zero column keeps divisor 1 (lambda_r = 0) instead of dividing by zero;
* :func:`fit_value`: ``1 - sqrt(max(||X||^2 + lambda^T (*_m U_m^T U_m) lambda -
  2 <M_N U_N, lambda>, 0)) / ||X||`` (Tensor Toolbox, from the last mode's MTTKRP).

Examples
--------
>>> import numpy as np
>>> H = np.array([[1.0, 1.0], [1.0, 1.0]])            # rank 1: Cholesky would fail
>>> np.round(pinv_sym(H), 12).tolist()
[[0.25, 0.25], [0.25, 0.25]]
>>> column_scale(np.array([9.0, 0.0]), None, first=True)     # a zero column: divisor 1
(array([3., 0.]), array([3., 1.]))
"""

from __future__ import annotations

import numpy as np

__all__ = ["hadamard_grams", "pinv_sym", "solve_rows", "column_scale", "fit_value", "converged"]


def hadamard_grams(grams, skip: int | None = None) -> np.ndarray:
    """Element-wise product of the Grams, mode order, leaving out mode ``skip``."""
    H = None
    for m, G in enumerate(grams):
        if m == skip:
            continue
        H = G.copy() if H is None else H * G
    return H


def pinv_sym(H: np.ndarray) -> np.ndarray:
    """Pseudo-inverse of a symmetric positive semi-definite matrix.

    Eigenvalues at most ``R * eps * max |w|`` count as zero (MATLAB's ``pinv`` rule);
    an all-zero H gives V = 0.
    """
    w, Q = np.linalg.eigh(H)
    top = float(np.max(np.abs(w))) if w.size else 0.0
    keep = w > H.shape[0] * np.finfo(np.float64).eps * top
    inv = np.zeros_like(w)
    np.divide(1.0, w, out=inv, where=keep)
    return (Q * inv) @ Q.T


def solve_rows(M: np.ndarray, grams, n: int, reg: float = 0.0,
               nonnegative: bool = False) -> np.ndarray:
    """``M (H + reg I)^+`` with ``H`` the Hadamard product of the Grams but mode ``n``'s;
    negative entries set to 0 when ``nonnegative``."""
    H = hadamard_grams(grams, skip=n)
    if reg:
        H[np.diag_indices_from(H)] += reg
    U = np.ascontiguousarray(M, dtype=np.float64) @ pinv_sym(H)
    if nonnegative:
        np.maximum(U, 0.0, out=U)
    return U


def column_scale(sumsq, absmax, first: bool):
    """``(lambda, divisor)`` of the new factor's columns.

    Parameters
    ----------
    sumsq : array (R,)
        Squared 2-norms of the columns (used when ``first``).
    absmax : array (R,) or None
        ``max_i |U(i, r)|`` (used after the first iteration).
    first : bool
        The first iteration (2-norm) or a later one (max-norm, at least 1).
    """
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
