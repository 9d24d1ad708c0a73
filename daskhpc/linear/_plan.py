"""The plan of a linear-classifier run: its calls' Plans, the report sections (no cluster)."""

from __future__ import annotations

from collections import Counter

import numpy as np

from daskhpc.comm import Plan

from ._setup import Setup

#: flops of one stored entry of a batch row in one model's gradient: the margin's
#: multiply-add, then the gradient's
GRADIENT_FLOPS = 4


def epoch_seconds(s: Setup, calls) -> float:
    """Predicted seconds of an epoch: its calls' gradients and allreduces, then the evaluation."""
    X, Xt, K = s.data.X, s.data.X_test, s.K
    row_nnz = np.diff(X.indptr)
    part = np.array([row_nnz[r].sum() for r in s.rows], dtype=float)
    batch = part * np.minimum(1.0, s.options.batch / np.maximum(
        [r.size for r in s.rows], 1))
    test = np.zeros_like(part) if Xt is None else np.array(
        [np.diff(Xt.indptr)[r].sum() for r in s.test_rows], dtype=float)
    flop_s = s.cost.flop_s
    gradient = GRADIENT_FLOPS * K * batch.max() * flop_s
    evaluate = 2.0 * K * (part + test).max() * flop_s + s.cost.floor_s
    return float(sum(c["candidates"][a.name] + gradient for a, _, c in calls) + evaluate)


def sections(s: Setup, history=None, command=None, epochs=None) -> dict:
    """Report sections shared by ``plan`` and the runs."""
    o = s.options
    out = {"command": command, "input": dict(s.data.source), "parts": s.nparts,
           "loss": o.loss, "classes": s.data.classes.tolist(), "models": s.K,
           "learning_rate": o.learning_rate, "penalty": o.penalty,
           "topk": o.topk, "error_feedback": o.error_feedback,
           "allreduce": o.allreduce, "seed": o.seed,
           "options": {k: getattr(o, k) for k in o.__dataclass_fields__}}
    out["steps"] = {"iterations_per_epoch": s.T}
    if s.batch_auto is not None:        # --batch auto: what it chose and why
        out["batch_auto"] = dict(s.batch_auto)
    if s.data.notes:
        out["notes"] = list(s.data.notes)
    eps = range(o.epochs) if epochs is None else epochs
    algos, per_epoch = Counter(), []
    for e in eps:
        calls = s.calls(e)
        algos.update(a.name for a, _, _ in calls)
        per_epoch.append({"epoch": e, "steps": sum(a.nstages for a, _, _ in calls) + 1,
                          "planned_bytes": s.planned_bytes(e),
                          "messages": int(sum(p.num_messages for _, p, _ in calls))})
    first = per_epoch[0]
    e0 = eps[0] if len(eps) else 0
    # the paper's metrics of one epoch: its calls one after the other (a stage a phase)
    epoch = Plan.concat([p for _, p, _ in s.calls(e0)]).report()
    out["plan"] = {**epoch, "per_epoch": per_epoch, "algorithms": dict(algos),
                   "planned_bytes_per_epoch": first["planned_bytes"],
                   "messages_per_epoch": first["messages"], "steps_per_epoch": first["steps"],
                   "exact": s.k is None,
                   "note": None if s.k is None else "Top-k: dense-bound plans (no message "
                   "is larger); measured sends are in the history"}
    calls = s.calls(e0)
    if calls and all(c for _, _, c in calls):
        out["plan"]["predicted_s_per_step"] = epoch_seconds(s, calls)
        out["plan"]["prediction"] = {"network": {"name": "alpha-beta",
                                                 "alpha_s": calls[0][2]["alpha"],
                                                 "beta_s_per_byte": calls[0][2]["beta"]}}
    choice = next((c for _, _, c in s.calls(eps[0] if epochs else 0) if c), None)
    if choice:
        out["choice"] = {"example": choice, "alpha": choice["alpha"], "beta": choice["beta"]}
    out["timing"] = {k: round(v, 6) for k, v in s.timing.items()}
    if history is not None and o.tol is not None:
        out["stopped"] = {"epochs": len(history), "early": len(history) < o.epochs,
                          "tol": o.tol, "n_iter_no_change": o.n_iter_no_change,
                          "rule": "train_loss not below its best by tol for "
                                  "n_iter_no_change epochs in a row"}
    if history is not None:
        out["timing"]["per_iteration_s"] = [h["time_s"] for h in history]
        last = history[-1]
        out["quality"] = {k: last[k] for k in ("train_loss", "train_accuracy", "test_loss",
                                               "test_accuracy") if k in last}
    return out
