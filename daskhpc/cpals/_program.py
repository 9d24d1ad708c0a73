"""CP-ALS as a :class:`daskhpc.comm.Program`: Algorithms 3 (coarse) and 4 (fine) per mode.

Each part holds its nonzeros in local coordinates and the factor rows it owns or needs.
Per mode n: *mttkrp* over the part's nonzeros (Algorithm 4 line 1); fine grain *fold*,
the partial rows to their owners, summed in part-id order (lines 2-3); *solve* ``U_new =
M (*_{m != n} G_m + reg I)^+`` for the owned rows, whose Gram, column maxima and (last
mode) fit terms start one all-reduce (recursive doubling) while the *expand* sends the
new rows to Lambda_i (Algorithm 3 line 3, Algorithm 4 line 5); *finish*: lambda, the
normalised rows and G_n, and after the last mode the fit. An iteration is ``N L`` steps
coarse and ``N (L + 1)`` fine (L all-reduce rounds)."""

from __future__ import annotations

import hashlib
import time
from contextlib import contextmanager
from functools import partial

import numpy as np

from daskhpc._narrow import hash_wide
from daskhpc.comm import Program

from ._als import column_scale, converged, fit_value, solve_rows
from ._kernels import mttkrp_into, slices
from ._plan import allreduce_words
from ._rows import col_absmax, col_inner, gram, init_rows, scatter_rows, sum_rows_into
from ._serial import iteration
from ._parts import PartStatic, statics  # noqa: F401 - statics for the example


def _init(ctx, start):
    st: PartStatic = ctx.static
    N, R = len(st.rows), st.rank
    shape = [r.size for r in st.rows]
    made = getattr(st, "_slices", None)
    if made is None:
        made = [slices(st.coords, st.vals, n, shape, select=st.work[n]) for n in range(N)]
        # the slices hold every nonzero of the part, once per mode: its coords and values
        # are not read again, so the worker drops them (a third of the part's bytes);
        # another attempt on this worker starts from the same slices
        st._slices = made
        st.coords = st.vals = None
    ctx.state["slices"] = made
    if start is None:
        ctx.state["U"] = [init_rows(st.seed, m, st.rows[m], R) if st.U0 is None
                          else st.U0[m].copy() for m in range(N)]
        ctx.state["G"] = [g.copy() for g in st.grams0]
        ctx.state["lam"] = np.ones(R)
    else:
        ctx.state["U"] = [np.array(start[f"U{m}"], dtype=np.float64) for m in range(N)]
        ctx.state["G"] = [np.array(g, dtype=np.float64) for g in start["G"]]
        ctx.state["lam"] = np.array(start["lam"], dtype=np.float64)
        # the last iteration's fit: the stop rule compares the next one with it
        ctx.state["fits"] = [float(f) for f in start.get("fit", ())]


def _save(ctx) -> dict:
    out = {f"U{m}": u for m, u in enumerate(ctx.state["U"])}
    out["G"] = np.stack(ctx.state["G"])
    out["lam"] = ctx.state["lam"]
    out["fit"] = np.array(ctx.state.get("fits", [])[-1:], dtype=np.float64)
    return out


def _final(ctx):
    st: PartStatic = ctx.static
    U = ctx.state["U"]
    return (tuple(st.rows[m][st.own[m]] for m in range(len(U))),
            tuple(U[m][st.own[m]] for m in range(len(U))), ctx.state["lam"])


@contextmanager
def _clock(ctx):
    """Add the block's wall and CPU seconds to the part's count for the iteration."""
    t0, c0 = time.perf_counter(), time.thread_time()
    yield
    S = ctx.state
    S["busy"] = S.get("busy", 0.0) + (time.perf_counter() - t0)
    S["cpu"] = S.get("cpu", 0.0) + (time.thread_time() - c0)


def _mttkrp(ctx, n: int, fold: bool = True):
    """Partial MTTKRP of mode n (Algorithm 4 line 1), fine grain folded to owners (line 2)."""
    st: PartStatic = ctx.static
    S = ctx.state
    with _clock(ctx):
        S["M"] = M = np.empty((st.rows[n].size, st.rank))
        mttkrp_into(S["slices"][n], S["U"], M)
        return {q: M[pos].ravel() for q, pos in st.fold_send[n].items()} if fold else None


def _solve(ctx, n: int, first: bool, fold: bool):
    """The allreduce's contribution: the owners sum the folded partials in part-id order (line
    3) and solve (line 4); the new rows' Gram, column maxima and fit terms, and the
    unnormalised new rows to the parts that need them (line 5)."""
    st: PartStatic = ctx.static
    R, S = st.rank, ctx.state
    if not fold:
        _mttkrp(ctx, n, fold=False)
    with _clock(ctx):
        M = S.pop("M")
        if fold:
            acc = np.zeros((st.own[n].size, R))
            for q in sorted([*ctx.inbox, ctx.part]):
                if q == ctx.part:
                    acc += M[st.own[n]]
                else:
                    pos = st.fold_recv[n][q]
                    sum_rows_into(acc, pos, ctx.inbox[q].reshape(pos.size, R))
        else:
            acc = M[st.own[n]]
        Unew = solve_rows(acc, S["G"], n, st.reg, st.nonnegative)
        parts = [gram(Unew).ravel(), col_absmax(Unew)]
        if n == len(st.rows) - 1:
            parts.append(col_inner(acc, Unew))
        S["new"] = (Unew, first)
        return np.concatenate(parts), {q: Unew[pos].ravel()
                                       for q, pos in st.exp_send[n].items()}


def _combine(a: np.ndarray, b: np.ndarray, R: int) -> np.ndarray:
    """Sum segments ``a + b`` (a: the lower part id's partial), column maxima by max."""
    out = a + b
    out[R * R:R * R + R] = np.maximum(a[R * R:R * R + R], b[R * R:R * R + R])
    return out


def _finish(ctx, vec, n: int):
    """lambda, normalised own and received rows (Algorithm 4 line 6) and G_n from the reduced
    vector; the fit after the last mode."""
    st: PartStatic = ctx.static
    R, N, S = st.rank, len(st.rows), ctx.state
    with _clock(ctx):
        Unew, first = S.pop("new")
        Gp = vec[:R * R].reshape(R, R)
        lam, div = column_scale(np.diag(Gp).copy(), vec[R * R:R * R + R], first)
        U = S["U"][n]
        U[st.own[n]] = Unew / div
        for q, pos in st.exp_recv[n].items():
            scatter_rows(U, pos, ctx.inbox[q].reshape(pos.size, R) / div)
        S["G"][n] = Gp / np.outer(div, div)
        S["lam"] = lam
        if n == N - 1:
            fit = fit_value(st.normx2, lam, S["G"], float(np.sum(vec[R * R + R:])))
    if n == N - 1:
        _fitted(ctx, fit)


def _iteration(ctx, first: bool):
    """A one-part run's iteration: the serial code's on the part's state."""
    st: PartStatic = ctx.static
    S = ctx.state
    with _clock(ctx):
        S["lam"], fit = iteration(S["slices"], S["U"], S["G"], first, st.normx2, st.reg,
                                  st.nonnegative)
    _fitted(ctx, fit)


def _fitted(ctx, fit: float) -> None:
    """Report the iteration's fit (equal on every part) and keep the last two for the stop rule."""
    S = ctx.state
    S["fits"] = S.get("fits", [])[-1:] + [fit]
    ctx.report(fit=fit, compute_s=S.pop("busy"), cpu_s=S.pop("cpu"))


def _stop(ctx, tol: float) -> bool:
    """The Tensor Toolbox rule on the part's own fits: the workers end the run themselves."""
    return converged(ctx.state.get("fits", []), tol)


def program(setup, first_unit: int = 0, stop: bool = False) -> Program:
    """The run's steps from iteration ``first_unit`` to ``options.iters``; ``stop``: the parts
    end it themselves once the fit changes by less than ``tol``.

    Examples
    --------
    >>> from daskhpc.comm import run_local
    >>> from daskhpc.cpals import as_tensor, prepare
    >>> X = as_tensor(([[0, 1, 2, 0, 1], [1, 2, 0, 0, 1], [2, 0, 1, 0, 1]],
    ...                [1.0, 2.0, 3.0, 4.0, 5.0], (3, 3, 3)))
    >>> s = prepare(X, 2, grain="fine", partition="random", rank=2, iters=3, tol=0)
    >>> prog = program(s)
    >>> finals, reports = run_local(prog, statics(s))
    >>> len(reports), prog.nsteps              # 3 iterations x 3 modes x 2 steps, + 1
    (3, 19)
    """
    K, N, R = setup.K, setup.N, setup.R
    fine = setup.dist.grain == "fine" and K > 1
    rule = partial(_stop, tol=setup.options.tol) if stop and setup.options.tol > 0 else None
    prog = Program(K, "cpals", init=_init, final=_final, save=_save, first_unit=first_unit,
                   stop=rule)
    if K == 1:     # one part: the serial iteration, one step each (nothing to exchange)
        for it in range(first_unit, setup.options.iters):
            prog.step(_iteration, it == 0, report=True, label="iteration")
        return prog
    for it in range(first_unit, setup.options.iters):
        for n in range(N):
            mp = setup.plans[n]
            if fine:     # after the previous mode's last round (its report: no saved state)
                prog.fuse(_mttkrp, n, sends=mp["fold"], label=f"mttkrp-{n}",
                          after_report=True)
            prog.allreduce(partial(_solve, n=n, first=it == 0, fold=fine),
                           partial(_finish, n=n), words=allreduce_words(R, n, N),
                           op=partial(_combine, R=R), sends=mp["expand"],
                           fuse=not fine and K > 1, after_report=True,
                           report=n == N - 1, label=f"allreduce-{n}")
    return prog


def row(setup, unit: int, reports: dict) -> dict:
    """The history row of iteration ``unit``: the fit and the parts' compute seconds."""
    out = {"iteration": int(unit), "fit": float(reports[min(reports)]["fit"])}
    busy = [r["compute_s"] for r in reports.values() if "compute_s" in r]
    if busy:
        cpu = [r["cpu_s"] for r in reports.values()]
        out.update(compute_max_s=max(busy), compute_sum_s=sum(busy), cpu_max_s=max(cpu))
    return out


def stop(setup, history: list) -> bool:
    """The Tensor Toolbox stop rule on the history so far."""
    return converged([h["fit"] for h in history], setup.options.tol)


def assemble(setup, finals) -> tuple[np.ndarray, list[np.ndarray]]:
    """``(lambda, factors)`` from the parts' finals (owned rows and lambda)."""
    X, R = setup.tensor, setup.R
    factors = [np.zeros((n, R)) for n in X.shape]
    lam = None
    for ids, rows, part_lam in finals:
        for m in range(X.order):
            factors[m][ids[m]] = rows[m]
        lam = part_lam if lam is None else lam
    return np.array(lam), factors


def fingerprint(setup) -> dict:
    """What a checkpoint must match: digests of the tensor, options and partition."""
    X, d, o = setup.tensor, setup.dist, setup.options
    token = X.source.get("dask_token")     # a Dask collection: its values stay on the workers
    # as int64 indices and float64 values, whatever the storage: a tensor stored narrow
    # has the digest it had stored wide
    h = hashlib.sha1()
    hash_wide(h, [X.coords], np.int64)
    if token is None:
        hash_wide(h, [X.vals], np.float64)
    else:
        h.update(token.encode())
    tensor = h.hexdigest()
    owners = _sha1([*d.owners, *([] if d.nnz_parts is None else [d.nnz_parts])], np.int64)
    return {"workflow": "cpals", "shape": list(X.shape), "nnz": X.nnz,
            "tensor_sha1": tensor, "parts": setup.K, "grain": d.grain,
            "rank": setup.R, "seed": int(o.seed), "partition_sha1": owners,
            "reg": float(o.reg), "nonnegative": bool(o.nonnegative), "init": _init_id(setup)}


def _init_id(setup) -> str:
    """``random``/``svd``, or for given factors their digest."""
    o = setup.options
    return o.init_name if o.init_name != "given" else \
        "given:" + _sha1(setup.start_factors(), np.float64)


def _sha1(arrays, dtype) -> str:
    """SHA-1 of the arrays' bytes as ``dtype``."""
    h = hashlib.sha1()
    hash_wide(h, arrays, dtype)
    return h.hexdigest()
