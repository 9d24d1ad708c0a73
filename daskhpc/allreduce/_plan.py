"""The Plan of an allreduce call, computed from the input index sets before it runs.

:func:`simulate` runs the stage functions on index-only streams (the same dense
switches), so its messages are exactly the call's; ``words`` are bytes per item, the
4-byte headers apart (``header_bytes``). No dask here.
"""

from __future__ import annotations

import numpy as np

from daskhpc.comm import Plan

from ._stream import HEADER_BYTES, Stream, canon


def _as_index_stream(s, N, fmt) -> Stream:
    if isinstance(s, Stream):
        return Stream(s.lo, s.hi, s.idx, None)
    if s is None:                                  # a dense input
        return Stream(0, N, None, None)
    return canon(Stream(0, N, np.asarray(s, np.uint32), None), fmt)


def simulate(algo, streams, *, values: bool = False, results: bool = True):
    """Run ``algo`` in one process on ``streams`` (one per rank).

    Parameters
    ----------
    algo : Algorithm
    streams : list
        Per rank a :class:`Stream`, or an index array (its index set), or None (dense).
    values : bool
        Keep values (the streams must have them): then the results are the real sums.
    results : bool
        Compute what the ranks end with; False: the messages alone (results None).

    Returns
    -------
    results : list of Stream or None
        What every rank ends with.
    messages : list of tuple
        ``(stage, src, dst, items, dense)`` for every send, in stage then (src, dst) order.
    """
    N, fmt = algo.N, algo.fmt
    if not values:
        streams = [_as_index_stream(s, N, fmt) for s in streams]
    states = [algo.begin(r, streams[r]) for r in range(algo.nparts)]
    msgs = []
    for s in range(algo.nstages):
        outs = [algo.send(s, r, states[r]) for r in range(algo.nparts)]
        want = algo.sends(s)
        got = sorted((src, dst) for src in range(algo.nparts) for dst in outs[src])
        if got != want:
            raise AssertionError(f"{algo} stage {s}: sends {got}, schedule {want}")
        inbox = [dict() for _ in range(algo.nparts)]
        for src, dst in want:
            m = outs[src][dst]
            if (m.lo, m.hi) != algo.msg_range(s, src, dst):
                raise AssertionError(f"{algo} stage {s}: {src}->{dst} covers "
                                     f"{(m.lo, m.hi)}, not {algo.msg_range(s, src, dst)}")
            msgs.append((s, src, dst, m.nitems, m.dense))
            inbox[dst][src] = m
        if not results and s == algo.nstages - 1:
            return None, msgs
        for r in range(algo.nparts):
            algo.recv(s, r, states[r], inbox[r])
    if not results:
        return None, msgs
    return [algo.result(r, states[r]) for r in range(algo.nparts)], msgs


def _plan_of(algo, msgs, name, meta) -> Plan:
    fmt = algo.fmt
    a = np.array([m[:4] for m in msgs], np.int64).reshape(-1, 4)
    dense = np.array([m[4] for m in msgs], bool)
    words = np.where(dense, fmt.isize, fmt.c + fmt.isize).astype(np.int64)
    meta = {**_meta(algo), "dense": dense, **meta}
    return Plan(algo.nparts, a[:, 0], a[:, 1], a[:, 2], volume=a[:, 3],
                nphases=algo.nstages, unit="items", words_per_unit=fmt.c + fmt.isize,
                word_bytes=1, words=words, name=name, meta=meta)


def _meta(algo) -> dict:
    """What every plan of ``algo`` says about it, cached on the algorithm."""
    got = getattr(algo, "_plan_meta", None)
    if got is None:
        got = algo._plan_meta = {
            "algorithm": algo.name, "N": algo.N, "dtype": algo.fmt.dtype.name,
            "stages": [algo.kind(s) for s in range(algo.nstages)],
            "header_bytes": HEADER_BYTES}
    return {**got, "stages": list(got["stages"])}


def call_plan(algo, streams, *, name: str | None = None) -> Plan:
    """The exact Plan of ``algo`` on these inputs (streams or index sets; None = dense).

    Examples
    --------
    >>> import numpy as np
    >>> from daskhpc.allreduce import Format, make
    >>> sets = [np.array([1, 2], np.uint32), np.array([2, 3], np.uint32)]
    >>> call_plan(make("ssar_rec_dbl", 2, 100, Format(np.float64)), sets).volume.tolist()
    [2, 2]
    """
    _, msgs = simulate(algo, streams, results=False)
    return _plan_of(algo, msgs, name or algo.name, {"bound": False})


def dense_bound_plan(algo, *, name: str | None = None) -> Plan:
    """The plan on dense inputs: an upper bound of every message of any call."""
    _, msgs = simulate(algo, [None] * algo.nparts)
    return _plan_of(algo, msgs, name or algo.name, {"bound": True})


def stage_plan(plan: Plan, s: int) -> Plan:
    """The messages of stage ``s`` alone (phase 0), for a Program step."""
    if s == 0 and plan.nphases == 1:
        return plan
    sel = plan.phase == s
    return Plan(plan.nparts, np.zeros(int(sel.sum()), np.int64), plan.src[sel], plan.dst[sel],
                volume=plan.volume[sel], nphases=1, unit=plan.unit,
                words_per_unit=plan.words_per_unit, word_bytes=plan.word_bytes,
                words=plan.message_words()[sel], name=plan.name,
                meta={"stage": s, "bound": plan.meta.get("bound", False)})


def plan_sections(plan: Plan) -> dict:
    """Report sections of a call's plan: the ``plan`` totals and the per-stage table."""
    rep = plan.report()
    hdr = plan.meta.get("header_bytes", HEADER_BYTES)
    rep["header_bytes"] = hdr * plan.num_messages
    rep["stream_bytes"] = rep["planned_bytes"] + rep["header_bytes"]
    sent = plan._per_phase_part(plan.message_bytes())
    dense = np.asarray(plan.meta.get("dense", np.zeros(plan.num_messages, bool)))
    stages = []
    for s, kind in enumerate(plan.meta.get("stages", [])):
        sel = plan.phase == s
        stages.append({"stage": s, "kind": kind, "messages": int(sel.sum()),
                       "items": int(plan.volume[sel].sum()),
                       "bytes": int(plan.message_bytes()[sel].sum()),
                       "max_rank_bytes": int(sent[s].max()) if sent.size else 0,
                       "dense_messages": int(dense[sel].sum())})
    per_rank = sent.sum(axis=0) if sent.size else np.zeros(plan.nparts, np.int64)
    return {"plan": rep, "stages": stages,
            "per_rank": {"bytes": per_rank.tolist(),
                         "items": plan.send_volume().sum(axis=0).tolist()}}
