"""The plain serial reference: Algorithms 1 and 2 of Renggli 2017 over dense vectors.

The same batches as the distributed run (the same seeded part orders), but no streams and
no allreduce: per iteration each part's gradient is ``X_b^T coef`` as a dense vector
(scipy), Top-k works on dense vectors, and the parts' contributions are added in part
order. It differs from the Program only by the reassociation of the gradient sum.

Examples
--------
>>> from daskhpc import datasets
>>> from daskhpc.linear._setup import prepare
>>> h = run_serial(prepare(datasets.libsvm(), nparts=2, batch=64, epochs=1))["history"]
>>> round(h[0]["train_accuracy"], 2) > 0.8
True
"""

from __future__ import annotations

import numpy as np

from ._program import global_batch
from ._setup import permutation
from ._topk import topk_approx, topk_exact

__all__ = ["run_serial"]


def _loss(m, y, loss):
    z = -y * m
    return np.logaddexp(0.0, z) if loss == "log" else np.maximum(0.0, 1.0 + z)


def evaluate(w, X, y, loss):
    m = X @ w
    return float(np.mean(_loss(m, y, loss))), float(np.mean(np.where(m > 0, 1.0, -1.0) == y))


def run_serial(s) -> dict:
    """Train with the setup's batches in one process; returns ``w`` and ``history``."""
    o, d = s.options, s.data
    P, N, B = s.nparts, s.N, o.batch
    X, y = d.X, d.y
    w = np.zeros(N)
    mask = np.ones(N)
    if o.fit_intercept:
        mask[-1] = 0.0
    r = np.zeros((P, N))
    nrows = [int(rr.size) for rr in s.rows]
    history = []
    for e in range(o.epochs):
        perms = [s.rows[p][permutation(o.seed, e, p, s.rows[p].size)] for p in range(P)]
        eta = o.lr / (1.0 + o.lr_decay * e)
        for i in range(s.T):
            G = np.zeros(N)
            for p in range(P):
                rows = perms[p][i * B:(i + 1) * B]
                Xb, yb = X[rows], y[rows]
                m = Xb @ w
                z = yb * m
                with np.errstate(over="ignore"):
                    coef = -yb / (1.0 + np.exp(z)) if o.loss == "log" else \
                        np.where(z < 1.0, -yb, 0.0)
                g = Xb.T @ coef
                if o.topk is not None:
                    ghat = r[p] + g
                    if o.topk == "approx":
                        rng = np.random.default_rng([o.seed, 29, e, p, i])
                        sel = topk_approx(ghat, s.k, rng)
                    else:
                        sel = topk_exact(ghat, s.k)
                    g = np.zeros(N)
                    g[sel] = ghat[sel]
                    if o.error_feedback:
                        ghat[sel] = 0.0
                        r[p] = ghat
                G = G + g
            n = global_batch(nrows, B, i)
            w = w - eta * (G / n + o.reg * (w * mask))
        h = {"epoch": e}
        loss, acc = evaluate(w, X, y, o.loss)
        h["train_loss"] = loss + 0.5 * o.reg * float(np.dot(w * mask, w * mask))
        h["train_accuracy"] = acc
        if d.X_test is not None:
            h["test_loss"], h["test_accuracy"] = evaluate(w, d.X_test, d.y_test, o.loss)
        history.append(h)
    return {"w": w, "history": history}
