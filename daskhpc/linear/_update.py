"""The model update every part applies (and the serial reference, with the same code):
the step size of the schedule, the L2 step, the L1 cumulative penalty, row weights.

Step sizes (``learning_rate``): ``t`` is the number of rows the whole run has used before
the step (every part's batch of every earlier iteration, over all epochs), and the step
``w <- w - eta (G / n + alpha_2 w)`` uses scikit-learn's per-sample schedule at that t
on the batch's mean gradient:

* ``optimal`` (the default): ``eta = 1 / (alpha (t0 + t))`` with Bottou's ``t0`` (as
  sklearn's SGDClassifier; it needs ``reg`` > 0);
* ``invscaling``: ``eta = lr / (t + 1) ** power_t``;
* ``constant``: ``eta = lr``;
* ``legacy``: ``eta = lr / (1 + lr_decay e)`` in epoch e (the thesis's schedule).

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

__all__ = ["SCHEDULES", "PENALTIES", "bottou_t0", "eta", "rows_before", "l1_share",
           "l1_penalty", "row_weights", "penalty_value", "no_improvement", "stop_rule"]

SCHEDULES = ("optimal", "constant", "invscaling", "legacy")
PENALTIES = ("l2", "l1", "elasticnet")


def bottou_t0(loss: str, alpha: float) -> float:
    """sklearn's ``optimal`` offset: the first step is ``typw / max(1, dloss(-typw))`` with
    ``typw = sqrt(1 / sqrt(alpha))`` (a typical weight), and ``t0 = 1 / (eta_0 alpha)``."""
    typw = math.sqrt(1.0 / math.sqrt(alpha))
    dloss = -1.0 / (1.0 + math.exp(-typw)) if loss == "log" else -1.0   # at y = 1, m = -typw
    return 1.0 / (typw / max(1.0, dloss) * alpha)


def eta(schedule: str, lr: float, lr_decay: float, power_t: float, alpha: float,
        t0: float, epoch: int, t: int) -> float:
    """The step size of a step after ``t`` rows, in ``epoch`` (see the module)."""
    if schedule == "legacy":
        return lr / (1.0 + lr_decay * epoch)
    if schedule == "optimal":
        return 1.0 / (alpha * (t0 + t))
    if schedule == "invscaling":
        return lr / (t + 1.0) ** power_t
    return lr


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
