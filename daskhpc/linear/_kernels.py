"""numba kernels of data-parallel SGD for linear classifiers (Renggli 2017, section 2.2).

Gradient factors: logistic ``-y / (1 + exp(y m))`` (2.2.1), hinge ``-y`` if ``y m < 1``
else 0 (2.2.2). A batch gradient's index set is the union of its rows' features
(explicit zeros kept, so a call's communication depends on the batch only), each
feature summed in row order. One-vs-rest: ``w`` class-major, K blocks of N.
"""

from __future__ import annotations

import numba
import numpy as np

LOSSES = {"log": 0, "hinge": 1}


@numba.njit(cache=True, nogil=True)
def margins(indptr, indices, data, rows, w):
    """``m_j = x_j . w`` for the given rows (summed in CSR order)."""
    out = np.empty(rows.size, np.float64)
    for j in range(rows.size):
        r = rows[j]
        s = 0.0
        for q in range(indptr[r], indptr[r + 1]):
            s += data[q] * w[indices[q]]
        out[j] = s
    return out


@numba.njit(cache=True, nogil=True)
def coefficients(m, y, loss):
    """Gradient factor per row: grad f_j(w) = coef_j x_j."""
    out = np.empty(m.size, np.float64)
    for j in range(m.size):
        z = y[j] * m[j]
        if loss == 0:
            out[j] = -y[j] / (1.0 + np.exp(z))      # section 2.2.1 (exp overflow -> -0)
        else:
            out[j] = -y[j] if z < 1.0 else 0.0      # section 2.2.2
    return out


@numba.njit(cache=True, nogil=True)
def batch_gradient(indptr, indices, data, rows, coef):
    """``sum_j coef_j x_j`` over ``rows`` as sorted (uint32 index, value) pairs.

    Each feature's first term is taken as it is (a -0.0 stays); a dense scratch vector
    where the features span at most ``4 n + 64`` indices (a9a: 33 -> 6 us a call), else
    a stable sort."""
    n = 0
    top = -1
    for r in rows:
        n += indptr[r + 1] - indptr[r]
        for q in range(indptr[r], indptr[r + 1]):
            if indices[q] > top:
                top = indices[q]
    if top + 1 <= 4 * n + 64:
        return _dense_gradient(indptr, indices, data, rows, coef, top + 1)
    f = np.empty(n, np.int64)
    v = np.empty(n, np.float64)
    k = 0
    for j in range(rows.size):
        r = rows[j]
        for q in range(indptr[r], indptr[r + 1]):
            f[k] = indices[q]
            v[k] = coef[j] * data[q]
            k += 1
    order = np.argsort(f, kind="mergesort")        # stable: rows stay in batch order
    oi = np.empty(n, np.uint32)
    ov = np.empty(n, np.float64)
    m = 0
    for t in range(n):
        q = order[t]
        if m > 0 and oi[m - 1] == f[q]:
            ov[m - 1] += v[q]
        else:
            oi[m] = f[q]
            ov[m] = v[q]
            m += 1
    return oi[:m].copy(), ov[:m].copy()


@numba.njit(cache=True, nogil=True)
def _dense_gradient(indptr, indices, data, rows, coef, M):
    """:func:`batch_gradient` over features ``[0, M)`` in a dense scratch vector."""
    acc = np.empty(M, np.float64)
    seen = np.zeros(M, np.bool_)
    m = 0
    for j in range(rows.size):
        r = rows[j]
        c = coef[j]
        for q in range(indptr[r], indptr[r + 1]):
            f = indices[q]
            if seen[f]:
                acc[f] += c * data[q]
            else:
                acc[f] = c * data[q]
                seen[f] = True
                m += 1
    oi = np.empty(m, np.uint32)
    ov = np.empty(m, np.float64)
    k = 0
    for f in range(M):
        if seen[f]:
            oi[k] = f
            ov[k] = acc[f]
            k += 1
    return oi, ov


@numba.njit(cache=True, nogil=True)
def batch_features(indptr, indices, rows, B, T, N):
    """The index sets of :func:`batch_gradient` for the ``T`` batches: ``(ptr, idx)``."""
    mark = np.zeros(N, np.bool_)
    tot = 0
    for r in rows:
        tot += indptr[r + 1] - indptr[r]
    out = np.empty(tot, np.uint32)
    ptr = np.zeros(T + 1, np.int64)
    k = 0
    for i in range(T):
        start = k
        for j in range(i * B, min((i + 1) * B, rows.size)):
            r = rows[j]
            for q in range(indptr[r], indptr[r + 1]):
                c = indices[q]
                if not mark[c]:
                    mark[c] = True
                    out[k] = c
                    k += 1
        out[start:k].sort()
        for t in range(start, k):
            mark[out[t]] = False
        ptr[i + 1] = k
    return ptr, out[:k].copy()


@numba.njit(cache=True, nogil=True)
def losses(m, y, loss):
    """Per-row loss of the margins ``m``."""
    out = np.empty(m.size, np.float64)
    for j in range(m.size):
        z = -y[j] * m[j]
        if loss == 0:
            out[j] = z + np.log1p(np.exp(-z)) if z > 0 else np.log1p(np.exp(z))
        else:
            out[j] = max(0.0, 1.0 + z)
    return out


@numba.njit(cache=True, nogil=True)
def margins_ovr(indptr, indices, data, rows, w, K, N):
    """``m[j, k] = x_j . w_k`` (w class-major, K blocks of N), each in CSR order."""
    out = np.empty((rows.size, K), np.float64)
    for j in range(rows.size):
        r = rows[j]
        for k in range(K):
            s = 0.0
            for q in range(indptr[r], indptr[r + 1]):
                s += data[q] * w[k * N + indices[q]]
            out[j, k] = s
    return out


@numba.njit(cache=True, nogil=True)
def coefficients_ovr(m, cls, loss):
    """Gradient factors of the K binary problems: row j is +1 for class ``cls[j]``."""
    n, K = m.shape
    out = np.empty((n, K), np.float64)
    for j in range(n):
        for k in range(K):
            y = 1.0 if cls[j] == k else -1.0
            z = y * m[j, k]
            if loss == 0:
                out[j, k] = -y / (1.0 + np.exp(z))
            else:
                out[j, k] = -y if z < 1.0 else 0.0
    return out


@numba.njit(cache=True, nogil=True)
def batch_gradient_ovr(indptr, indices, data, rows, coef, N):
    """``sum_j coef[j, k] x_j`` for every class k as one sorted vector of length K N."""
    K = coef.shape[1]
    n = 0
    for r in rows:
        n += indptr[r + 1] - indptr[r]
    f = np.empty(n, np.int64)
    src = np.empty(n, np.int64)          # position of the entry: its row j and its q
    qq = np.empty(n, np.int64)
    k0 = 0
    for j in range(rows.size):
        r = rows[j]
        for q in range(indptr[r], indptr[r + 1]):
            f[k0] = indices[q]
            src[k0] = j
            qq[k0] = q
            k0 += 1
    order = np.argsort(f, kind="mergesort")        # stable: rows stay in batch order
    slot = np.empty(n, np.int64)
    feats = np.empty(n, np.int64)
    m = 0
    for t in range(n):
        if m == 0 or feats[m - 1] != f[order[t]]:
            feats[m] = f[order[t]]
            m += 1
        slot[t] = m - 1
    oi = np.empty(K * m, np.uint32)
    ov = np.zeros(K * m, np.float64)
    for k in range(K):
        for s in range(m):
            oi[k * m + s] = k * N + feats[s]
        for t in range(n):
            e = order[t]
            v = coef[src[e], k] * data[qq[e]]
            if t > 0 and slot[t] == slot[t - 1]:
                ov[k * m + slot[t]] += v
            else:
                ov[k * m + slot[t]] = v
    return oi, ov


@numba.njit(cache=True, nogil=True)
def losses_ovr(m, cls, loss):
    """Per-row loss summed over the K one-vs-rest problems."""
    n, K = m.shape
    out = np.zeros(n, np.float64)
    for j in range(n):
        for k in range(K):
            z = -(1.0 if cls[j] == k else -1.0) * m[j, k]
            if loss == 0:
                out[j] += z + np.log1p(np.exp(-z)) if z > 0 else np.log1p(np.exp(z))
            else:
                out[j] += max(0.0, 1.0 + z)
    return out


def _warm_up_run() -> None:
    """The kernels with a run's types (int64 indptr and indices, uint32/float64 gradients)."""
    from daskhpc.allreduce import allreduce_local

    ip, ix, rows = np.array([0, 1, 2]), np.array([0, 1]), np.array([0, 1])
    d = np.array([1.0, 2.0])
    m = margins(ip, ix, d, rows, np.ones(2))
    coefficients(m, np.ones(2), 0)
    losses(m, np.ones(2), 0)
    g = batch_gradient(ip, ix, d, rows, np.ones(2))
    mo = margins_ovr(ip, ix, d, rows, np.ones(6), 3, 2)
    c = coefficients_ovr(mo, rows, 0)
    losses_ovr(mo, rows, 0)
    batch_gradient_ovr(ip, ix, d, rows, c, 2)
    allreduce_local([g, (g[0][:1], g[1][:1])], algorithm="ssar_rec_dbl", N=1000)
    _warm_up_client()


def _warm_up_client() -> None:
    """What the client compiles for a run and a plan, for scipy's two index types of X."""
    from ._data import _append_column

    ip, ix, rows, d = np.array([0, 1, 2]), np.array([0, 1]), np.array([0, 1]), np.ones(2)
    for t in (np.int32, np.int64):
        batch_features(ip.astype(t), ix.astype(t), rows, 1, 2, 2)
        _append_column(ip.astype(t), ix.astype(t), d, 2, np.empty(4, t), np.empty(4))


def _warm_up_plan() -> None:
    """``plan`` on a tiny problem."""
    import scipy.sparse as sp

    from daskhpc import linear

    X = sp.csr_array((np.ones(8), (np.arange(8), 100 * np.arange(8))), shape=(8, 1000))
    X.indptr, X.indices = X.indptr.astype(np.int64), X.indices.astype(np.int64)
    linear.plan(X, np.array([1.0, -1.0] * 4), 2)
    _warm_up_client()


#: What ``plan`` and a run compile, for daskhpc.runtime.prepare_kernels.
WARMUP_PLAN = (_warm_up_plan,)
WARMUP = ("daskhpc.linear._program:warm_up", _warm_up_run)


@numba.njit(cache=True, nogil=True)
def serial_epoch(indptr, indices, data, y, sw, order, start, B, T, a, b, counts, w, wbar,
                 mask, K, N, loss, reg, l1, q, u):
    """One epoch of plain serial SGD without Top-k (``_serial``'s reference); returns u.

    Iteration i adds each part's batch gradients into one dense G, part by part, then
    steps ``w <- w - a[i] (G / counts[i]) - b[i] w_masked`` (:func:`._update.batch_steps`),
    the L1 cumulative penalty, and ``wbar``, each as the Program's update writes it.
    ``sw``: the rows' class weights (empty: none); y +-1 (K = 1) or class indices."""
    P = start.size - 1
    W = K * N
    G = np.zeros(W)
    coef = np.empty(K, np.float64)
    for i in range(T):
        for p in range(P):
            for j in range(start[p] + i * B, min(start[p] + (i + 1) * B, start[p + 1])):
                r = order[j]
                lo, hi = indptr[r], indptr[r + 1]
                for k in range(K):
                    s = 0.0
                    for e in range(lo, hi):
                        s += data[e] * w[k * N + indices[e]]
                    yk = y[r] if K == 1 else (1.0 if y[r] == k else -1.0)
                    z = yk * s
                    if loss == 0:
                        c = -yk / (1.0 + np.exp(z))
                    else:
                        c = -yk if z < 1.0 else 0.0
                    if sw.size:
                        c = c * sw[r]
                    coef[k] = c
                for k in range(K):
                    c = coef[k]
                    if c != 0.0:
                        for e in range(lo, hi):
                            G[k * N + indices[e]] += c * data[e]
        ai, bi, n = a[i], b[i], counts[i]
        if l1 > 0.0:
            u += ai * reg * l1
        first = i == 0
        for f in range(W):
            x = w[f] - ai * (G[f] / n) - bi * (w[f] * mask[f])
            G[f] = 0.0
            if l1 > 0.0 and mask[f] != 0.0:
                if x > 0.0:
                    x1 = max(0.0, x - (u + q[f]))
                elif x < 0.0:
                    x1 = min(0.0, x + (u - q[f]))
                else:
                    x1 = x
                q[f] += x1 - x
                x = x1
            w[f] = x
            wbar[f] = x if first else wbar[f] + (x - wbar[f]) / (i + 1.0)
    return u
