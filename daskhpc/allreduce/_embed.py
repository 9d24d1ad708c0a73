"""Append an allreduce to any :class:`daskhpc.comm.Program` (GCN, CP-ALS, linear, ...).

:func:`append_allreduce` is the sparse counterpart of
:meth:`daskhpc.comm.Program.allreduce`: ``get(ctx)`` gives each part's vector in the
first appended step, ``put(ctx, total)`` hands every part the same total (a
:class:`~daskhpc.allreduce.Stream` over [0, N); ``total.to_dense()`` for an array) in the
last one. An algorithm of S stages takes S + 1 steps: step 0 takes the contribution and
sends stage 0, step t receives stage t - 1 and sends stage t, step S receives the last
stage and calls ``put``. The last step sends nothing, so with ``fuse=True`` the next
call's step 0 runs inside it: a loop of calls costs S steps per call (SGD: the update in
``put`` and the next gradient in ``get`` share a step).

Each step carries the Plan of its stage: the exact one when the caller gives the call's
plan (computed from the index sets, :func:`~daskhpc.allreduce.call_plan`), else the
dense-bound plan (no message is larger). With ``count=True`` every part adds what it
sends to ``ctx.state["allreduce_sent"]`` (bytes, messages, items), for reports.

The step functions expect their inbox to hold only the allreduce's messages.

No dask here.

Examples
--------
>>> import numpy as np
>>> from daskhpc.comm import Program, run_local
>>> def get(ctx):
...     return ctx.static
>>> def put(ctx, total):
...     ctx.state["sum"] = total.to_dense()
>>> prog = Program(3, "demo", final=lambda ctx: ctx.state["sum"])
>>> _ = append_allreduce(prog, get, put, N=4, algorithm="ssar_rec_dbl")
>>> finals, _ = run_local(prog, [np.array([1.0, 0, 0, 0]), np.array([0, 2.0, 0, 0]),
...                              np.array([0, 0, 0, 3.0])])
>>> finals[2].tolist()
[1.0, 2.0, 0.0, 3.0]
"""

from __future__ import annotations

import numpy as np

from ._algorithms import Algorithm
from ._plan import dense_bound_plan, stage_plan
from ._registry import make
from ._stream import Format, Stream, canon, from_payload, to_payload

__all__ = ["append_allreduce", "as_stream"]


def as_stream(x, N: int, fmt: Format) -> Stream:
    """A part's contribution as a canonical stream over [0, N).

    ``x``: a :class:`Stream`, a dense array of length N (its nonzeros are the index set),
    or an ``(idx, val)`` pair with sorted unique indices (explicit zeros count).
    """
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
    get : callable
        ``get(ctx) -> contribution`` (dense array, ``(idx, val)`` or Stream), module-level
        or a functools.partial of one (it is pickled to workers).
    put : callable
        ``put(ctx, total)`` with the total as a Stream over [0, N), identical on all parts.
    N : int
        Vector length (taken from ``algorithm`` when it is an Algorithm).
    algorithm : str or Algorithm
        One of :data:`~daskhpc.allreduce.ALGORITHMS` (``auto`` needs the index sets:
        decide with :func:`~daskhpc.allreduce.choose` first).
    dtype : dtype
        Value type of the contributions (cast to it).
    group : int, optional
        Ranks per sparse group of ``dsar_early_switch``.
    plan : daskhpc.comm.Plan, optional
        The call's exact plan (:func:`~daskhpc.allreduce.call_plan`); default the dense
        bound of the algorithm.
    fuse : bool
        Run step 0 inside the program's last step (it must send nothing and not report).
    report : bool
        Make the last step a reported one (ends a unit).
    count : bool
        Add what each part sends to ``ctx.state["allreduce_sent"]``.

    Returns
    -------
    int
        Index of the step in which ``put`` runs.

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
