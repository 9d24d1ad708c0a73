"""Numba kernels of a GCN layer: SpMM fused with the GEMM, its transposes, dropout masks.

Every kernel walks a row's nonzeros in stored order, so a row's result depends only on
its entries and the rows it reads, not on the part: Z rows are bitwise the serial
reference's (eq. (7) = eq. (6) row by row). Kernels compute in their operands' dtype (a
float32 run sums in float32, as PyTorch). Dropout keeps (row, col) of layer k in epoch e
when ``hash(seed, e, k, row, col) >= p`` (SplitMix64), the same on every part."""

from __future__ import annotations

import numba
import numpy as np

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_G = np.uint64(0x9E3779B97F4A7C15)


@numba.njit(cache=True, nogil=True, inline="always")
def _mix(z):  # pragma: no cover - numba
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


@numba.njit(cache=True, nogil=True)
def _key(seed, epoch, layer):  # pragma: no cover - numba
    k = _mix(np.uint64(seed) * _G + np.uint64(1))
    k = _mix(k ^ (np.uint64(epoch) * _G + np.uint64(2)))
    return _mix(k ^ (np.uint64(layer) * _G + np.uint64(3)))


@numba.njit(cache=True, nogil=True)
def _uniform(key, row, col):  # pragma: no cover - numba
    h = _mix(key ^ (np.uint64(row) * _G))
    h = _mix(h ^ (np.uint64(col) + _G))
    return np.float64(h >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@numba.njit(cache=True, nogil=True)
def keep_dense(seed, epoch, layer, rows, d, p):  # pragma: no cover - numba
    """(len(rows), d) bool: entry (rows[i], c) survives dropout ``p``."""
    key = _key(seed, epoch, layer)
    out = np.empty((rows.size, d), np.bool_)
    for i in range(rows.size):
        for c in range(d):
            out[i, c] = _uniform(key, rows[i], c) >= p
    return out


@numba.njit(cache=True, nogil=True)
def keep_csr(seed, epoch, layer, rows, indptr, indices, p):  # pragma: no cover - numba
    """bool per stored entry of a CSR block whose row i is global row ``rows[i]``."""
    key = _key(seed, epoch, layer)
    out = np.empty(indices.size, np.bool_)
    for i in range(rows.size):
        for t in range(indptr[i], indptr[i + 1]):
            out[t] = _uniform(key, rows[i], indices[t]) >= p
    return out


@numba.njit(cache=True, nogil=True)
def dropout_csr(indptr, indices, data, rows, seed, epoch, layer, p,
                scale):  # pragma: no cover - numba
    """The CSR block without the entries :func:`keep_csr` drops, the others times ``scale``
    (one pass for the mask, one to copy: 5x faster than numpy)."""
    keep = keep_csr(seed, epoch, layer, rows, indptr, indices, p)
    n = rows.size
    ptr = np.zeros(n + 1, np.int64)
    for i in range(n):
        c = 0
        for t in range(indptr[i], indptr[i + 1]):
            c += keep[t]
        ptr[i + 1] = ptr[i] + c
    idx = np.empty(ptr[n], indices.dtype)
    val = np.empty(ptr[n], data.dtype)
    j = 0
    for i in range(n):
        for t in range(indptr[i], indptr[i + 1]):
            if keep[t]:
                idx[j] = indices[t]
                val[j] = data[t] * scale
                j += 1
    return ptr, idx, val


@numba.njit(cache=True, nogil=True)
def dropout_dense(H, rows, seed, epoch, layer, p, scale):  # pragma: no cover - numba
    """H with the entries :func:`keep_dense` drops set to 0, the others times ``scale``."""
    key = _key(seed, epoch, layer)
    n, d = H.shape
    out = np.empty((n, d), H.dtype)
    for i in range(n):
        for c in range(d):
            if _uniform(key, rows[i], c) >= p:
                out[i, c] = H[i, c] * scale
            else:
                out[i, c] = 0
    return out


@numba.njit(cache=True, nogil=True)
def spmm_gemm(indptr, indices, data, H, W, b):  # pragma: no cover - numba
    """Z = (A H) W + b row by row (eq. (6)): the SpMM row, then its product with W."""
    n, d_in, d_out = indptr.size - 1, W.shape[0], W.shape[1]
    Z = np.empty((n, d_out), W.dtype)
    acc = np.empty(d_in, W.dtype)
    for i in range(n):
        acc[:] = 0.0
        for t in range(indptr[i], indptr[i + 1]):
            a, j = data[t], indices[t]
            for f in range(d_in):
                acc[f] += a * H[j, f]
        z = np.zeros(d_out, W.dtype)
        for f in range(d_in):
            a = acc[f]
            for c in range(d_out):
                z[c] += a * W[f, c]
        for c in range(d_out):
            Z[i, c] = z[c] + b[c]
    return Z


@numba.njit(cache=True, nogil=True)
def spmm_gemm_csr(indptr, indices, data, hptr, hidx, hval, W, b):  # pragma: no cover
    """The same with a sparse H (CSR); the accumulator's features meet W in first-met order."""
    n, d_in, d_out = indptr.size - 1, W.shape[0], W.shape[1]
    Z = np.empty((n, d_out), W.dtype)
    acc = np.zeros(d_in, W.dtype)
    seen = np.zeros(d_in, np.bool_)
    touched = np.empty(d_in, np.int64)
    for i in range(n):
        m = 0
        for t in range(indptr[i], indptr[i + 1]):
            a, j = data[t], indices[t]
            for s in range(hptr[j], hptr[j + 1]):
                f = hidx[s]
                if not seen[f]:
                    seen[f] = True
                    touched[m] = f
                    m += 1
                acc[f] += a * hval[s]
        z = np.zeros(d_out, W.dtype)
        for q in range(m):                   # per output entry: q ascending, as written
            f = touched[q]
            a = acc[f]
            for c in range(d_out):
                z[c] += a * W[f, c]
        for c in range(d_out):
            Z[i, c] = z[c] + b[c]
        for q in range(m):
            acc[touched[q]] = 0.0
            seen[touched[q]] = False
    return Z


@numba.njit(cache=True, nogil=True)
def spmm(indptr, indices, data, G):  # pragma: no cover - numba
    """P = A G (eq. (3)'s SpMM; with A_hat^T's rows, the exact backward)."""
    n, d = indptr.size - 1, G.shape[1]
    P = np.zeros((n, d), G.dtype)
    for i in range(n):
        for t in range(indptr[i], indptr[i + 1]):
            a, j = data[t], indices[t]
            for c in range(d):
                P[i, c] += a * G[j, c]
    return P


@numba.njit(cache=True, nogil=True)
def gemm(H, W):  # pragma: no cover - numba
    """Y = H W row by row (the transform-first order: Y's rows are what is sent)."""
    n, d_in, d_out = H.shape[0], W.shape[0], W.shape[1]
    Y = np.zeros((n, d_out), W.dtype)
    for i in range(n):
        for f in range(d_in):
            h = H[i, f]
            for c in range(d_out):
                Y[i, c] += h * W[f, c]
    return Y


#: Y = H W for a sparse H (CSR): the same CSR x dense loop as :func:`spmm`
csr_gemm = spmm


@numba.njit(cache=True, nogil=True)
def tgemm(H, P):  # pragma: no cover - numba
    """H^T P summed over rows in order (eq. (4): this part's share of dW)."""
    n, d_in, d_out = H.shape[0], H.shape[1], P.shape[1]
    out = np.zeros((d_in, d_out), P.dtype)
    for i in range(n):
        for f in range(d_in):
            h = H[i, f]
            if h != 0.0:
                for c in range(d_out):
                    out[f, c] += h * P[i, c]
    return out


@numba.njit(cache=True, nogil=True)
def tgemm_csr(hptr, hidx, hval, P, d_in):  # pragma: no cover - numba
    """H^T P for a sparse H (CSR, n rows)."""
    d_out = P.shape[1]
    out = np.zeros((d_in, d_out), P.dtype)
    for i in range(hptr.size - 1):
        for s in range(hptr[i], hptr[i + 1]):
            f, h = hidx[s], hval[s]
            for c in range(d_out):
                out[f, c] += h * P[i, c]
    return out


@numba.njit(cache=True, nogil=True)
def gemm_t(P, W):  # pragma: no cover - numba
    """P W^T (eq. (3): S = (A G) W^T), row by row."""
    n, d_out, d_in = P.shape[0], W.shape[1], W.shape[0]
    out = np.empty((n, d_in), P.dtype)
    zero = np.zeros(1, P.dtype)[0]          # the accumulator in P's dtype, not float64
    for i in range(n):
        for f in range(d_in):
            s = zero
            for c in range(d_out):
                s += P[i, c] * W[f, c]
            out[i, f] = s
    return out


@numba.njit(cache=True, nogil=True)
def adam(p, g, m, v, rows, wd, b1, c1b, b2, c2b, sqrt_c2, eps, step):  # pragma: no cover
    """One Adam step on the rows ``rows`` of 2-D parameters in place, in PyTorch's order of
    operations: g' = g + wd p; m = b1 m + (1 - b1) g'; v = b2 v + (1 - b2) g'^2;
    p -= step (m / (sqrt(v) / sqrt(c2) + eps))."""
    for r in rows:
        for j in range(p.shape[1]):
            gi = g[r, j] + wd * p[r, j] if wd != 0 else g[r, j]
            mi = m[r, j] * b1 + c1b * gi
            vi = v[r, j] * b2 + c2b * (gi * gi)
            m[r, j] = mi
            v[r, j] = vi
            p[r, j] -= step * (mi / (np.sqrt(vi) / sqrt_c2 + eps))


def softmax_xent(Z, y):
    """``(loss per row, probabilities)`` of logits ``Z``: loss = -log softmax(Z[i])[y[i]]."""
    zmax = Z.max(axis=1, keepdims=True)
    e = np.exp(Z - zmax)
    s = e.sum(axis=1, keepdims=True)
    prob = e / s
    loss = (np.log(s[:, 0]) + zmax[:, 0]) - Z[np.arange(Z.shape[0]), y]
    return loss, prob


#: What a run compiles, for daskhpc.runtime.prepare_kernels (the client compiles it once
#: before the cluster starts; the workers then load it): the workers' warm-up.
WARMUP = ("daskhpc.gcn._job:warm_up",)
