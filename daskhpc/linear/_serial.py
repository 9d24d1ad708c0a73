"""The plain serial reference: Algorithms 1 and 2 of Renggli 2017 over dense vectors.

The distributed run's batches and :mod:`._update`'s steps, but dense gradients added in
part order: it differs from the Program only by the reassociation of the gradient sum.
"""

from __future__ import annotations

import numpy as np

from ._kernels import LOSSES, serial_epoch
from ._setup import permutation
from ._topk import topk_approx, topk_exact
from ._update import (bottou_t0, epoch_steps, l1_penalty, l1_share, mean_step,
                      no_improvement, penalty_value, rows_before, step, step_cap)


def _loss(m, y, loss):
    z = -y * m
    return np.logaddexp(0.0, z) if loss == "log" else np.maximum(0.0, 1.0 + z)


def evaluate(w, X, y, loss, K=1):
    if K > 1:
        m = X @ w.reshape(K, -1).T
        Y = np.where(np.arange(K)[None, :] == y[:, None], 1.0, -1.0)
        return (float(np.mean(_loss(m, Y, loss).sum(axis=1))),
                float(np.mean(np.argmax(m, axis=1) == y)))
    m = X @ w
    return float(np.mean(_loss(m, y, loss))), float(np.mean(np.where(m > 0, 1.0, -1.0) == y))


def _coef(Xb, yb, w, K, loss):
    """The rows' gradient factors (rows x K for K > 1)."""
    if K > 1:
        m = Xb @ w.reshape(K, -1).T
        yb = np.where(np.arange(K)[None, :] == yb[:, None], 1.0, -1.0)
    else:
        m = Xb @ w
    z = yb * m
    with np.errstate(over="ignore"):
        return -yb / (1.0 + np.exp(z)) if loss == "log" else np.where(z < 1.0, -yb, 0.0)


def run_serial(s, epochs: int | None = None) -> dict:
    """Train with the setup's batches in one process: ``w``, ``history`` (``epochs``: exactly)."""
    o, d = s.options, s.data
    P, K, B = s.nparts, s.K, o.batch
    N = s.width
    X, y = d.X, d.y
    w = np.zeros(N) if s.w0 is None else s.w0.copy()         # a warm start's weights
    wbar = w.copy()                                          # the epoch's mean of iterates
    mask = np.ones(N)
    if o.fit_intercept:
        mask[s.N - 1::s.N] = 0.0
    l1 = l1_share(o.penalty, o.l1_ratio)
    reg2 = o.reg if l1 == 0.0 else o.reg * (1.0 - l1)
    q, u = np.zeros(N), 0.0
    t0 = bottou_t0(o.loss, o.reg) if o.learning_rate == "optimal" else 0.0
    r = np.zeros((P, N))
    nrows = [int(rr.size) for rr in s.rows]
    before = rows_before(nrows, B, s.T)
    history = []
    X32 = (X.indptr, X.indices, X.data)
    sw = np.empty(0) if s.weights is None else s.weights
    for e in range(o.epochs if epochs is None else int(epochs)):
        perms = [s.rows[p][permutation(o.seed, e, p, s.rows[p].size)] for p in range(P)]
        a, b, n = epoch_steps(o.learning_rate, o.lr, o.power_t, o.reg, t0, reg2,
                              step_cap(o), before, e)
        if o.topk is None:       # the compiled epoch (the estimators' path)
            u = serial_epoch(*X32, y, sw, np.concatenate(perms),
                             np.concatenate([[0], np.cumsum(nrows)]), B, s.T, a, b, n, w,
                             wbar, mask, K, s.N, LOSSES[o.loss], o.reg, l1, q, u)
        else:
            u = _topk_epoch(s, e, perms, (a, b, n), w, wbar, r, mask, l1, q, u)
        h = {"epoch": e}
        loss, acc = evaluate(wbar, X, y, o.loss, K)
        wm = wbar * mask
        h["train_loss"] = loss + penalty_value(o.reg, l1, float(np.abs(wm).sum()),
                                               float(np.dot(wm, wm)))
        h["train_accuracy"] = acc
        if d.X_test is not None:
            h["test_loss"], h["test_accuracy"] = evaluate(wbar, d.X_test, d.y_test, o.loss, K)
        history.append(h)
        if epochs is None and no_improvement(history, o.tol, o.n_iter_no_change):
            break
    return {"w": wbar, "history": history}


def _topk_epoch(s, e, perms, steps, w, wbar, r, mask, l1, q, u):
    """One epoch with Top-k (Algorithm 2) over dense vectors; returns u."""
    o, d = s.options, s.data
    P, K, B, N = s.nparts, s.K, o.batch, s.width
    a, b, n = steps
    for i in range(s.T):
        G = np.zeros(N)
        for p in range(P):
            rows = perms[p][i * B:(i + 1) * B]
            Xb = d.X[rows]
            coef = _coef(Xb, d.y[rows], w, K, o.loss)
            if s.weights is not None:
                coef = coef * (s.weights[rows][:, None] if K > 1 else s.weights[rows])
            g = Xb.T @ coef
            if K > 1:
                g = g.T.ravel()
            ghat = r[p] + g
            if o.topk == "approx":
                sel = topk_approx(ghat, s.k, np.random.default_rng([o.seed, 29, e, p, i]))
            else:
                sel = topk_exact(ghat, s.k)
            g = np.zeros(N)
            g[sel] = ghat[sel]
            if o.error_feedback:
                ghat[sel] = 0.0
                r[p] = ghat
            G = G + g
        w[:] = step(w, G, a[i], b[i], n[i], mask)
        if l1 > 0.0:
            u += a[i] * o.reg * l1
            w[:] = l1_penalty(w, q, u, mask)
        wbar[:] = w if i == 0 else mean_step(wbar, w, i)
    return u
