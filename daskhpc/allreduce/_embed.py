"""Append an allreduce to any :class:`daskhpc.comm.Program` (docs/allreduce.md; no dask).

An algorithm of S stages takes S + 1 steps: step t receives stage t - 1 and sends stage
t; the last sends nothing, so ``fuse=True`` runs the next call's step 0 inside it. The
step functions expect their inbox to hold only the allreduce's messages.
"""

from __future__ import annotations

import numpy as np

from ._algorithms import Algorithm
from ._plan import dense_bound_plan, stage_plan
from ._registry import make
from ._stream import Format, Stream, canon, from_payload, to_payload


def as_stream(x, N: int, fmt: Format) -> Stream:
    """A part's contribution as a canonical stream over [0, N).

    ``x``: a Stream, a dense array (its nonzeros are the index set), or ``(idx, val)``
    with sorted unique indices (explicit zeros count)."""
    if isinstance(x, Stream):
        s = x
    elif isinstance(x, tuple):
        idx, val = x
        s = Stream(0, N, np.asarray(idx, np.uint32), np.asarray(val, fmt.dtype))
    else:
        v = np.asarray(x, fmt.dtype)
        if v.shape != (N,):
            raise ValueError(f"an allreduce contribution of shape {v.shape}, expected ({N},)")
        nz = np.flatnonzero(v)
        s = Stream(0, N, nz.astype(np.uint32), v[nz])
    return canon(s, fmt)


def _count(ctx, out: dict, fmt: Format) -> None:
    c = ctx.state.setdefault("allreduce_sent", {"bytes": 0, "messages": 0, "items": 0})
    for m in out.values():
        c["bytes"] += m.nbytes(fmt)
        c["messages"] += 1
        c["items"] += m.nitems


def _ar_step(ctx, algo, key, t, get, put, count):
    """Step t of one call (see the module docstring)."""
    st = ctx.state
    if t == 0:
        st[key] = algo.begin(ctx.part, as_stream(get(ctx), algo.N, algo.fmt))
    a = st[key]
    if t > 0:
        s = t - 1
        msgs = {src: from_payload(p, *algo.msg_range(s, src, ctx.part))
                for src, p in ctx.inbox.items()}
        algo.recv(s, ctx.part, a, msgs)
    if t == algo.nstages:
        del st[key]
        put(ctx, algo.result(ctx.part, a))
        return None
    out = algo.send(t, ctx.part, a)
    if count:
        _count(ctx, out, algo.fmt)
    return {dst: to_payload(m) for dst, m in out.items()}


def append_allreduce(program, get, put, *, N: int | None = None, algorithm="ssar_rec_dbl",
                     dtype="float64", group: int | None = None, plan=None, fuse: bool = False,
                     label: str = "allreduce", report: bool = False,
                     count: bool = False) -> int:
    """Append the steps of one allreduce call to ``program``; returns its last step.

    Parameters
    ----------
    program : daskhpc.comm.Program
    get, put : callable
        ``get(ctx) -> contribution`` (dense array, ``(idx, val)`` or Stream), picklable;
        ``put(ctx, total)``, the total a Stream over [0, N), identical on all parts.
    N : int
        Vector length (taken from ``algorithm`` when it is an Algorithm).
    algorithm : str or Algorithm
        One of :data:`~daskhpc.allreduce.ALGORITHMS` (not ``auto``: decide with
        :func:`~daskhpc.allreduce.choose` first).
    dtype : dtype
        Value type of the contributions (cast to it).
    group : int, optional
        Ranks per sparse group of ``dsar_early_switch``.
    plan : daskhpc.comm.Plan, optional
        The call's exact plan (:func:`~daskhpc.allreduce.call_plan`); default the dense
        bound of the algorithm.
    fuse, report, count : bool
        Run step 0 inside the program's last step (it must send nothing and not report);
        make the last step a reported one; add what each part sends to
        ``ctx.state["allreduce_sent"]``.

    Examples
    --------
    >>> import numpy as np
    >>> from daskhpc.comm import Program, run_local
    >>> def get(ctx):
    ...     return ctx.static
    >>> def put(ctx, total):
    ...     ctx.state["sum"] = total.to_dense()
    >>> prog = Program(2, "demo", final=lambda ctx: ctx.state["sum"])
    >>> _ = append_allreduce(prog, get, put, N=2, algorithm="ssar_rec_dbl")
    >>> run_local(prog, [np.array([1.0, 0]), np.array([0, 2.0])])[0][1].tolist()
    [1.0, 2.0]

    References
    ----------
    C. Renggli, "Efficient Sparse AllReduce For Scalable Machine Learning", Master's
    thesis, ETH Zurich, 2017, chapters 3-4.
    """
    if isinstance(algorithm, Algorithm):
        algo = algorithm
    else:
        if algorithm == "auto":
            raise ValueError("append_allreduce needs a fixed algorithm; decide 'auto' per "
                             "call with daskhpc.allreduce.choose(...)")
        if N is None:
            raise ValueError("append_allreduce needs N (the vector length)")
        algo = make(algorithm, program.nparts, int(N), Format(dtype), group)
    if algo.nparts != program.nparts:
        raise ValueError(f"an allreduce over {algo.nparts} parts in a program over "
                         f"{program.nparts}")
    plan = dense_bound_plan(algo) if plan is None else plan
    key = ("allreduce", label, len(program.steps))
    S = algo.nstages
    for t in range(S + 1):
        sends = stage_plan(plan, t) if t < S else None
        args = (algo, key, t, get if t == 0 else None, put if t == S else None, count)
        fused = t == 0 and fuse and bool(program.steps)
        if fused:
            prev = program.steps[-1]
            if (prev.sends is not None and prev.sends.num_messages) or prev.report:
                raise ValueError("fuse=True needs a previous step that sends nothing and "
                                 "does not report")
        add = program.fuse if fused else program.step    # fuse: runs inside the last step
        last = add(_ar_step, *args, sends=sends, report=report and t == S,
                   label=f"{label}-{t}")
    return last
