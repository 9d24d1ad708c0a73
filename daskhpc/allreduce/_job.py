"""The allreduce on a Dask cluster: the call's Program run by the workflow frame, measured.

``repeat`` calls are pipelined units; vectors on the workers are part data where they
are, and the totals may stay there (``Job.keep_finals``).
"""

from __future__ import annotations

import functools
import time
import uuid

import numpy as np

from daskhpc.errors import InputError

from ._measure import measure
from ._program import assemble, program, row, statics
from ._setup import check_vector, finish, one_vector, options_of, stream_of
from ._stream import Format, Stream, from_payload, to_payload


def warm_up():
    """Load the numba kernels on a worker (before anything is timed)."""
    from ._kernels import merge_sum, merge_union

    i = np.array([1], np.uint32)
    for dt in (np.float64, np.int64, np.float32):
        merge_sum(i, np.ones(1, dt), i, np.ones(1, dt))
    merge_union(i, i)


def input_task(v, N, rank: int) -> dict:
    """A user's vector validated and made the rank's canonical input stream on its worker."""
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


def short_stages(s) -> bool:
    """Whether messages are at most 8 MB: short enough for the event loop (docs/allreduce.md)."""
    nbytes = s.plan.message_bytes()
    return int(nbytes.max()) <= 1 << 23 if nbytes.size else True


def are_futures(vectors) -> bool:
    from distributed import Future

    vs = list(vectors) if not isinstance(vectors, np.ndarray) else []
    return bool(vs) and all(isinstance(v, Future) for v in vs)


def from_futures(client, futures, N, options):
    """Inputs made canonical where they live; their index sets planned on the client."""
    from distributed import wait

    from daskhpc.runtime import submit_pinned

    t0 = time.perf_counter()
    opts = options_of(options)
    futures = list(futures)
    wait(futures)                                  # the vectors exist (not gathered)
    for f in futures:
        if f.status != "finished":
            f.result()                             # raises the task's error
    who = client.who_has(futures)
    owner = [sorted(who[f.key])[0] for f in futures]
    tok = uuid.uuid4().hex[:10]
    tasks, where = {}, {}
    for r, f in enumerate(futures):
        k_in, k_d = (f"allreduce-input-{tok}", r), (f"allreduce-describe-{tok}", r)
        tasks[k_in] = (input_task, f, N, r)
        tasks[k_d] = (describe_task, k_in)
        where[k_in] = where[k_d] = owner[r]
    keys = [k for k in tasks if k[0].startswith("allreduce-input")]
    got = submit_pinned(client, tasks, where, keys + [k for k in tasks if k not in keys])
    inputs = dict(enumerate(got[:len(futures)]))
    desc = client.gather(got[len(futures):])
    Ns = {d["N"] for d in desc}
    if len(Ns) > 1:
        raise InputError(f"the vectors have different lengths: {sorted(Ns)}")
    dts = {d["dtype"] for d in desc}
    if len(dts) > 1:
        raise InputError(f"the vectors have different value types {sorted(dts)}: cast them "
                         "to one first")
    Nv = Ns.pop()
    fmt = Format(np.dtype(dts.pop()))
    streams = [Stream(0, Nv, None if d["idx"] is None else d["idx"], None) for d in desc]
    s = finish(opts, streams, Nv, fmt, {"futures": len(futures)}, t0)
    return s, inputs, owner


def with_values(client, s, inputs):
    """A copy of the setup whose streams carry the inputs' values (for the serial check)."""
    import copy

    vs = copy.copy(s)
    vs.streams = [from_payload(d["payload"], 0, s.N)
                  for d in client.gather([inputs[r] for r in range(s.nparts)])]
    return vs


def run_program(client, s, owner, run, inputs=None, keep=False):
    """The calls as a Program job on the frame.

    ``inputs``: per rank a future of its canonical input (``from_futures``), else the
    vectors are scattered; ``keep``: every rank's total stays on its worker."""
    from distributed import Future

    from daskhpc.runtime import Job, Placement, run_job, run_on_parts, worker_addresses

    workers = worker_addresses(client)
    S = s.algo.nstages
    job = Job("allreduce", s.nparts, s.options.repeat, row=functools.partial(row, s),
              fingerprint={}, program=functools.partial(program, s),
              statics=statics(s) if inputs is None else None,
              assemble=functools.partial(assemble, s),
              warm_up=warm_up, unit_name="calls", in_loop=short_stages(s),
              placement=lambda ws: Placement(s.nparts, ws, owner), exchange=run.exchange,
              keep_finals=keep)
    if inputs is None:
        out = run_job(client, job, callback=run.callback, progress_bar=run.progress)
    else:       # the part store takes the inputs as built (its own references)
        out = run_on_parts(client, job, lambda _: {r: Future(inputs[r].key, client)
                                                   for r in range(s.nparts)},
                           callback=run.callback, progress_bar=run.progress)
    pname = f"allreduce-{s.algo.name}-"

    def stage_of(key):
        if isinstance(key, (tuple, list)) and len(key) == 4 and isinstance(key[2], int) \
                and str(key[0]).startswith(pname):
            return divmod(int(key[2]), S + 1)
        return None

    m = measure(s, out.ledger.entries if out.ledger else [], owner, workers, stage_of,
                 len(out.history))
    m["summary"] = {**out.measured, "calls": len(out.history),
                    "workers": m["summary"]["workers"]}
    return out.history, out.value, m, dict(out.timing)   # value: every rank's total
