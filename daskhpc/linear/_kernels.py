"""numba kernels of data-parallel SGD for linear classifiers (Renggli 2017, section 2.2).

* :func:`margins` - ``X[rows] @ w`` in CSR order;
* :func:`coefficients` - the per-row factor of the gradient (``grad f_j = coef_j x_j``):
  logistic ``-y / (1 + exp(y m))`` (2.2.1), hinge ``-y`` if ``y m < 1`` else 0 (2.2.2);
* :func:`batch_gradient` - ``sum_j coef_j x_j`` over a part's batch as a sparse vector:
  its index set is the union of the batch rows' features (explicit zeros kept, so the
  communication of a call depends on the batch only), each feature summed in row order;
* :func:`losses` - per-row loss (stable ``log(1 + exp(-y m))``, ``max(0, 1 - y m)``);
* one-vs-rest (K classes, the model ``w`` flattened class-major, K blocks of N):
  :func:`margins_ovr`, :func:`coefficients_ovr` (row j's target is +1 for its class,
  -1 for the others), :func:`batch_gradient_ovr` (the K gradients as one sparse vector
  of length K N: the batch's feature union once per class, each value summed in row
  order as :func:`batch_gradient`), :func:`losses_ovr` (summed over the K problems).

Examples
--------
>>> import numpy as np, scipy.sparse as sp
>>> X = sp.csr_array(np.array([[1.0, 0, 2.0], [0, 3.0, 1.0]]))
>>> rows = np.array([0, 1])
>>> m = margins(X.indptr, X.indices, X.data, rows, np.array([1.0, 1.0, 1.0]))
>>> m.tolist()
[3.0, 4.0]
>>> i, v = batch_gradient(X.indptr, X.indices, X.data, rows, np.array([1.0, -1.0]))
>>> i.tolist(), v.tolist()
([0, 1, 2], [1.0, -3.0, 1.0])
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["margins", "coefficients", "batch_gradient", "losses", "LOSSES", "margins_ovr",
           "coefficients_ovr", "batch_gradient_ovr", "losses_ovr"]

LOSSES = {"log": 0, "hinge": 1}


@numba.njit(cache=True)
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


@numba.njit(cache=True)
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


@numba.njit(cache=True)
def batch_gradient(indptr, indices, data, rows, coef):
    """``sum_j coef_j x_j`` over ``rows`` as sorted (uint32 index, value) pairs.

    Each feature's terms are added in batch order, its first term taken as it is (not
    added to 0.0: a -0.0 stays), whichever way: into a dense scratch vector where the
    batch's features span at most ``4 n + 64`` indices (n its stored entries: a9a's 64
    rows, 123 features: 33 -> 6 us a call under cProfile), else by a stable sort."""
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


@numba.njit(cache=True)
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


@numba.njit(cache=True)
def batch_features(indptr, indices, rows, B, T, N):
    """The index sets of :func:`batch_gradient` for the ``T`` batches ``rows[i B:(i + 1)
    B]`` at once (the plans of an epoch's calls): ``(ptr, idx)``, batch i's sorted
    uint32 features ``idx[ptr[i]:ptr[i + 1]]`` (explicit zeros kept; past the end of
    ``rows``: empty). One marker array over the ``N`` features, reset per batch."""
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


@numba.njit(cache=True)
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


@numba.njit(cache=True)
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


@numba.njit(cache=True)
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


@numba.njit(cache=True)
def batch_gradient_ovr(indptr, indices, data, rows, coef, N):
    """``sum_j coef[j, k] x_j`` for every class k as one sorted (uint32 index, value) vector
    of length K N: index ``k N + f``; the batch's feature union in every class block."""
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


@numba.njit(cache=True)
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
    """The kernels with the types of a run on what the readers return (int64 indptr and
    indices; the sparse allreduce of (uint32 index, float64 value) gradients)."""
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
    """What the client compiles for a run and a plan: the intercept column and the
    batches' feature sets, for scipy's two index types of X."""
    from ._data import _append_column

    ip, ix, rows, d = np.array([0, 1, 2]), np.array([0, 1]), np.array([0, 1]), np.ones(2)
    for t in (np.int32, np.int64):
        batch_features(ip.astype(t), ix.astype(t), rows, 1, 2, 2)
        _append_column(ip.astype(t), ix.astype(t), d, 2, np.empty(4, t), np.empty(4))


def _warm_up_plan() -> None:
    """``plan`` (the batches' gradient index sets and their unions) on a tiny problem."""
    import scipy.sparse as sp

    from daskhpc import linear

    X = sp.csr_array((np.ones(8), (np.arange(8), 100 * np.arange(8))), shape=(8, 1000))
    X.indptr, X.indices = X.indptr.astype(np.int64), X.indices.astype(np.int64)
    linear.plan(X, np.array([1.0, -1.0] * 4), 2)
    _warm_up_client()


#: What ``plan`` and a run compile, for daskhpc.runtime.prepare_kernels (the client
#: compiles it once before the cluster starts; the workers then load it): the workers'
#: warm-up (whose int32 indices no run from a file uses) and the run's types.
WARMUP_PLAN = (_warm_up_plan,)
WARMUP = ("daskhpc.linear._program:warm_up", _warm_up_run)


@numba.njit(cache=True)
def serial_epoch(indptr, indices, data, y, sw, order, start, B, T, a, b, counts, w, wbar,
                 mask, K, N, loss, reg, l1, q, u):
    """One epoch of plain serial SGD (the reference of ``_serial``) without Top-k; w, the
    epoch's mean of iterates ``wbar`` and q updated in place, returns u.

    Part p's rows in visiting order are ``order[start[p]:start[p + 1]]``; iteration i
    takes each part's ``[i B, (i + 1) B)`` of them and adds their gradients into one
    dense G (part by part, each in batch order: the allreduce adds the parts' sums in
    its own order, so the two agree to reassociation), steps
    ``w <- w - a[i] (G / counts[i]) - b[i] w_masked`` (:func:`._update.batch_steps`),
    then the L1 cumulative penalty when ``l1`` > 0 (``u += a[i] reg l1``), then
    ``wbar += (w - wbar) / (i + 1)`` (``wbar = w`` at i = 0): each as the Program's
    update writes it. ``sw`` the rows' class weights (empty: none); y +-1 (K = 1) or
    class indices (one-vs-rest, w the K models class-major)."""
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
