"""The model update every part and the serial reference apply (docs/linear.md,
"Schedules, penalties, class weights").

A step of n rows after t rows: ``w <- w - a G / n - b w_masked`` with ``a = min(n eta(t),
CAP / L)`` and ``b = 1 - (1 - eta(t) alpha_2) ** (a / eta(t))``; the L1 part by
Tsuruoka et al.'s cumulative penalty (2009); the epoch's model is the mean of its
iterates. The intercept is never penalised.
"""

from __future__ import annotations

import functools
import math

import numpy as np

SCHEDULES = ("optimal", "constant", "invscaling")
#: The largest step on a mean gradient, in units of 1 / L (measured: docs/linear.md)
CAP = 6.0
PENALTIES = ("l2", "l1", "elasticnet")


def bottou_t0(loss: str, alpha: float) -> float:
    """sklearn's ``optimal`` offset ``t0 = 1 / (eta_0 alpha)`` from a typical weight."""
    typw = math.sqrt(1.0 / math.sqrt(alpha))
    dloss = -1.0 / (1.0 + math.exp(-typw)) if loss == "log" else -1.0   # at y = 1, m = -typw
    return 1.0 / (typw / max(1.0, dloss) * alpha)


def eta(schedule: str, lr: float, power_t: float, alpha: float, t0: float, t):
    """The per-sample step size after ``t`` rows (a number or an array; the module)."""
    t = np.asarray(t, np.float64)
    if schedule == "optimal":
        return 1.0 / (alpha * (t0 + t))
    if schedule == "invscaling":
        return lr / (t + 1.0) ** power_t
    return np.full(t.shape, float(lr))


def curvature(X, iterations: int = 10) -> float:
    """``L = lambda_max(X^T X / M) / 4``, the mean logistic loss's largest curvature."""
    return power_iteration(lambda v: X.T @ (X @ v), X.shape[0], X.shape[1], iterations)


def power_iteration(gram, M: int, N: int, iterations: int = 10) -> float:
    """:func:`curvature` of ``gram(v) = X^T X v``, rounded to 3 digits (the same L any order)."""
    v = np.ones(N) / np.sqrt(max(N, 1))
    lam = 0.0
    for _ in range(iterations):
        u = gram(v) / max(M, 1)
        lam = float(np.linalg.norm(u))
        if lam == 0.0:
            break
        v = u / lam
    return float(f"{lam / 4.0:.3g}")


def batch_steps(schedule: str, lr: float, power_t: float, alpha: float, t0: float,
                reg2: float, t: np.ndarray, n: np.ndarray, cap: float) -> tuple:
    """``(a, b)`` of the steps that follow ``t`` rows and take ``n`` (per iteration)."""
    t = np.asarray(t, np.float64)
    e = eta(schedule, lr, power_t, alpha, t0, t)
    a = np.minimum(np.asarray(n, np.float64) * e, cap)
    b = 1.0 - np.maximum(0.0, 1.0 - e * reg2) ** (a / e)
    return a, b


def epoch_steps(schedule: str, lr: float, power_t: float, alpha: float, t0: float,
                reg2: float, cap: float, before: np.ndarray, epoch: int) -> tuple:
    """``(a, b, n)`` of every iteration of ``epoch`` from its :func:`rows_before`."""
    n = np.diff(before).astype(np.float64)
    a, b = batch_steps(schedule, lr, power_t, alpha, t0, reg2,
                       epoch * before[-1] + before[:-1], n, cap)
    return a, b, n


def step_cap(o) -> float:
    """The largest step of a run with options ``o``: ``CAP / o.curvature``."""
    return CAP / max(float(o.curvature), 1e-300)


def step(w: np.ndarray, G: np.ndarray, a: float, b: float, n: float,
         mask: np.ndarray) -> np.ndarray:
    """The update ``w - a (G / n) - b w_masked`` (as ``_kernels.serial_epoch`` computes it)."""
    return w - a * (G / n) - b * (w * mask)


def mean_step(wbar: np.ndarray, w: np.ndarray, i: int) -> np.ndarray:
    """The mean of an epoch's iterates after its iteration ``i`` > 0."""
    return wbar + (w - wbar) / (i + 1.0)


def rows_before(nrows, batch: int, T: int) -> np.ndarray:
    """``c[i]``: the rows all parts use in iterations ``0 .. i - 1`` of an epoch."""
    n = np.asarray(nrows, np.int64)
    per = np.clip(n[None, :] - np.arange(T, dtype=np.int64)[:, None] * batch, 0, batch)
    return np.concatenate([[0], np.cumsum(per.sum(axis=1), dtype=np.int64)])


def l1_share(penalty: str, l1_ratio: float) -> float:
    """The fraction of alpha that is L1."""
    return {"l2": 0.0, "l1": 1.0}.get(penalty, float(l1_ratio))


def l1_penalty(w: np.ndarray, q: np.ndarray, u: float, mask: np.ndarray) -> np.ndarray:
    """Tsuruoka's cumulative L1 penalty: ``u`` the total so far, ``q`` (in place) what each got."""
    z = w
    pos = np.maximum(0.0, w - (u + q))
    neg = np.minimum(0.0, w + (u - q))
    w = np.where(mask == 0.0, w, np.where(w > 0.0, pos, np.where(w < 0.0, neg, w)))
    q += w - z
    return w


def row_weights(class_weight, y: np.ndarray, classes: np.ndarray, K: int):
    """Per-row loss weights of ``class_weight`` (None: none, the unweighted update bit for bit)."""
    if class_weight is None:
        return None
    idx = ((y > 0).astype(np.int64) if K == 1 else y.astype(np.int64))
    if class_weight == "balanced":       # sklearn's: n / (n_classes * count of the class)
        counts = np.bincount(idx, minlength=classes.size).astype(np.float64)
        per = np.where(counts > 0, idx.size / (classes.size * np.maximum(counts, 1)), 1.0)
    else:
        per = np.ones(classes.size)
        for label, weight in class_weight.items():
            per[_label_index(classes, label)] = float(weight)
    return per[idx]


def _label_index(classes, label) -> int:
    from daskhpc.errors import InputError

    for i, c in enumerate(classes.tolist()):
        if c == label or str(c) == str(label):
            return i
        try:
            if float(c) == float(label):
                return i
        except (TypeError, ValueError):
            pass
    raise InputError(f"--class-weight: label {label!r} is not among the training labels "
                     f"{classes[:10].tolist()}")


def penalty_value(alpha: float, l1: float, norm1: float, norm2: float) -> float:
    """The regulariser's value ``alpha (l1 |w|_1 + (1 - l1) |w|^2 / 2)``."""
    if l1 == 0.0:
        return 0.5 * alpha * norm2
    return alpha * (l1 * norm1 + 0.5 * (1.0 - l1) * norm2)


def no_improvement(history: list, tol: float | None, n: int) -> bool:
    """scikit-learn's stop rule: no new best training loss by ``tol`` for ``n`` epochs."""
    if tol is None:
        return False
    best, count = np.inf, 0
    for h in history:
        loss = h["train_loss"]
        count = count + 1 if loss > best - tol else 0
        best = min(best, loss)
    return count >= n


def stop_rule(options):
    """``stop(history)`` of a run with these options, None without ``tol``."""
    if options.tol is None:
        return None
    return functools.partial(no_improvement, tol=options.tol, n=options.n_iter_no_change)
