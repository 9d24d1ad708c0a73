"""Data-parallel SGD as a :class:`daskhpc.comm.Program` (the kit runs it; so does ``run_local``).

Per iteration one allreduce call (Algorithm 1 line 10, Algorithm 2 line 15): ``get``
computes the batch gradient (and the Top-k selection), ``put`` applies the update
(:mod:`._update`), fused with the next call's first step. The last iteration of an
epoch evaluates and reports; each epoch is a unit. No dask here.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass

import numpy as np

from daskhpc.allreduce import allreduce_local, append_allreduce
from daskhpc.comm import Program

from ._kernels import (LOSSES, batch_gradient, batch_gradient_ovr, coefficients,
                       coefficients_ovr, losses, losses_ovr, margins, margins_ovr)
from ._setup import permutation
from ._topk import topk_approx, topk_exact
from ._update import (bottou_t0, epoch_steps, l1_penalty, l1_share, mean_step, penalty_value,
                      rows_before, step, step_cap)


def statics(setup, rows: bool = True) -> list[dict]:
    """Per part: its rows (CSR pieces, unless ``rows=False``), labels, test rows, constants."""
    o, d = setup.options, setup.data
    out = []
    for p in range(setup.nparts):
        X = d.X[setup.rows[p]] if rows else None
        st = {"X": None if X is None else packed(X),
              "y": d.y[setup.rows[p]],
              "nrows": [int(r.size) for r in setup.rows], "N": setup.N, "K": setup.K,
              "loss": LOSSES[o.loss], "batch": o.batch, "lr": o.lr,
              "schedule": o.learning_rate, "power_t": o.power_t, "T": setup.T,
              "t0": bottou_t0(o.loss, o.reg) if o.learning_rate == "optimal" else 0.0,
              "reg": o.reg, "cap": step_cap(o), "l1": l1_share(o.penalty, o.l1_ratio),
              "sw": None if setup.weights is None else setup.weights[setup.rows[p]],
              "topk": o.topk, "k": setup.k, "ef": o.error_feedback,
              "seed": o.seed, "intercept": o.fit_intercept, "w0": setup.w0}
        if d.X_test is not None:
            Xt = d.X_test[setup.test_rows[p]]
            st["Xt"], st["yt"] = packed(Xt), d.y_test[setup.test_rows[p]]
        out.append(st)
    return out


@dataclass(frozen=True)
class Repeated:
    """The values of a part's CSR rows when all have the same bits, sent as one number."""

    value: float
    size: int
    dtype: str

    def array(self) -> np.ndarray:
        return np.full(self.size, self.value, self.dtype)


def packed(X) -> tuple:
    """``(indptr, indices, data)`` of CSR ``X``, the data a :class:`Repeated` if it can be."""
    data = X.data
    if data.size and data.dtype.itemsize == 8 and data.dtype.kind == "f":
        bits = data.view(np.uint64)
        if (bits == bits[0]).all():
            data = Repeated(float(data[0]), int(data.size), data.dtype.str)
    return X.indptr, X.indices, data


def unpacked(X: tuple | None) -> tuple | None:
    """:func:`packed`'s triple with its data an array again."""
    if X is None or not isinstance(X[2], Repeated):
        return X
    return X[0], X[1], X[2].array()


def _init(ctx, start):
    S = ctx.static
    N = S["K"] * S["N"]
    w0 = np.zeros(N) if S["w0"] is None else np.array(S["w0"])     # a warm start's
    w = w0 if start is None else np.array(start["w"], np.float64)
    ctx.state["w"] = w
    # the epoch's mean of iterates; a checkpoint's is the last finished epoch's
    ctx.state["wbar"] = w.copy() if start is None or "wbar" not in start else \
        np.array(start["wbar"], np.float64)
    ctx.state["X"], ctx.state["Xt"] = unpacked(S["X"]), unpacked(S.get("Xt"))
    if S["topk"] is not None:
        ctx.state["r"] = np.zeros(N) if start is None else np.array(start["r"])
    if S["l1"] > 0.0:          # the cumulative penalty's state (checkpointed with w)
        ctx.state["q"] = np.zeros(N) if start is None else np.array(start["q"])
        ctx.state["u"] = 0.0 if start is None else float(np.asarray(start["u"]))
    mask = np.ones(N)
    if S["intercept"]:
        mask[S["N"] - 1::S["N"]] = 0.0
    ctx.state["mask"] = mask
    ctx.state["before"] = rows_before(S["nrows"], S["batch"], S["T"])


def _save(ctx):
    out = {"w": ctx.state["w"], "wbar": ctx.state["wbar"]}
    for key in ("r", "q"):
        if key in ctx.state:
            out[key] = ctx.state[key]
    if "u" in ctx.state:
        out["u"] = np.array(ctx.state["u"])
    return out


def _final(ctx):
    return ctx.state["wbar"]


def _batch(ctx, epoch, it):
    S, st = ctx.static, ctx.state
    if st.get("perm_epoch") != epoch:
        st["perm"] = permutation(S["seed"], epoch, ctx.part, S["y"].size)
        st["perm_epoch"] = epoch
    B = S["batch"]
    return st["perm"][it * B:(it + 1) * B]


def _grad(ctx, epoch, it):
    """``get``: the part's batch gradient (Algorithm 1 line 8 / Algorithm 2 lines 8-12)."""
    S, st = ctx.static, ctx.state
    indptr, indices, data = st["X"]
    rows = _batch(ctx, epoch, it)
    if S["K"] > 1:
        m = margins_ovr(indptr, indices, data, rows, st["w"], S["K"], S["N"])
        coef = coefficients_ovr(m, S["y"][rows], S["loss"])
        if S["sw"] is not None:
            coef = coef * S["sw"][rows][:, None]
        idx, val = batch_gradient_ovr(indptr, indices, data, rows, coef, S["N"])
    else:
        m = margins(indptr, indices, data, rows, st["w"])
        coef = coefficients(m, S["y"][rows], S["loss"])
        if S["sw"] is not None:
            coef = coef * S["sw"][rows]
        idx, val = batch_gradient(indptr, indices, data, rows, coef)
    if S["topk"] is None:
        return idx, val
    ghat = st["r"].copy()                     # line 8: g_hat = r + sum of gradients
    ghat[idx] += val
    if S["topk"] == "approx":                  # section 2.4.1, seeded per call
        rng = np.random.default_rng([S["seed"], 29, epoch, ctx.part, it])
        sel = topk_approx(ghat, S["k"], rng)
    else:
        sel = topk_exact(ghat, S["k"])         # line 9 (ties: lowest index)
    send = (sel.astype(np.uint32), ghat[sel])
    if S["ef"]:
        ghat[sel] = 0.0                        # lines 10-12: the rest is the residual
        st["r"] = ghat
    return send


def _update(ctx, total, epoch, it, last):
    """``put``: the update every part applies (Algorithm 1 line 10), then the mean of iterates."""
    S, st = ctx.static, ctx.state
    l1 = S["l1"]
    if st.get("steps_epoch") != epoch:       # the epoch's steps, as the serial reference
        reg2 = S["reg"] if l1 == 0.0 else S["reg"] * (1.0 - l1)
        st["steps"] = epoch_steps(S["schedule"], S["lr"], S["power_t"], S["reg"], S["t0"],
                                  reg2, S["cap"], st["before"], epoch)
        st["steps_epoch"] = epoch
    a, b, n = st["steps"]
    w = step(st["w"], total.to_dense(), a[it], b[it], n[it], st["mask"])
    if l1 > 0.0:
        st["u"] += a[it] * S["reg"] * l1
        w = l1_penalty(w, st["q"], st["u"], st["mask"])
    st["w"] = w
    st["wbar"] = w.copy() if it == 0 else mean_step(st["wbar"], w, it)
    if last:
        _evaluate(ctx)


def _evaluate(ctx):
    S, st = ctx.static, ctx.state
    w = st["wbar"]
    vals = {}
    for tag, X, y in (("train", st["X"], S["y"]), ("test", st["Xt"], S.get("yt"))):
        if X is None:
            continue
        rows = np.arange(y.size)
        if S["K"] > 1:
            m = margins_ovr(*X, rows, w, S["K"], S["N"])
            vals[f"{tag}_loss_sum"] = float(losses_ovr(m, y, S["loss"]).sum())
            vals[f"{tag}_correct"] = int(np.sum(np.argmax(m, axis=1) == y))
        else:
            m = margins(*X, rows, w)
            vals[f"{tag}_loss_sum"] = float(losses(m, y, S["loss"]).sum())
            vals[f"{tag}_correct"] = int(np.sum(np.where(m > 0, 1.0, -1.0) == y))
        vals[f"{tag}_n"] = int(y.size)
    sent = st.pop("allreduce_sent", {"bytes": 0, "messages": 0, "items": 0})
    wm = w * st["mask"]
    ctx.report(sent_bytes=sent["bytes"], messages=sent["messages"], items=sent["items"],
               w_norm2=float(np.dot(wm, wm)), w_norm1=float(np.abs(wm).sum()), **vals)


def program(setup, first_unit: int = 0) -> Program:
    """Epochs ``first_unit .. epochs - 1``: T calls each, the last one reported."""
    prog = Program(setup.nparts, "linear", init=_init, final=_final, save=_save,
                   first_unit=first_unit)
    for e in range(first_unit, setup.options.epochs):
        for i, (algo, plan, _) in enumerate(setup.calls(e)):
            last = i == setup.T - 1
            append_allreduce(prog, functools.partial(_grad, epoch=e, it=i),
                             functools.partial(_update, epoch=e, it=i, last=last),
                             algorithm=algo, plan=plan, report=last, count=True,
                             fuse=i > 0, label=f"e{e}i{i}")
    return prog


def row(setup, unit: int, reports: dict) -> dict:
    """History row of epoch ``unit``: loss, accuracy (train, test), bytes sent."""
    parts = [reports[p] for p in sorted(reports)]
    o = setup.options
    pen = penalty_value(o.reg, l1_share(o.penalty, o.l1_ratio), parts[0]["w_norm1"],
                        parts[0]["w_norm2"])
    out = {"epoch": unit}
    for tag in ("train", "test"):
        if f"{tag}_n" not in parts[0]:
            continue
        n = sum(r[f"{tag}_n"] for r in parts)
        loss = sum(r[f"{tag}_loss_sum"] for r in parts) / n
        out[f"{tag}_loss"] = loss + (pen if tag == "train" else 0)
        out[f"{tag}_accuracy"] = sum(r[f"{tag}_correct"] for r in parts) / n
    out["sent_bytes"] = int(sum(r["sent_bytes"] for r in parts))
    out["messages"] = int(sum(r["messages"] for r in parts))
    out["items"] = int(sum(r["items"] for r in parts))
    if setup.k is None:     # the parts' payload bytes the plans say
        out["planned_sent_bytes"] = setup.planned_bytes(unit)
    return out


def assemble(setup, finals) -> np.ndarray:
    """The model w (every part holds the same bits); K x N for K > 1 classes."""
    w = finals[0]
    if any(not np.array_equal(w, f) for f in finals[1:]):
        raise AssertionError("the parts' models differ")
    return model(setup, w)


def model(setup, w: np.ndarray) -> np.ndarray:
    """The flat class-major w as the result keeps it: (N,) binary, (K, N) multiclass."""
    return w.reshape(setup.K, setup.N) if setup.K > 1 else w


def fingerprint(s) -> dict:
    """What a checkpoint must agree on: data, parts, options (not epochs), the algorithms."""
    from daskhpc.runtime import array_digest

    X = s.data.X
    digest = array_digest(X.indptr, X.indices, X.data, s.data.y)
    opts = asdict(s.options)
    if isinstance(opts["class_weight"], dict):     # JSON keys: the labels as text
        opts["class_weight"] = {str(k): float(v) for k, v in opts["class_weight"].items()}
    # a resumed run may run longer; alpha, beta, floor only choose algorithms
    for k in ("epochs", "tol", "n_iter_no_change", "alpha", "beta", "floor", "init"):
        opts.pop(k)
    if s.w0 is not None:
        opts["init"] = array_digest(s.w0)
    return {"input": {k: v for k, v in s.data.source.items() if k != "path"},
            "data": digest, "parts": s.nparts, "options": opts,
            "algorithms": sorted({a.name for a, _, _ in s.calls(0)})}


def warm_up():
    """Load the numba kernels on a worker before anything is timed."""
    ip, ix, d = np.array([0, 1]), np.array([0], np.int32), np.array([1.0])
    rows = np.array([0])
    m = margins(ip, ix, d, rows, np.ones(1))
    coefficients(m, np.ones(1), 0)
    losses(m, np.ones(1), 0)
    batch_gradient(ip, ix, d, rows, np.ones(1))
    mo = margins_ovr(ip, ix, d, rows, np.ones(3), 3, 1)
    losses_ovr(mo, rows, 0)
    batch_gradient_ovr(ip, ix, d, rows, coefficients_ovr(mo, rows, 0), 1)
    allreduce_local([np.array([1.0, 0.0]), np.array([0.0, 1.0])], algorithm="ssar_rec_dbl")
