"""The MTTKRP of CP-ALS: numba kernels over the nonzeros of a mode grouped by row.

``M(i_n, :) += x * Hadamard_{m != n} U_m(i_m, :)`` for every nonzero (the hypertensor
paper's Algorithm 2, order N), over a CSR of mode n's rows (``ptr``, the other modes'
indices ``idx``, ``val``). Every loop has a fixed order, so the partition-aware
reference and the distributed run get the same bits."""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def mttkrp_rows(ptr, idx, val, factors, out):  # pragma: no cover - numba
    """``out[i] = sum_{e in ptr[i]:ptr[i+1]} val[e] * Hadamard_f factors[f][idx[f, e]]``."""
    R = out.shape[1]
    nf = len(factors)
    acc = np.empty(R)
    had = np.empty(R)
    for i in range(ptr.size - 1):
        for r in range(R):
            acc[r] = 0.0
        for e in range(ptr[i], ptr[i + 1]):
            x = val[e]
            F = factors[0]
            j = idx[0, e]
            for r in range(R):
                had[r] = x * F[j, r]
            for f in range(1, nf):
                F = factors[f]
                j = idx[f, e]
                for r in range(R):
                    had[r] *= F[j, r]
            for r in range(R):
                acc[r] += had[r]
        for r in range(R):
            out[i, r] = acc[r]


@numba.njit(cache=True, nogil=True)
def _mttkrp_rows3(ptr, idx, val, B, C, out):  # pragma: no cover - numba
    # mttkrp_rows for order 3, with the two factor rows in registers
    R = out.shape[1]
    acc = np.empty(R)
    for i in range(ptr.size - 1):
        for r in range(R):
            acc[r] = 0.0
        for e in range(ptr[i], ptr[i + 1]):
            x = val[e]
            j = idx[0, e]
            k = idx[1, e]
            for r in range(R):
                acc[r] += x * B[j, r] * C[k, r]
        for r in range(R):
            out[i, r] = acc[r]


@numba.njit(cache=True, nogil=True)
def mttkrp_fibers(ptr, idx, val, factors, out):  # pragma: no cover - numba
    """:func:`mttkrp_rows` where a row's nonzeros come grouped by ``idx[0]``: the group's
    factor row multiplies the group's sum once (fiber reuse)."""
    R = out.shape[1]
    nf = len(factors)
    acc = np.empty(R)
    fib = np.empty(R)
    had = np.empty(R)
    F0 = factors[0]
    for i in range(ptr.size - 1):
        for r in range(R):
            acc[r] = 0.0
        e = ptr[i]
        end = ptr[i + 1]
        while e < end:
            k = idx[0, e]
            for r in range(R):
                fib[r] = 0.0
            while e < end and idx[0, e] == k:
                x = val[e]
                F = factors[1]
                j = idx[1, e]
                for r in range(R):
                    had[r] = x * F[j, r]
                for f in range(2, nf):
                    F = factors[f]
                    j = idx[f, e]
                    for r in range(R):
                        had[r] *= F[j, r]
                for r in range(R):
                    fib[r] += had[r]
                e += 1
            for r in range(R):
                acc[r] += F0[k, r] * fib[r]
        for r in range(R):
            out[i, r] = acc[r]


@numba.njit(cache=True, nogil=True)
def _mttkrp_fibers3(ptr, idx, val, C, B, out):  # pragma: no cover - numba
    # mttkrp_fibers for order 3: idx[0] indexes C (the group), idx[1] B
    R = out.shape[1]
    acc = np.empty(R)
    fib = np.empty(R)
    for i in range(ptr.size - 1):
        for r in range(R):
            acc[r] = 0.0
        e = ptr[i]
        end = ptr[i + 1]
        while e < end:
            k = idx[0, e]
            for r in range(R):
                fib[r] = 0.0
            while e < end and idx[0, e] == k:
                x = val[e]
                j = idx[1, e]
                for r in range(R):
                    fib[r] += x * B[j, r]
                e += 1
            for r in range(R):
                acc[r] += C[k, r] * fib[r]
        for r in range(R):
            out[i, r] = acc[r]


@numba.njit(cache=True, nogil=True)
def counting_order(keys, nkeys):  # pragma: no cover - numba
    # stable counting sort: positions of the nonzeros grouped by key, storage order kept
    return _counting_order(keys, nkeys, True, np.empty(0, np.int64))


@numba.njit(cache=True, nogil=True)
def _key_ptr(keys, nkeys, every, sel):  # pragma: no cover - numba
    # where each key's positions start once grouped by key: counts, then their prefix sum
    ptr = np.zeros(nkeys + 1, np.int64)
    for t in range(keys.size if every else sel.size):
        ptr[keys[t if every else sel[t]] + 1] += 1
    for i in range(nkeys):
        ptr[i + 1] += ptr[i]
    return ptr


@numba.njit(cache=True, nogil=True)
def _counting_order(keys, nkeys, every, sel):  # pragma: no cover - numba
    # counting_order of the positions ``sel`` (in their order), or of all if ``every``
    n = keys.size if every else sel.size
    ptr = _key_ptr(keys, nkeys, every, sel)
    at = ptr[:-1].copy()
    order = np.empty(n, np.int64)
    for t in range(n):
        e = t if every else sel[t]
        order[at[keys[e]]] = e
        at[keys[e]] += 1
    return ptr, order


#: Fiber reuse pays when a row's nonzeros fall into groups of at least this many on
#: average (docs/cpals.md, "MTTKRP kernel").
FIBER_MIN = 3.0


@dataclass(frozen=True)
class Slices:
    """The nonzeros of one mode grouped by row (CSR ``ptr``, ``idx`` in the modes ``modes``,
    the shortest first and sorted within a row, ``val``); ``fibers``: use fiber reuse."""

    ptr: np.ndarray
    idx: np.ndarray
    val: np.ndarray
    modes: tuple
    fibers: bool


@numba.njit(cache=True, nogil=True)
def _group_rows_lsd(coords, vals, every, sel, mode, modes, nrows, nouter, idx,
                    val):  # pragma: no cover - numba
    # the nonzeros sorted by (row of ``mode``, index of ``modes[0]``), storage order kept
    # among equals: two stable counting sorts (LSD radix, outer mode first), the second
    # writing the sorted indices and values; returns the row pointer and the
    # number of (row, outer index) groups. The nonzeros taken: ``sel`` (or ``every``)
    _, by_outer = _counting_order(coords[modes[0]], nouter, every, sel)
    # the second sort writes the indices and values at their places directly
    ptr = _key_ptr(coords[mode], nrows, every, sel)
    at = ptr[:-1].copy()
    for e in by_outer:
        r = coords[mode, e]
        _put(coords, vals, modes, e, coords[modes[0], e], at[r], idx, val)
        at[r] += 1
    groups = 0
    for i in range(nrows):
        for q in range(ptr[i], ptr[i + 1]):
            if q == ptr[i] or idx[0, q] != idx[0, q - 1]:
                groups += 1
    return ptr, groups


@numba.njit(cache=True, nogil=True)
def _group_rows_by_row(coords, vals, every, sel, mode, modes, nrows, nouter, idx,
                       val):  # pragma: no cover - numba
    # the same order as _group_rows_lsd: one counting sort by row, then each row's
    # nonzeros by the outer mode (counting when the row is at least a quarter of that
    # mode's length, else a stable merge sort), a row's gathers staying in cache
    outer = modes[0]
    ptr, byrow = _counting_order(coords[mode], nrows, every, sel)
    longest = 0
    for i in range(nrows):
        longest = max(longest, ptr[i + 1] - ptr[i])
    cnt = np.zeros(nouter + 1, np.int64)
    keys = np.empty(longest, np.int64)
    groups = 0
    for i in range(nrows):
        a, L = ptr[i], ptr[i + 1] - ptr[i]
        for q in range(L):
            keys[q] = coords[outer, byrow[a + q]]
        if nouter <= 4 * L:
            for q in range(L):
                cnt[keys[q] + 1] += 1
            for k in range(nouter):
                if cnt[k + 1]:
                    groups += 1
                cnt[k + 1] += cnt[k]
            for q in range(L):
                k = keys[q]
                w = a + cnt[k]
                cnt[k] += 1
                _put(coords, vals, modes, byrow[a + q], k, w, idx, val)
            cnt[:] = 0
        elif L:
            o = np.argsort(keys[:L], kind="mergesort")
            for q in range(L):
                k = keys[o[q]]
                if q == 0 or k != keys[o[q - 1]]:
                    groups += 1
                _put(coords, vals, modes, byrow[a + o[q]], k, a + q, idx, val)
    return ptr, groups


@numba.njit(cache=True, nogil=True)
def _put(coords, vals, modes, e, k, w, idx, val):  # pragma: no cover - numba
    idx[0, w] = k
    for j in range(1, modes.size):
        idx[j, w] = coords[modes[j], e]
    val[w] = vals[e]


#: Rows of at most this many nonzeros on average are grouped row by row (a row's gathers
#: stay in cache), longer ones by two global counting sorts (docs/cpals.md, "MTTKRP
#: kernel"). Both give the same order.
ROW_FIRST_MAX = 4096


def slices(coords, vals, mode: int, shape, fibers: bool | None = None,
           select=None) -> Slices:
    """Group the nonzeros (``coords``: N x nnz, or the positions ``select``) of mode ``mode``
    by row; ``fibers=None`` decides by the average group size (:data:`FIBER_MIN`)."""
    # the part's own dtypes (int32 indices, float32 values: numba compiles for them and
    # widens each value exactly): no int64/float64 copy of the part
    coords = np.ascontiguousarray(coords)
    vals = np.ascontiguousarray(vals)
    if vals.dtype not in (np.float32, np.float64):
        vals = vals.astype(np.float64)
    others = [m for m in range(coords.shape[0]) if m != mode]
    outer = min(others, key=lambda m: (shape[m], m))
    order_modes = (outer, *[m for m in others if m != outer])
    big = coords.size and int(coords.max()) >= 2**31 - 1
    every = select is None
    sel = np.zeros(0, np.int64) if every else np.ascontiguousarray(select, dtype=np.int64)
    nnz = coords.shape[1] if every else sel.size
    idx = np.empty((len(order_modes), nnz), np.int64 if big else np.int32)
    val = np.empty(nnz, vals.dtype)
    group = _group_rows_by_row if nnz <= ROW_FIRST_MAX * max(int(shape[mode]), 1) else \
        _group_rows_lsd
    ptr, groups = group(coords, vals, every, sel,
                        int(mode), np.array(order_modes, np.int64), int(shape[mode]),
                        int(shape[outer]), idx, val)
    if fibers is None:
        fibers = nnz >= FIBER_MIN * groups and len(order_modes) >= 2
    return Slices(ptr, idx, val, order_modes, bool(fibers))


def mttkrp_into(s: Slices, factors, out) -> None:
    """``out = MTTKRP`` of the rows of ``s`` with ``factors[m]`` mode m's rows."""
    F = tuple(factors[m] for m in s.modes)
    if len(F) == 2:
        (_mttkrp_fibers3 if s.fibers else _mttkrp_rows3)(s.ptr, s.idx, s.val, F[0], F[1], out)
    else:
        (mttkrp_fibers if s.fibers else mttkrp_rows)(s.ptr, s.idx, s.val, F, out)


def mttkrp(coords, vals, factors, mode: int) -> np.ndarray:
    """MTTKRP of mode ``mode``: ``X_(n) (Khatri-Rao of the other factors)``, I_n x R.

    Parameters
    ----------
    coords : int array (N, nnz)
    vals : float array (nnz,)
    factors : list of N arrays (I_m x R)
        ``factors[mode]`` is not read (only its row count).
    mode : int

    Examples
    --------
    >>> c = np.array([[0, 1], [1, 0], [0, 0]]); v = np.array([2.0, 3.0])
    >>> U = [np.ones((2, 1)), np.array([[1.0], [5.0]]), np.array([[7.0]])]
    >>> mttkrp(c, v, U, 0).ravel().tolist()        # 2*5*7 and 3*1*7
    [70.0, 21.0]
    """
    shape = [f.shape[0] for f in factors]
    s = slices(coords, vals, mode, shape)
    out = np.empty((shape[mode], factors[0].shape[1]))
    mttkrp_into(s, [np.ascontiguousarray(f, dtype=np.float64) for f in factors], out)
    return out


def _warm_up_plan() -> None:
    """The client's kernels: ``plan`` on a tiny 3-mode tensor with the default options."""
    from daskhpc import cpals

    dense = np.zeros((3, 3, 2))
    dense[[0, 1, 2, 0, 1, 2], [0, 1, 2, 1, 2, 0], [0, 1, 0, 1, 0, 1]] = 1.0
    cpals.plan(dense, 2, rank=2)


#: What ``plan`` and a run compile, for daskhpc.runtime.prepare_kernels (the client
#: compiles it once before the cluster starts; the workers then load it): the client's
#: kernels, the parts' data a run builds and the workers' warm-up (3-mode tensors).
WARMUP_PLAN = (_warm_up_plan,)
WARMUP = (_warm_up_plan, "daskhpc.cpals._job:warm_up_parts", "daskhpc.cpals._job:warm_up")
