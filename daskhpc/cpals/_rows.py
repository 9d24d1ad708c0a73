"""Row-wise helpers of CP-ALS: the R-wide dense products, column reductions, moving rows
in and out of messages, and the seeded initial factor rows."""

from __future__ import annotations

import numba
import numpy as np

_GOLD = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def gram(U) -> np.ndarray:
    """``U^T U`` (R x R): numpy's ``syrk`` path, exactly symmetric, the same bits anywhere."""
    U = np.ascontiguousarray(U, dtype=np.float64)
    return U.T @ U


@numba.njit(cache=True, nogil=True)
def col_absmax(U):  # pragma: no cover - numba
    """``max_i |U[i, r]|`` per column (0 for no rows)."""
    n, R = U.shape
    out = np.zeros(R)
    for i in range(n):
        for r in range(R):
            a = abs(U[i, r])
            if a > out[r]:
                out[r] = a
    return out


@numba.njit(cache=True, nogil=True)
def col_inner(A, B):  # pragma: no cover - numba
    """``sum_i A[i, r] * B[i, r]`` per column, rows ascending."""
    n, R = A.shape
    out = np.zeros(R)
    for i in range(n):
        for r in range(R):
            out[r] += A[i, r] * B[i, r]
    return out


@numba.njit(cache=True, nogil=True)
def sum_rows_into(acc, pos, rows):  # pragma: no cover - numba
    """``acc[pos[k]] += rows[k]`` (a fold: partial MTTKRP rows added at their owner)."""
    R = acc.shape[1]
    for k in range(pos.size):
        p = pos[k]
        for r in range(R):
            acc[p, r] += rows[k, r]


@numba.njit(cache=True, nogil=True)
def scatter_rows(dst, pos, rows):  # pragma: no cover - numba
    """``dst[pos[k]] = rows[k]`` (an expand: received factor rows put in place)."""
    R = dst.shape[1]
    for k in range(pos.size):
        p = pos[k]
        for r in range(R):
            dst[p, r] = rows[k, r]


@numba.njit(cache=True, nogil=True)
def _mix(z):  # pragma: no cover - numba
    # splitmix64's finaliser: a bijection of uint64 with good avalanche
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


@numba.njit(cache=True, nogil=True)
def _init_rows(seed, mode, rows, R):  # pragma: no cover - numba
    out = np.empty((rows.size, R))
    base = _mix(_mix(np.uint64(seed) + _GOLD) + np.uint64(mode) * _GOLD)
    for k in range(rows.size):
        h = _mix(base ^ (np.uint64(rows[k]) * _M1 + _GOLD))
        for r in range(R):
            z = _mix(h + np.uint64(r + 1) * _GOLD)
            out[k, r] = np.float64(z >> np.uint64(11)) * (1.0 / 9007199254740992.0)
    return out


def init_rows(seed: int, mode: int, rows, R: int) -> np.ndarray:
    """Initial factor rows ``U_mode(rows, :)``: uniform [0, 1), a function of (seed, mode,
    row, column) only, so every part makes the rows it needs itself."""
    if seed < 0:
        raise ValueError(f"the seed must be non-negative, got {seed}")
    return _init_rows(int(seed), int(mode), np.ascontiguousarray(rows, dtype=np.int64), int(R))
