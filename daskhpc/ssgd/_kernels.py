"""numba kernels: the SGD sweep over one block, seeded initial factors, test error.

The serial reference and every worker call :func:`sgd_block` on the same ratings in the
same order, so the factors agree bit for bit (no fastmath). A block's update order is a
Fisher-Yates shuffle driven by SplitMix64 seeded from (seed, epoch, part, block), as the
paper's code reshuffles (``gen_perm_arr``); initial factors are a function of (seed,
matrix, row id), so each worker builds its rows without communication."""

from __future__ import annotations

import numba
import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@numba.njit(cache=True, nogil=True, inline="always")
def _mix(z):
    # SplitMix64 finaliser (Steele, Lea & Flood 2014).
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@numba.njit(cache=True, nogil=True)
def _hash4(a, b, c, d):
    h = _mix(np.uint64(a) + _GOLDEN)
    h = _mix(h ^ (np.uint64(b) + _GOLDEN))
    h = _mix(h ^ (np.uint64(c) + _GOLDEN))
    return _mix(h ^ (np.uint64(d) + _GOLDEN))


def block_seed(seed: int, epoch: int, part: int, block: int) -> np.uint64:
    """The shuffle seed of block (part, block) in ``epoch``."""
    return np.uint64(_hash4(np.uint64(seed), np.uint64(epoch), np.uint64(part),
                            np.uint64(block)))


@numba.njit(cache=True, nogil=True)
def tail_shuffle(data, first, draws, i):
    """Steps ``i, i - 1, ..., first`` of ``Generator.choice``'s partial Fisher-Yates (numpy's
    ``_shuffle_int``, Lemire's bounded integers) on ``data`` from the 32-bit ``draws``:
    ``(draws used, next step)``; a step the draws do not finish is left for the next call."""
    at = 0
    while i >= first:
        step, excl, m = at, np.uint64(i) + np.uint64(1), np.uint64(0)
        thr = (np.uint64(0xFFFFFFFF) - np.uint64(i)) % excl
        while at == step or (m & np.uint64(0xFFFFFFFF)) < thr:      # rejected: again
            if at == draws.size:
                return step, i
            m, at = np.uint64(draws[at]) * excl, at + 1
        j = np.int64(m >> np.uint64(32))
        data[i], data[j] = data[j], data[i]
        i -= 1
    return at, i


def learning_rate(lr0: float, epoch: int) -> float:
    """lr_n = lr0 / (1 + 0.05 n^1.5), the paper code's ``update_stepSize`` (n from 0)."""
    return lr0 / (1.0 + 0.05 * epoch ** 1.5)


@numba.njit(cache=True, nogil=True)
def init_rows(seed, which, ids, F, scale):
    """Rows ``ids`` of the initial W (``which=0``) or H (``which=1``): U[0, scale)."""
    out = np.empty((ids.size, F), dtype=np.float64)
    base = _hash4(np.uint64(seed), np.uint64(which), np.uint64(0x1417), np.uint64(F))
    for r in range(ids.size):
        s = _mix(base ^ (np.uint64(ids[r]) * _GOLDEN))
        for f in range(F):
            s = s + _GOLDEN
            u = np.float64(_mix(s) >> np.uint64(11)) * (1.0 / 9007199254740992.0)
            out[r, f] = scale * u
    return out


@numba.njit(cache=True, nogil=True, inline="always")
def _order(n, seed):
    order = np.arange(n)
    s = np.uint64(seed)
    for t in range(n - 1, 0, -1):           # Fisher-Yates, SplitMix64 stream
        s = s + _GOLDEN
        k = np.int64(_mix(s) % np.uint64(t + 1))
        tmp = order[t]
        order[t] = order[k]
        order[k] = tmp
    return order


@numba.njit(cache=True, nogil=True)
def _shuffled(li, lj, val, seed):
    """The ratings in ``_order(n, seed)`` as new arrays: read in sequence, 2.5-3x faster."""
    order = _order(val.size, seed)
    return li[order], lj[order], val[order]


@numba.njit(cache=True, nogil=True, inline="always")
def _dot_norms(W, H, i, j, F):
    """``(w_i . h_j, |w_i|^2, |h_j|^2)`` over the first F columns, in one pass."""
    dot = 0.0
    ww = 0.0
    hh = 0.0
    for f in range(F):
        dot += W[i, f] * H[j, f]
        ww += W[i, f] * W[i, f]
        hh += H[j, f] * H[j, f]
    return dot, ww, hh


@numba.njit(cache=True, nogil=True)
def sgd_block(W, H, li, lj, val, lr, reg, seed, shuffle=True, reg_bias=0.0, mu=0.0,
              biased=False):
    """One SGD sweep over the ratings of a block, in seeded random order, in place.

    Per rating r_ij, with e = r_ij - w_i . h_j: ``w_i += lr (e h_j - reg w_i)`` and
    ``h_j += lr (e w_i - reg h_j)`` with the old w_i (eqs. (3)-(4)). ``biased``: the model
    r_ij ~ mu + b_i + c_j + w_i . h_j (Koren's, as Surprise's ``SVD`` updates it), the last
    columns of W and H the biases, updated ``b += lr (e - reg_bias b)``; the loss adds
    ``0.5 reg_bias (b_i^2 + c_j^2)``.

    Parameters
    ----------
    W, H : float64 arrays (n_w, F), (n_h, F)
        Rows of W and H the block touches, indexed by ``li`` and ``lj``.
    li, lj, val : int, int, float64 arrays
        Row of W, row of H and value of each rating.
    lr, reg : float
        Learning rate of this epoch and regularisation.
    seed, shuffle : uint64, bool
        Shuffle seed (one per epoch, part and block); False: the stored order.
    reg_bias, mu, biased : float, float, bool
        The biased model (above): the biases' regularisation and the global mean.

    Returns
    -------
    float
        Sum over the block of ``0.5 (e^2 + reg (|w|^2 + |h|^2))`` before each update.

    Examples
    --------
    >>> import numpy as np
    >>> from daskhpc.ssgd import sgd_block
    >>> W, H = np.full((2, 4), 0.5), np.full((3, 4), 0.5)
    >>> li, lj, r = np.array([0, 1, 1]), np.array([2, 0, 2]), np.array([4.0, 1.0, 3.0])
    >>> loss = sgd_block(W, H, li, lj, r, 0.05, 0.1, np.uint64(7))   # W, H updated in place
    >>> round(loss, 3), bool(W[0, 0] > 0.5)
    (6.54, True)
    """
    n = val.size
    F = W.shape[1] - 1 if biased else W.shape[1]
    if shuffle:      # gathered once: the sweep then reads li, lj, val in sequence
        li, lj, val = _shuffled(li, lj, val, seed)
    loss = 0.0
    for r in range(n):
        i = li[r]
        j = lj[r]
        dot, ww, hh = _dot_norms(W, H, i, j, F)
        if biased:
            bi = W[i, F]
            cj = H[j, F]
            e = val[r] - (mu + bi + cj + dot)
            loss += 0.5 * (e * e + reg * (ww + hh) + reg_bias * (bi * bi + cj * cj))
            W[i, F] = bi + lr * (e - reg_bias * bi)
            H[j, F] = cj + lr * (e - reg_bias * cj)
        else:
            e = val[r] - dot
            loss += 0.5 * (e * e + reg * (ww + hh))
        for f in range(F):                   # eqs. (3), (4) with the old w_i in (4)
            w = W[i, f]
            h = H[j, f]
            W[i, f] = w + lr * (e * h - reg * w)
            H[j, f] = h + lr * (e * w - reg * h)
    return loss


@numba.njit(cache=True, nogil=True)
def sse_block(W, H, li, lj, val, lo, hi, mu=0.0, biased=False):
    """Sum of squared errors of clipped predictions min(max(w_i . h_j, lo), hi); ``biased``:
    of the biased model's mu + b_i + c_j + w_i . h_j (last columns: the biases)."""
    F = W.shape[1] - 1 if biased else W.shape[1]
    sse = 0.0
    for r in range(val.size):
        i = li[r]
        j = lj[r]
        dot = 0.0
        for f in range(F):
            dot += W[i, f] * H[j, f]
        if biased:
            dot = mu + W[i, F] + H[j, F] + dot
        e = val[r] - min(max(dot, lo), hi)
        sse += e * e
    return sse


def sweep(W, H, li, lj, val, lr, reg, seed, bias=None, shuffle=True) -> float:
    """:func:`sgd_block`, with ``bias = (reg_bias, mu)`` of the biased model."""
    if bias is None:
        return sgd_block(W, H, li, lj, val, lr, reg, seed, shuffle)
    return sgd_block(W, H, li, lj, val, lr, reg, seed, shuffle, bias[0], bias[1], True)


def error_sse(W, H, li, lj, val, lo, hi, bias=None) -> float:
    """Squared error of clipped predictions of the run's model (``bias`` as in :func:`sweep`)."""
    return sse_block(W, H, li, lj, val, lo, hi, 0.0 if bias is None else bias[1],
                     bias is not None)


def initial_rows(seed, which, ids, rank, scale, biased=False) -> np.ndarray:
    """Initial rows of W or H: U[0, scale); biased: centred, and a last column of zeros."""
    X = init_rows(seed, which, ids, rank, scale)
    if not biased:
        return X
    out = np.zeros((X.shape[0], rank + 1))
    out[:, :rank] = X - 0.5 * scale
    return out


@numba.njit(cache=True, nogil=True)
def pair_terms(W, H, rows, cols, vals, F, biased, mu, reg, reg_bias, lo, hi):
    """Per rating k in one pass: ``terms[k]``, the objective's term e^2 + reg (|w_i|^2 +
    |h_j|^2) (+ reg_bias (b_i^2 + b_j^2)), and ``c[k] = r - clip(prediction, lo, hi)``."""
    n = rows.size
    terms = np.empty(n)
    c = np.empty(n)
    for k in range(n):
        i, j = rows[k], cols[k]
        p, ww, hh = _dot_norms(W, H, i, j, F)
        t = reg * (ww + hh)
        if biased:
            p += mu + W[i, F] + H[j, F]
            t += reg_bias * (W[i, F] * W[i, F] + H[j, F] * H[j, F])
        e = vals[k] - p
        terms[k] = e * e + t
        c[k] = vals[k] - min(max(p, lo), hi)
    return terms, c


def _warm_up_plan() -> None:
    """The client's kernels: the plan's (the d-gap rows), the split's and the report's."""
    from ._dgap import dgap_successors

    dgap_successors(np.array([0, 0, 1]), np.array([0, 1, 0]), np.array([0, 1]), 2)
    tail_shuffle(np.arange(2, dtype=np.int32), 1, np.zeros(0, np.uint32), 1)  # the split
    one, at = np.ones((1, 2)), np.zeros(1, np.int64)
    pair_terms(one, one, at, at, np.ones(1), 1, True, 0.0, 0.1, 0.1, 0.0, 1.0)
    # a collection's keeper: int32 ids and float32 ratings (_serial.value_quality)
    at = at.astype(np.int32)
    for v in (np.ones(1), np.ones(1, np.float32)):
        pair_terms(one, one, at, at, v, 1, True, 0.0, 0.1, 0.1, 0.0, 1.0)


#: What ``plan`` and a run compile, for daskhpc.runtime.prepare_kernels (the client
#: compiles it once before the cluster starts; the workers then load it).
WARMUP_PLAN = (_warm_up_plan,)
WARMUP = ("daskhpc.ssgd._tasks:warm_up", _warm_up_plan)
