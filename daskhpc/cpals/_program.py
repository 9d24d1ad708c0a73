"""CP-ALS as a :class:`daskhpc.comm.Program`: Algorithms 3 (coarse) and 4 (fine) per mode.

Each part holds its nonzeros (local coordinates), the factor rows it owns and those it
needs (``rows[m]``: global ids of its local rows of mode m, ascending). Per mode n:

1. *mttkrp*: partial MTTKRP over the part's nonzeros of mode n (Algorithm 4 line 1;
   Algorithm 3 line 1 over the owned slices);
2. fine grain only, *fold*: partial rows to their owners (lines 2-3); an owner sums the
   partials of a row in part-id order, its own among them;
3. *solve*: ``U_new = M V`` for the owned rows, ``V = (*_{m != n} G_m + reg I)^+``
   (``_als.solve_rows``; a nonnegative run then sets negative entries to 0); the local
   Gram ``U_new^T U_new``, column maxima and (last mode) ``sum_i M(i, r) U_new(i, r)``
   start one all-reduce (recursive doubling, :class:`daskhpc.comm.AllreduceSchedule`;
   sums lower part id first, maxima exact); in the same step the *expand* sends the
   unnormalised new rows to every part of Lambda_i (Algorithm 3 line 3, Algorithm 4
   line 5), so the expand travels with the all-reduce instead of after it;
4. *finish*: with the reduced vector every part knows lambda (2-norms from the Gram's
   diagonal in the first iteration, ``max(|col max|, 1)`` after), normalises its new and
   received rows, and has ``G_n = G' / (d d^T)``; after the last mode every part
   computes the fit and reports it (the iteration's reported step).

Steps are fused where the data allow: the all-reduce's last round, the expand's receipt
and the next mode's MTTKRP share a step. With ``L`` all-reduce rounds (``log2 K`` for a
power of two) an iteration is ``N L`` steps coarse and ``N (L + 1)`` fine (``N`` for
K = 1). The partition-aware serial reference is ``run_local(program(s), statics(s))``.

Examples
--------
>>> from daskhpc.comm import run_local
>>> from daskhpc.cpals._setup import prepare
>>> from daskhpc.cpals._tensor import as_tensor
>>> X = as_tensor(([[0, 1, 2, 0, 1], [1, 2, 0, 0, 1], [2, 0, 1, 0, 1]],
...                [1.0, 2.0, 3.0, 4.0, 5.0], (3, 3, 3)))
>>> s = prepare(X, 2, grain="fine", partition="random", rank=2, iters=3, tol=0)
>>> prog = program(s)
>>> finals, reports = run_local(prog, statics(s))
>>> len(reports), prog.nsteps              # 3 iterations x 3 modes x 2 steps, + 1
(3, 19)
>>> lam, factors = assemble(s, finals)
>>> [f.shape for f in factors]
[(3, 2), (3, 2), (3, 2)]
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from daskhpc.comm import AllreduceSchedule, Plan, Program

from ._als import column_scale, converged, fit_value, solve_rows
from ._kernels import mttkrp_into, slices
from ._plan import allreduce_words
from ._rows import col_absmax, col_inner, gram, init_rows, scatter_rows, sum_rows_into
from ._statics import PartStatic, statics

__all__ = ["StepSpec", "program", "row", "assemble", "stop", "statics", "fingerprint"]


@dataclass(frozen=True)
class StepSpec:
    """What one step does, in this order (None: not this step)."""

    recv_round: tuple | None = None     # (mode, round): combine the partner's vector
    recv_expand: int | None = None      # mode whose new rows arrive
    finish: int | None = None           # mode to normalise (and fit after the last)
    mttkrp: int | None = None
    send_fold: int | None = None
    recv_fold: int | None = None
    solve: int | None = None
    iteration: int | None = None        # of the solve (a fused step may end the one before)
    send_round: tuple | None = None     # (mode, round) of the all-reduce to send
    send_expand: int | None = None

    def label(self) -> str:
        parts = [f"{k}-{v if not isinstance(v, tuple) else '-'.join(map(str, v))}"
                 for k, v in self.__dict__.items()
                 if v is not None and k not in ("recv_expand", "iteration")]
        return "+".join(parts)


# -- the part's functions ---------------------------------------------------------------

def _init(ctx, start):
    st: PartStatic = ctx.static
    N, R = len(st.rows), st.rank
    shape = [r.size for r in st.rows]
    lay = []
    for n in range(N):
        sel = st.work[n]
        c, v = (st.coords, st.vals) if sel is None else (st.coords[:, sel], st.vals[sel])
        lay.append(slices(c, v, n, shape))
    ctx.state["slices"] = lay
    if start is None:
        ctx.state["U"] = [init_rows(st.seed, m, st.rows[m], R) if st.U0 is None
                          else st.U0[m].copy() for m in range(N)]
        ctx.state["G"] = [g.copy() for g in st.grams0]
        ctx.state["lam"] = np.ones(R)
    else:
        ctx.state["U"] = [np.array(start[f"U{m}"], dtype=np.float64) for m in range(N)]
        ctx.state["G"] = [np.array(g, dtype=np.float64) for g in start["G"]]
        ctx.state["lam"] = np.array(start["lam"], dtype=np.float64)


def _save(ctx) -> dict:
    out = {f"U{m}": u for m, u in enumerate(ctx.state["U"])}
    out["G"] = np.stack(ctx.state["G"])
    out["lam"] = ctx.state["lam"]
    return out


def _final(ctx):
    st: PartStatic = ctx.static
    U = ctx.state["U"]
    return (tuple(st.rows[m][st.own[m]] for m in range(len(U))),
            tuple(U[m][st.own[m]] for m in range(len(U))), ctx.state["lam"])


def _rows_of(payload: np.ndarray, nrows: int, R: int) -> np.ndarray:
    """The factor rows at the head of a message (a view, read-only to the receiver)."""
    return payload[:nrows * R].reshape(nrows, R)


def _combine(a: np.ndarray, b: np.ndarray, R: int) -> np.ndarray:
    """Sum segments ``a + b`` (a: the lower part id's partial), column maxima by max."""
    out = a + b
    out[R * R:R * R + R] = np.maximum(a[R * R:R * R + R], b[R * R:R * R + R])
    return out


def _run_step(ctx, spec: StepSpec):
    """One step of a part (below), timed: the part reports, with every iteration's fit,
    the wall and CPU seconds its steps took (``compute_s``, ``cpu_s``), so a run can say
    how much of an iteration was computing and how much was waiting."""
    t0, c0 = time.perf_counter(), time.thread_time()
    out = _step(ctx, spec)
    S = ctx.state
    S["busy"] = S.get("busy", 0.0) + (time.perf_counter() - t0)
    S["cpu"] = S.get("cpu", 0.0) + (time.thread_time() - c0)
    if "fit" in ctx.reported:
        ctx.report(compute_s=S.pop("busy"), cpu_s=S.pop("cpu"))
    return out


def _step(ctx, spec: StepSpec):
    st: PartStatic = ctx.static
    R, N, K = st.rank, len(st.rows), ctx.nparts
    S = ctx.state
    red = S.get("red")
    if spec.recv_round is not None:                       # all-reduce round i-1 arrives
        rnd = AllreduceSchedule(K).rounds[spec.recv_round[1]]
        src = rnd.receives().get(ctx.part)
        if src is not None:
            nrows = st.exp_recv[spec.recv_expand].get(src, ()) if spec.recv_expand is not None \
                else ()
            got = ctx.inbox[src][len(nrows) * R:]          # the vector after the rows
            red["vec"] = got.copy() if rnd.kind == "unfold" else (
                _combine(red["vec"], got, R) if ctx.part < src else _combine(got, red["vec"], R))
    if spec.recv_expand is not None:                      # Algorithm 4 line 6
        red["recv"] = {q: _rows_of(ctx.inbox[q], pos.size, R)
                       for q, pos in st.exp_recv[spec.recv_expand].items()}
    if spec.finish is not None:
        _finish(ctx, spec.finish)
    out: dict = {}
    if spec.mttkrp is not None:                           # Algorithm 4 line 1
        n = spec.mttkrp
        M = np.empty((st.rows[n].size, R))
        mttkrp_into(S["slices"][n], S["U"], M)
        S["M"] = M
        if spec.send_fold is not None:                    # line 2
            for q, pos in st.fold_send[n].items():
                out[q] = M[pos].ravel()
    if spec.solve is not None:
        n = spec.solve
        M = S.pop("M")
        if spec.recv_fold is not None:                    # line 3, part-id order
            acc = np.zeros((st.own[n].size, R))
            for q in sorted([*ctx.inbox, ctx.part]):
                if q == ctx.part:
                    acc += M[st.own[n]]
                else:
                    pos = st.fold_recv[n][q]
                    sum_rows_into(acc, pos, _rows_of(ctx.inbox[q], pos.size, R))
        else:
            acc = M[st.own[n]]
        Unew = solve_rows(acc, S["G"], n, st.reg, st.nonnegative)          # line 4
        parts = [gram(Unew).ravel(), col_absmax(Unew)]
        if n == N - 1:
            parts.append(col_inner(acc, Unew))
        S["red"] = red = {"mode": n, "vec": np.concatenate(parts), "Unew": Unew,
                          "first": spec.iteration == 0, "recv": {}}
        if K == 1:
            _finish(ctx, n)
    if spec.send_round is not None:
        n, i = spec.send_round
        q = AllreduceSchedule(K).rounds[i].sends.get(ctx.part)
        if q is not None:
            out[q] = red["vec"]
    if spec.send_expand is not None:                      # Algorithm 4 line 5
        for q, pos in st.exp_send[spec.send_expand].items():
            rows = red["Unew"][pos].ravel()
            out[q] = np.concatenate([rows, out[q]]) if q in out else rows
    return out or None


def _finish(ctx, n: int):
    """lambda, normalised rows and G_n from the reduced vector; the fit after the last mode."""
    st: PartStatic = ctx.static
    R, N = st.rank, len(st.rows)
    S = ctx.state
    red = S.pop("red")
    vec = red["vec"]
    Gp = vec[:R * R].reshape(R, R)
    lam, div = column_scale(np.diag(Gp).copy(), vec[R * R:R * R + R], red["first"])
    U = S["U"][n]
    U[st.own[n]] = red["Unew"] / div
    for q, rows in red["recv"].items():
        scatter_rows(U, st.exp_recv[n][q], rows / div)
    S["G"][n] = Gp / np.outer(div, div)
    S["lam"] = lam
    if n == N - 1:
        inner = float(np.sum(vec[R * R + R:]))
        ctx.report(fit=fit_value(st.normx2, lam, S["G"], inner))


# -- the program -----------------------------------------------------------------------

def _round_plan(K: int, i: int, words: int, name: str) -> Plan:
    whole = AllreduceSchedule(K).plan(words, name=name)
    sel = whole.phase == i
    return Plan(K, np.zeros(int(sel.sum()), np.int64), whole.src[sel], whole.dst[sel],
                volume=whole.volume[sel], unit="vectors", words_per_unit=int(words), name=name)


def program(setup, first_unit: int = 0) -> Program:
    """The run's steps from iteration ``first_unit`` to ``options.iters`` (see module doc)."""
    K, N, R = setup.K, setup.N, setup.R
    fine = setup.dist.grain == "fine"
    L = len(AllreduceSchedule(K).rounds)
    prog = Program(K, "cpals", init=_init, final=_final, save=_save, first_unit=first_unit)
    carry = None

    def emit(spec, sends=None, report=False):
        prog.step(_run_step, spec, sends=sends, report=report, label=spec.label())

    for it in range(first_unit, setup.options.iters):
        for n in range(N):
            words = allreduce_words(R, n, N)
            mp = setup.plans[n]
            # the previous mode's last round, expand and finish share this step
            head = {} if carry is None else \
                {k: v for k, v in carry.__dict__.items() if v is not None}
            report = carry is not None and carry.finish == N - 1
            carry = None
            if K == 1:
                emit(StepSpec(mttkrp=n, solve=n, iteration=it), report=n == N - 1)
                continue
            r0 = _round_plan(K, 0, words, f"allreduce-{n}")
            if fine:
                emit(StepSpec(**head, mttkrp=n, send_fold=n), mp["fold"], report)
                emit(StepSpec(recv_fold=n, solve=n, iteration=it, send_round=(n, 0),
                              send_expand=n), [mp["expand"], r0])
            else:
                emit(StepSpec(**head, mttkrp=n, solve=n, iteration=it, send_round=(n, 0),
                              send_expand=n),
                     [mp["expand"], r0], report)
            for i in range(1, L):
                emit(StepSpec(recv_round=(n, i - 1), recv_expand=n if i == 1 else None,
                              send_round=(n, i)), _round_plan(K, i, words, f"allreduce-{n}"))
            carry = StepSpec(recv_round=(n, L - 1), recv_expand=n if L == 1 else None,
                             finish=n)
    if carry is not None:
        emit(carry, report=True)
    return prog


def row(setup, unit: int, reports: dict) -> dict:
    """The history row of iteration ``unit`` from the parts' reports: the fit (equal on
    every part) and, where the parts timed their steps, the busiest part's compute
    seconds (wall and CPU) and the sum over parts."""
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
    """What a checkpoint must match to be resumed: the tensor, the options that change
    the arithmetic, and the partition (digests, not the arrays)."""
    import hashlib

    X, d, o = setup.tensor, setup.dist, setup.options
    h = hashlib.sha1()
    token = X.source.get("dask_token")
    for a in (X.coords, X.vals) if token is None else (X.coords,):
        h.update(np.ascontiguousarray(a).tobytes())
    if token is not None:              # a Dask collection: its values stay on the workers
        h.update(token.encode())
    p = hashlib.sha1()
    for a in [*d.owners, *([] if d.nnz_parts is None else [d.nnz_parts])]:
        p.update(np.ascontiguousarray(a, dtype=np.int64).tobytes())
    return {"workflow": "cpals", "shape": list(X.shape), "nnz": X.nnz,
            "tensor_sha1": h.hexdigest(), "parts": setup.K, "grain": d.grain,
            "rank": setup.R, "seed": int(o.seed), "partition_sha1": p.hexdigest(),
            "reg": float(o.reg), "nonnegative": bool(o.nonnegative), "init": _init_id(setup)}


def _init_id(setup) -> str:
    """``random``/``svd``, or for given factors their digest."""
    import hashlib

    o = setup.options
    if o.init_name != "given":
        return o.init_name
    h = hashlib.sha1()
    for F in setup.start_factors():
        h.update(np.ascontiguousarray(F, dtype=np.float64).tobytes())
    return "given:" + h.hexdigest()
