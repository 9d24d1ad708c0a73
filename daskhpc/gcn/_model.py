"""The GCN's pieces on a block of rows, shared by the serial reference and the parts.

A block is ``rows`` of A_hat (or A_hat^T) whose column indices point into an extended
input block (its own rows, then those received), entries in global column order, so
every kernel sums as the serial reference does. Glorot weights (PyG's GCNConv), hashed
dropout, Z = A_hat H W + b in either order around the exchange (section 4.4), the
softmax cross-entropy head (eq. (2)), Adam (PyTorch's arithmetic) or SGD (eq. (5))."""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from . import _kernels as kn

NMETRICS = 7      # train loss (dropout pass); per split: eval loss sum, correct count
BETAS, EPS = (0.9, 0.999), 1e-8
#: Node features with at least this share of their entries stored are kept as a dense
#: array (the dense kernels, no index per value): embeddings and random features are; a
#: bag of words is not (docs/gcn.md).
DENSE_FEATURES = 0.5


class Csr(tuple):
    """(indptr, indices, data) of a sparse block of rows."""

    __slots__ = ()

    @classmethod
    def of(cls, M, dtype=np.float64) -> "Csr":
        """A scipy matrix's CSR arrays, its values in ``dtype`` (the run's)."""
        M = sp.csr_array(M)
        return cls((M.indptr.astype(np.int64), M.indices.astype(np.int64),
                    M.data.astype(dtype)))

    def take(self, local) -> "Csr":
        """Rows ``local`` (in that order)."""
        ptr, idx, val = self
        local = np.asarray(local, np.int64)
        lens = ptr[local + 1] - ptr[local]
        newptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        pos = np.repeat(ptr[local] - newptr[:-1], lens) + np.arange(newptr[-1])
        return Csr((newptr, idx[pos], val[pos]))

    @staticmethod
    def stack(blocks) -> "Csr":
        blocks = list(blocks)
        ptrs, off = [np.zeros(1, np.int64)], 0
        for b in blocks:
            ptrs.append(b[0][1:] + off)
            off += int(b[0][-1])
        return Csr((np.concatenate(ptrs), np.concatenate([b[1] for b in blocks]),
                    np.concatenate([b[2] for b in blocks])))


def init_params(dims, seed: int, bias: bool = True, dtype=np.float64) -> list:
    """[W^1, b^1, ..., W^L, b^L]: Glorot uniform, zeros; drawn in float64, then ``dtype``."""
    rng = np.random.default_rng([int(seed), 0x6C1])
    out = []
    for k in range(1, len(dims)):
        a = np.sqrt(6.0 / (dims[k - 1] + dims[k]))
        out.append(rng.uniform(-a, a, (dims[k - 1], dims[k])).astype(dtype))
        out.append(np.zeros(dims[k] if bias else 0, dtype))
    return out


def dropout(H, rows, seed, epoch, k, p):
    """Layer k's input block with dropout (``H``: dense array or :class:`Csr`)."""
    if p == 0:
        return H
    rows = np.asarray(rows, np.int64)
    if isinstance(H, Csr):
        ptr, idx, val = H
        return Csr(kn.dropout_csr(ptr, idx, val, rows, seed, epoch, k, p,
                                  val.dtype.type(1.0 / (1.0 - p))))
    H = np.ascontiguousarray(H)
    return kn.dropout_dense(H, rows, seed, epoch, k, p, H.dtype.type(1.0 / (1.0 - p)))


def dense_features(nnz: int, n: int, d: int) -> bool:
    """Whether ``n x d`` features with ``nnz`` stored entries are kept dense."""
    return bool(n * d > 0 and nnz >= DENSE_FEATURES * n * d)


def features(M, dtype=np.float64, dense: bool | None = None):
    """Node features for the kernels: dense if :func:`dense_features` (or ``dense``), else Csr."""
    M = sp.csr_array(M)
    if dense is None:
        dense = dense_features(M.nnz, *M.shape)
    if not dense:
        return Csr.of(M, dtype)
    if M.has_canonical_format:      # no duplicates to sum: cast first, no float64 copy
        return M.astype(dtype, copy=False).toarray()
    return np.ascontiguousarray(M.toarray(), dtype=dtype)


def take_rows(X, rows):
    """Rows ``rows`` of a features block (dense or :class:`Csr`), in that order."""
    return X.take(rows) if isinstance(X, Csr) else X[np.asarray(rows, np.int64)]


def layer(A, H, W, b):
    """Z = A H W + b for a block (``A``: Csr with extended column ids)."""
    b = b if b.size else np.zeros(W.shape[1], W.dtype)
    if isinstance(H, Csr):
        return kn.spmm_gemm_csr(*A, *H, W, b)
    return kn.spmm_gemm(*A, np.ascontiguousarray(H), W, b)


def layer_input(H, W, transform: bool):
    """What layer k exchanges: H (aggregate first, d_{k-1} words a row) or Y = H W (d_k)."""
    if not transform:
        return H
    if isinstance(H, Csr):
        return kn.csr_gemm(*H, W)
    return kn.gemm(np.ascontiguousarray(H), W)


def layer_output(A, ext, W, b, transform: bool):
    """Z = A_hat (H W) + b from the extended block of :func:`layer_input`'s rows."""
    if not transform:
        return layer(A, ext, W, b)
    Z = kn.spmm(*A, ext)
    return Z + b if b.size else Z


def head(Z, y, train, val, test, n_train, evaluate: bool):
    """``(G, sums)`` of a block of logits: G = (softmax(Z) - onehot(y)) / n_train on training
    rows; sums the training loss, or with ``evaluate`` per split the loss and correct count."""
    loss, prob = kn.softmax_xent(Z, y)
    if evaluate:
        right = Z.argmax(axis=1) == y
        sums = []
        for m in (train, val, test):
            sums += [float(np.sum(loss[m])), float(np.count_nonzero(right[m]))]
        return None, sums
    G = prob
    G[np.arange(y.size), y] -= 1.0
    G[~train] = 0.0
    G /= n_train
    return G, [float(np.sum(loss[train])) if train.any() else 0.0]


def backward(AT, Gext, G, Hin, W, with_input: bool):
    """Layer k's backward on a block: P = A_hat^T G (eq. (3)), dW = H^T P (eq. (4)), db, and
    dH = P W^T when the layer below needs it."""
    P = kn.spmm(*AT, Gext)
    if isinstance(Hin, Csr):
        dW = kn.tgemm_csr(*Hin, P, W.shape[0])
    else:
        dW = kn.tgemm(np.ascontiguousarray(Hin), P)
    db = G.sum(axis=0)
    dH = kn.gemm_t(P, W) if with_input else None
    return dW, db, dH


def pack(grads, metrics) -> np.ndarray:
    """One vector for the allreduce: every gradient, then the metric sums."""
    dtype = next((g.dtype for g in grads if g is not None), np.float64)
    return np.concatenate([g.ravel() for g in grads] + [np.asarray(metrics, dtype)])


def unpack(vec, params) -> tuple[list, np.ndarray]:
    out, off = [], 0
    for p in params:
        out.append(vec[off:off + p.size].reshape(p.shape))
        off += p.size
    return out, vec[off:]


def update(params, grads, state, opts, rows0=None) -> None:
    """One optimiser step on every parameter, in place; weight decay on layer 1 only (PyG's
    example); ``rows0``: only these rows of W^1 are stepped."""
    wd = opts.weight_decay
    if opts.optimizer == "sgd":
        for i, (p, g) in enumerate(zip(params, grads)):
            if i == 0 and rows0 is not None:
                p, g = p[rows0], g[rows0]
                p -= opts.lr * (g + wd * p if wd else g)
                params[0][rows0] = p
                continue
            p -= opts.lr * (g + wd * p if (i < 2 and wd) else g)
        return
    b1, b2 = BETAS
    state["t"] += 1
    t = state["t"]
    c1, c2 = 1.0 - b1 ** t, 1.0 - b2 ** t
    for i, (p, g, m, v) in enumerate(zip(params, grads, state["m"], state["v"])):
        if p.size:      # every part repeats this step: one fused pass (kn.adam), not 15
            x = p.dtype.type           # the scalars in p's dtype, as numpy takes floats
            scalars = (x(wd if i < 2 else 0.0), x(b1), x(1.0 - b1), x(b2), x(1.0 - b2),
                       x(math.sqrt(c2)), x(EPS), x(opts.lr / c1))
            if i == 0 and rows0 is not None:
                kn.adam(p, np.ascontiguousarray(g), m, v, rows0, *scalars)
            else:       # the whole parameter as one row
                kn.adam(_row(p), np.ascontiguousarray(g).reshape(1, -1), _row(m), _row(v),
                        np.zeros(1, np.int64), *scalars)


def _row(a: np.ndarray) -> np.ndarray:
    """A one-row view of a parameter or moment updated in place (never a copy)."""
    if not a.flags.c_contiguous:
        raise ValueError("GCN parameters and Adam moments must be C-contiguous")
    return a.reshape(1, -1)
