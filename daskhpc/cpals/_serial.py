"""The plain serial reference: CP-ALS (Algorithm 1) with the coordinate MTTKRP of
Algorithm 2, on the whole tensor in one process.

Per mode n: ``M = X_(n) (KR of the other factors)``; ``U_n = M (*_{m != n} G_m + reg
I)^+`` (projected for a nonnegative run), columns normalised into lambda (Tensor
Toolbox); ``G_n = U_n^T U_n``. The fit comes from the last mode's MTTKRP."""

from __future__ import annotations

import time

import numpy as np

from ._als import column_scale, converged, fit_value, solve_rows
from ._kernels import mttkrp_into, slices
from ._rows import col_absmax, col_inner, gram, init_rows
from ._data import Tensor


def initial_factors(shape, rank: int, seed: int) -> list[np.ndarray]:
    """U_m(i, :) for every mode and row: :func:`._kernels.init_rows` of (seed, m, i)."""
    return [init_rows(seed, m, np.arange(n), rank) for m, n in enumerate(shape)]


def iteration(layout, U: list, G: list, first: bool, normx2: float, reg: float = 0.0,
              nonnegative: bool = False):
    """One iteration over every mode on ``U`` and ``G`` in place, with the MTTKRP slices
    ``layout``; returns ``(lam, fit)`` (also a one-part run's whole iteration)."""
    N, R = len(U), U[0].shape[1]
    for n in range(N):
        M = np.empty((U[n].shape[0], R))
        mttkrp_into(layout[n], U, M)                           # Algorithm 2
        Unew = solve_rows(M, G, n, reg, nonnegative)
        lam, div = column_scale(np.einsum("ir,ir->r", Unew, Unew) if first else None,
                                None if first else col_absmax(Unew), first)
        U[n] = Unew / div
        G[n] = gram(U[n])
    inner = float(lam @ col_inner(M, U[N - 1]))
    return lam, fit_value(normx2, lam, G, inner)


def run_serial(X: Tensor, rank: int, iters: int, tol: float, seed: int, *,
               reg: float = 0.0, nonnegative: bool = False, init=None,
               callback=None) -> dict:
    """CP-ALS on ``X`` from ``init`` (None: seeded): ``factors``, ``lam``, ``history``."""
    N, R = X.order, int(rank)
    layout = [slices(X.coords, X.vals, n, X.shape) for n in range(N)]
    U = initial_factors(X.shape, R, seed) if init is None else \
        [np.array(F, dtype=np.float64) for F in init]
    G = [gram(u) for u in U]
    normx2 = X.norm2()
    lam = np.ones(R)
    history: list[dict] = []
    for it in range(int(iters)):
        t0 = time.perf_counter()
        lam, fit = iteration(layout, U, G, it == 0, normx2, reg, nonnegative)
        row = {"iteration": it, "fit": fit, "time_s": time.perf_counter() - t0}
        history.append(row)
        if callback is not None:
            callback(row)
        if converged([h["fit"] for h in history], tol):
            break
    return {"factors": U, "lam": lam, "history": history}
