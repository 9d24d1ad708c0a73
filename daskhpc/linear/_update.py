"""The model update every part applies (and the serial reference, with the same code):
the step size of the schedule, the L2 step, the L1 cumulative penalty, row weights.

Step sizes (``learning_rate``): ``t`` is the number of rows the whole run has used before
the step (every part's batch of every earlier iteration, over all epochs) and ``eta(t)``
scikit-learn's per-sample step there:

* ``optimal`` (the default): ``eta = 1 / (alpha (t0 + t))`` with Bottou's ``t0`` (as
  sklearn's SGDClassifier; it needs ``reg`` > 0);
* ``invscaling``: ``eta = lr / (t + 1) ** power_t``;
* ``constant``: ``eta = lr``.

A step of n rows (the global batch) stands for the n per-sample steps those rows would
have had: ``w <- w - a G / n - b w_masked`` with ``a = min(n eta(t), cap)`` on the
mean gradient ``G / n`` and ``b = 1 - (1 - eta(t) alpha_2) ** (a / eta(t))``, the L2
shrinking of as many per-sample steps. The cap keeps the steps of a large batch, whose
rows all see the same w, where the mean-gradient iteration stays stable: ``CAP / L``
with ``L = lambda_max(X^T X / M) / 4``, the logistic loss's curvature bound over the
training rows (:func:`curvature`). Larger steps make the iteration chaotic (on a9a a
1e-13 change of w grew to 5 % of it in 5 epochs at 55 / L: the cluster's sums, in
another order than the serial reference's, then give another model). :func:`batch_steps`.

Every part (and the serial reference) also keeps the mean of its iterates over the
epoch (after each step of it): the epoch's model, evaluated and returned, while the
iterate w goes on into the next epoch (tail averaging: the step of n rows keeps
per-sample SGD's progress, the mean removes most of its noise).

Penalties (``penalty``, ``l1_ratio`` as scikit-learn's; ``reg`` is alpha): L2 with
strength ``alpha (1 - l1_ratio)`` in the step; L1 with strength ``alpha l1_ratio`` by
Tsuruoka et al.'s cumulative penalty (2009, as sklearn's SGD): ``u`` sums
``eta alpha l1_ratio`` over the steps, ``q_i`` what weight i was actually penalised,
and after each step every weight moves towards 0 by what it still owes, clipped at 0
(so weights become exactly 0). The intercept is never penalised.

Examples
--------
>>> import numpy as np
>>> round(bottou_t0("log", 1e-4), 3)
1000.0
>>> w, q = np.array([0.5, -0.2, 0.05, 1.0]), np.zeros(4)
>>> l1_penalty(w, q, 0.1, np.array([1.0, 1.0, 1.0, 0.0])).tolist()
[0.4, -0.1, 0.0, 1.0]
"""

from __future__ import annotations

import functools
import math

import numpy as np

__all__ = ["SCHEDULES", "PENALTIES", "CAP", "bottou_t0", "eta", "curvature", "power_iteration",
           "batch_steps", "epoch_steps",
           "step_cap", "step", "mean_step", "rows_before", "l1_share",
           "l1_penalty", "row_weights", "penalty_value", "no_improvement", "stop_rule"]

SCHEDULES = ("optimal", "constant", "invscaling")
#: The largest step on a mean gradient, in units of 1 / L (the module; docs/linear.md:
#: 2 / L lost accuracy on sparse high-dimensional data, 6 / L kept scikit-learn's on
#: every set measured and the iteration stable)
CAP = 6.0
PENALTIES = ("l2", "l1", "elasticnet")


def bottou_t0(loss: str, alpha: float) -> float:
    """sklearn's ``optimal`` offset: the first step is ``typw / max(1, dloss(-typw))`` with
    ``typw = sqrt(1 / sqrt(alpha))`` (a typical weight), and ``t0 = 1 / (eta_0 alpha)``."""
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
    """``L = lambda_max(X^T X / M) / 4``: the largest curvature of the mean logistic loss
    over the rows of ``X`` (scipy sparse; power iteration from the ones vector, so the
    same bits every time; :func:`power_iteration`)."""
    return power_iteration(lambda v: X.T @ (X @ v), X.shape[0], X.shape[1], iterations)


def power_iteration(gram, M: int, N: int, iterations: int = 10) -> float:
    """:func:`curvature` of an ``M x N`` matrix given as ``gram(v) = X^T X v``, rounded
    to 3 significant digits: a Dask collection's sums (its pieces' in another order) give
    the same L as the matrix in memory, so the same steps and model."""
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
    """``(a, b)`` of the steps that follow ``t`` rows and take ``n`` (arrays, one entry
    per iteration): the gradient step and the L2 shrink (the module's formulas).

    Examples
    --------
    >>> a, b = batch_steps("constant", 0.1, 0.5, 1e-4, 0.0, 1e-4, np.array([0, 8]),
    ...                    np.array([2, 8]), 0.5)
    >>> a.tolist(), [round(v, 8) for v in b.tolist()]
    ([0.2, 0.5], [2e-05, 5e-05])
    """
    t = np.asarray(t, np.float64)
    e = eta(schedule, lr, power_t, alpha, t0, t)
    a = np.minimum(np.asarray(n, np.float64) * e, cap)
    b = 1.0 - np.maximum(0.0, 1.0 - e * reg2) ** (a / e)
    return a, b


def epoch_steps(schedule: str, lr: float, power_t: float, alpha: float, t0: float,
                reg2: float, cap: float, before: np.ndarray, epoch: int) -> tuple:
    """``(a, b, n)`` of every iteration of ``epoch`` (:func:`batch_steps`; ``n`` the
    global batches, floats) from its :func:`rows_before`."""
    n = np.diff(before).astype(np.float64)
    a, b = batch_steps(schedule, lr, power_t, alpha, t0, reg2,
                       epoch * before[-1] + before[:-1], n, cap)
    return a, b, n


def step_cap(o) -> float:
    """The largest step of a run with options ``o``: ``CAP / o.curvature``."""
    return CAP / max(float(o.curvature), 1e-300)


def step(w: np.ndarray, G: np.ndarray, a: float, b: float, n: float,
         mask: np.ndarray) -> np.ndarray:
    """The update ``w - a (G / n) - b w_masked`` (the same operations in the compiled
    epoch of ``_kernels.serial_epoch``)."""
    return w - a * (G / n) - b * (w * mask)


def mean_step(wbar: np.ndarray, w: np.ndarray, i: int) -> np.ndarray:
    """The mean of an epoch's iterates after its iteration ``i`` > 0."""
    return wbar + (w - wbar) / (i + 1.0)


def rows_before(nrows, batch: int, T: int) -> np.ndarray:
    """``c[i]``: the rows all parts use in iterations ``0 .. i - 1`` of an epoch (``c[T]``
    the epoch's rows); a step of iteration i of epoch e follows ``e c[T] + c[i]`` rows."""
    n = np.asarray(nrows, np.int64)
    # every iteration at once (a loop over the T iterations cost 2.6 ms per run, measured)
    per = np.clip(n[None, :] - np.arange(T, dtype=np.int64)[:, None] * batch, 0, batch)
    return np.concatenate([[0], np.cumsum(per.sum(axis=1), dtype=np.int64)])


def l1_share(penalty: str, l1_ratio: float) -> float:
    """The fraction of alpha that is L1."""
    return {"l2": 0.0, "l1": 1.0}.get(penalty, float(l1_ratio))


def l1_penalty(w: np.ndarray, q: np.ndarray, u: float, mask: np.ndarray) -> np.ndarray:
    """Tsuruoka's cumulative L1 penalty on the masked weights: ``u`` the total penalty so
    far, ``q`` (updated in place) what each weight has received; returns the new w."""
    z = w
    pos = np.maximum(0.0, w - (u + q))
    neg = np.minimum(0.0, w + (u - q))
    w = np.where(mask == 0.0, w, np.where(w > 0.0, pos, np.where(w < 0.0, neg, w)))
    q += w - z
    return w


def row_weights(class_weight, y: np.ndarray, classes: np.ndarray, K: int):
    """Per-row loss weights of ``class_weight`` (None: no weights, so the update is the
    unweighted one bit for bit); ``y`` as :mod:`._data` keeps it (+-1 or class index)."""
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
    """The regulariser's value ``alpha (l1 |w|_1 + (1 - l1) |w|^2 / 2)`` (L2: as before)."""
    if l1 == 0.0:
        return 0.5 * alpha * norm2
    return alpha * (l1 * norm1 + 0.5 * (1.0 - l1) * norm2)


def no_improvement(history: list, tol: float | None, n: int) -> bool:
    """scikit-learn's stop rule of ``SGDClassifier`` on the history so far: true once the
    training objective (``train_loss``) has not gone below the best one by ``tol`` for
    ``n`` epochs in a row. ``tol`` None: never.

    Examples
    --------
    >>> h = [{"train_loss": v} for v in (0.50, 0.40, 0.399, 0.3995, 0.3991)]
    >>> no_improvement(h, 1e-2, 3), no_improvement(h[:4], 1e-2, 3), no_improvement(h, None, 3)
    (True, False, False)
    """
    if tol is None:
        return False
    best, count = np.inf, 0
    for h in history:
        loss = h["train_loss"]
        count = count + 1 if loss > best - tol else 0
        best = min(best, loss)
    return count >= n


def stop_rule(options):
    """``stop(history)`` of a run with these options (:func:`no_improvement` with their
    ``tol`` and ``n_iter_no_change``), None without ``tol``."""
    if options.tol is None:
        return None
    return functools.partial(no_improvement, tol=options.tol, n=options.n_iter_no_change)
