"""The call engine (``engine="call"``): one allreduce call as a small pinned Dask graph,
S + 1 rounds of tasks, nothing else.

The kit's Program engine (``daskhpc.runtime.run_job``) runs a call in S + 3 rounds (an
init round, the S + 1 steps, a final round) after scattering its code and per-part data,
and the frame around it (ledger, watch, report events, cleanup) costs ~0.1 s per run:
right for a workflow that embeds thousands of calls (:func:`append_allreduce`), too much
for one call on vectors that are already on the workers. This engine runs the very same
step function (``_embed._ar_step``, on a :class:`~daskhpc.comm.Context` per rank) in
tasks keyed ``("allreduce-<token>", rank, stage, receiver)``:

* task ``(r, t, d)`` depends on the rank's own task of stage ``t - 1`` (whichever task of
  that stage ran first ran the stage for the rank) and on the tasks ``(s, t - 1, r)`` of
  the ranks that sent to r, so every message is one Dask key moved once from its sender
  to its receiver; stage 0 depends on the rank's input (a future on its worker);
* the first task of a stage to run receives, merges and sends (the algorithm's per-rank
  functions, under a lock), keeps the rank's state in a per-process registry and returns
  its receiver's message; the others return theirs;
* the rank's task of stage S puts the total: its value is the rank's result (a stream
  payload); the rank's state leaves the registry when its last message is taken.

Every rank runs the same functions on the same streams in the same order as
``run_local`` of the call's Program, so the results are bit for bit the same. There is
no recovery here: a lost worker fails the call (use the Program engine for that).

.. note::
   Generic: any :class:`~daskhpc.comm.Program` of a few steps could run this way (a
   lighter engine for single calls); written for the allreduce only, to move to the kit.
"""

from __future__ import annotations

import threading

from daskhpc.comm import Context
from daskhpc.errors import InputError

from ._embed import _ar_step
from ._program import _input
from ._setup import check_vector, one_vector, stream_of
from ._stream import Format, to_payload

__all__ = ["input_task", "describe_task", "stage_task", "stage_task_in_loop", "call_graph",
           "forget", "short_stages", "PREFIX"]

PREFIX = "allreduce"
_REGISTRY: dict = {}            # (token, rank) -> Context, on each worker
_LOCK = threading.Lock()
_CALL = ("allreduce", "call")  # the state key of the call inside a rank's Context


# -- on the workers --------------------------------------------------------------------

def input_task(v, N, rank: int) -> dict:
    """A user's vector (dense array, ``(idx, val)`` or scipy sparse), validated and made
    the rank's canonical input stream on its own worker."""
    idx, val, n = one_vector(v, N, rank)
    N = int(n if N is None else N)
    if val.dtype.kind not in "iuf":
        raise InputError(f"vector {rank}: values must be integers or floats, got {val.dtype}")
    check_vector(idx, val, N, rank, val.dtype)
    fmt = Format(val.dtype)
    return {"N": N, "dtype": fmt.dtype.str, "payload": to_payload(stream_of(idx, val, N, fmt))}


def describe_task(inp: dict) -> dict:
    """What the client needs to plan the call: N, dtype and the index set (None: dense)."""
    p = inp["payload"]
    return {"N": inp["N"], "dtype": inp["dtype"], "idx": None if len(p) == 1 else p[0]}


def _keep(ctx, total):
    ctx.state["result"] = total


def stage_task(algo, token: str, rank: int, t: int, dst: int, srcs: tuple, first, *msgs):
    """Stage ``t`` of ``rank`` (run once per rank and stage); returns the message to
    ``dst``, or at the last stage the rank's total as a stream payload."""
    key = (token, rank)
    S = algo.nstages
    with _LOCK:
        ctx = _REGISTRY.get(key)
        if ctx is None or ctx.step < t:
            if ctx is None:
                static = {"N": algo.N, "payload": first["payload"]}
                ctx = _REGISTRY[key] = Context(rank, algo.nparts, static, {})
            ctx.step = t
            ctx.inbox = dict(zip(srcs, msgs))              # ascending senders
            out = _ar_step(ctx, algo, _CALL, t, _input if t == 0 else None,
                           _keep if t == S else None, False)
            ctx.inbox = {}
            # a later stage may run before this stage's other tasks took their messages
            # (it waits for the first one only): keep every stage's outbox until taken
            ctx.state.setdefault("out", {}).update({(t, d): m for d, m in (out or {}).items()})
        if t == S:
            result = to_payload(ctx.state.pop("result"))
            ctx.state["done"] = True
        else:
            result = None if dst < 0 else ctx.state["out"].pop((t, dst))
        if ctx.state.get("done") and not ctx.state.get("out"):
            del _REGISTRY[key]                             # the rank's part of the call ends
        return result


async def stage_task_in_loop(algo, token, rank, t, dst, srcs, first, *msgs):
    """:func:`stage_task` in the worker's event loop (no hand-off to its thread and back:
    for short stages; a long merge would hold the loop, and the transfers it serves)."""
    return stage_task(algo, token, rank, t, dst, srcs, first, *msgs)


def forget(token: str) -> int:
    """Drop what a failed call left in this worker's registry (through ``client.run``)."""
    with _LOCK:
        gone = [k for k in _REGISTRY if k[0] == token]
        for k in gone:
            del _REGISTRY[k]
    return len(gone)


# -- the graph -------------------------------------------------------------------------

def call_graph(algo, token: str, inputs: dict, owner: list, *,
               in_loop: bool = False) -> tuple[dict, dict, list]:
    """The tasks of one call, their workers and the result keys (one per rank).

    ``inputs``: rank -> Future of the rank's input (``input_task``'s value or the same
    dict scattered); ``owner``: rank -> worker address; ``in_loop``: run the stages in
    the workers' event loops.
    """
    fn = stage_task_in_loop if in_loop else stage_task
    name = f"{PREFIX}-{token}"
    S, P = algo.nstages, algo.nparts
    tasks, where = {}, {}
    heads: dict = {}                              # (rank, t) -> the rank's first key at t
    for t in range(S + 1):
        sends = algo.sends(t) if t < S else []
        recv = algo.sends(t - 1) if t > 0 else []
        for r in range(P):
            dsts = [d for s, d in sends if s == r] or [-1]
            srcs = tuple(s for s, d in recv if d == r)
            first = inputs[r] if t == 0 else heads[(r, t - 1)]
            msgs = [(name, s, t - 1, r) for s in srcs]
            for d in dsts:
                k = (name, r, t, int(d))
                tasks[k] = (fn, algo, token, r, t, int(d), srcs, first, *msgs)
                where[k] = owner[r]
            heads[(r, t)] = (name, r, t, int(dsts[0]))
    results = [heads[(r, S)] for r in range(P)]
    return tasks, where, results


def short_stages(s) -> bool:
    """Stages short enough for the event loop: planned messages of at most 8 MB (a merge
    of a million float64 items takes a few ms; longer would hold transfers up). The
    messages, not N: a 0.1 % sparse vector of N = 1e7 has short stages (a call on 2
    workers took 1.4 ms in the loop against 1.8-2.7 ms in threads, docs/allreduce.md)."""
    nbytes = s.plan.message_bytes()
    return int(nbytes.max()) <= 1 << 23 if nbytes.size else True
