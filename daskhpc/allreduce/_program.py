"""The allreduce call as a :class:`daskhpc.comm.Program` (the kit runs it; so does
``run_local``)."""

from __future__ import annotations

import numpy as np

from daskhpc.comm import Program

from ._embed import append_allreduce
from ._stream import Stream, from_payload, to_payload


def statics(setup) -> list[dict]:
    """Per part: ``{"N": N, "payload": payload}`` (as ``_job.input_task`` makes on a worker)."""
    return [{"N": setup.N, "payload": to_payload(s)} for s in setup.streams]


def _input(ctx) -> Stream:
    return from_payload(ctx.static["payload"], 0, ctx.static["N"])


def _output(ctx, total: Stream) -> None:
    ctx.state["result"] = to_payload(total)
    sent = ctx.state.pop("allreduce_sent", {"bytes": 0, "messages": 0, "items": 0})
    ctx.report(sent_bytes=sent["bytes"], messages=sent["messages"], items=sent["items"],
               result_items=total.nitems, result_dense=bool(total.dense))


def _final(ctx):
    return ctx.state.get("result")


def program(setup, first_unit: int = 0) -> Program:
    """``repeat - first_unit`` calls of the setup's algorithm, one unit each."""
    prog = Program(setup.nparts, f"allreduce-{setup.algo.name}", final=_final,
                   first_unit=first_unit)
    for u in range(first_unit, setup.options.repeat):
        append_allreduce(prog, _input, _output, algorithm=setup.algo, plan=setup.plan,
                         report=True, count=True, label=f"call{u}")
    return prog


def row(setup, unit: int, reports: dict) -> dict:
    """History row of call ``unit``: what the parts sent, and the result's form."""
    parts = [reports[p] for p in sorted(reports)]
    plan = setup.plan
    stage_bytes = np.bincount(plan.phase, weights=plan.message_bytes(),
                              minlength=setup.algo.nstages)
    return {"call": unit, "algorithm": setup.algo.name,
            "stage_bytes": [int(b) for b in stage_bytes],
            "sent_bytes": int(sum(r["sent_bytes"] for r in parts)),
            "messages": int(sum(r["messages"] for r in parts)),
            "items": int(sum(r["items"] for r in parts)),
            "max_rank_bytes": int(max(r["sent_bytes"] for r in parts)),
            "result_items": int(parts[0]["result_items"]),
            "result_dense": bool(parts[0]["result_dense"])}


def assemble(setup, finals) -> list[Stream]:
    """Every part's total as a Stream over [0, N)."""
    return [from_payload(f, 0, setup.N) for f in finals]
