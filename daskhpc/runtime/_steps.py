"""What runs on the workers when a :class:`~daskhpc.comm.Program` runs on a cluster.

Each worker keeps, per run (``token``), a :class:`~daskhpc.comm.Context` per part it owns
(never a Dask value, so never copied, spilled or sent) and the messages not consumed yet.

.. warning::
   Tasks act on worker-side state: they must not be re-run one by one (Dask's retries
   stay off); a lost worker ends the attempt (``_frame``).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time

from daskhpc.comm import Context
from daskhpc._clock import CLOCKS, step_clock, step_times

_CONTEXTS: dict = {}    # (token, part) -> Context
_LOCAL: dict = {}       # (token, t, dst part) -> {src part: payload}
_REMOTE: dict = {}      # (token, t, worker label) -> {(src, dst): payload}
_DONE: dict = {}        # (token, worker label) -> last step run
_UNIT_START: dict = {}  # (token, worker label) -> time the worker began its current unit
_STOPPED: dict = {}     # (token, worker label) -> the unit after which the program stopped
_CODE: dict = {}        # (token, worker label) -> the steps' code (InlineCode's, for CodeRef)
_REGISTRIES = (_CONTEXTS, _LOCAL, _REMOTE, _DONE, _UNIT_START, _STOPPED, _CODE, CLOCKS)


class Packed:
    """``obj`` pickled once, here; a worker unpickles it with the garbage collector paused."""

    def __init__(self, obj):
        from daskhpc._dask_internals import dumps

        self.obj = obj             # what an in-process worker gets (nothing is pickled)
        self.blob = dumps(obj)     # cloudpickle where pickle would not do, as distributed

    def __reduce__(self):
        return unpack, (self.blob,)


class InlineCode:
    """The steps' code as an argument of the first task of a worker's loop, kept on the
    worker under ``key`` for later tasks (:class:`CodeRef`): no task, no round trip of its
    own."""

    def __init__(self, code: Packed | None, key: tuple, blob: bytes | None = None):
        self.code, self.key = code, key
        self.blob = code.blob if code is not None else blob

    def __reduce__(self):
        # bytes alone: the scheduler does not unpack them, only the task does
        return InlineCode, (None, self.key, self.blob)


class CodeRef:
    """The steps' code an earlier task of this worker's loop brought (:class:`InlineCode`)."""

    def __init__(self, key: tuple):
        self.key = key


def _code(code) -> "ProgramCode":
    """The code a task got (unpickled, :class:`Packed`, or kept from an
    :class:`InlineCode`)."""
    if isinstance(code, CodeRef):
        try:
            return _CODE[code.key]
        except KeyError:
            raise RuntimeError(f"run {code.key[0]}: worker {code.key[1]} has no code of the "
                               "run (its first task did not run here)") from None
    if isinstance(code, InlineCode):
        obj = code.code.obj if code.code is not None else unpack(code.blob)
        _CODE[code.key] = obj
        return obj
    return code.obj if isinstance(code, Packed) else code


def unpack(blob: bytes):
    """The object :class:`Packed` pickled."""
    from daskhpc._dask_internals import loads

    with _collector_paused():
        return loads(blob)


@contextlib.contextmanager
def _collector_paused():
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class ProgramCode:
    """The parts of a Program the workers need (no plans): ``dests[t]`` maps a part to its
    receivers at step ``t``, ``where`` a part to its worker's label."""

    def __init__(self, program, where: dict, topic: str | None, ckpt: str | None,
                 address: dict | None = None, in_loop: bool = False):
        self.name = program.name
        self.where = where               # part -> label of its worker
        self.address = address or {}     # label -> worker address (direct mode)
        self.in_loop = in_loop           # direct mode: compute in the event loop
        self.nparts = program.nparts
        self.steps = [(s.fn, s.args, s.report, s.label) for s in program.steps]
        self.dests = [program.dests(t) for t in range(program.nsteps)]
        self.init, self.final, self.save = program.init, program.final, program.save
        self.stop = program.stop
        self.unit_of_step = program.units_of_steps().tolist()
        self.topic = topic
        self.ckpt = ckpt
        # direct mode: per step, the (src, dst) messages each worker receives from others
        self.incoming = []
        for t in range(program.nsteps):
            inc: dict = {}
            for src, dsts in self.dests[t].items():
                for dst in dsts:
                    if where[src] != where[dst]:
                        inc.setdefault(where[dst], []).append((src, dst))
            self.incoming.append({lab: sorted(v) for lab, v in inc.items()})


def init_group(code: ProgramCode, token: str, label: str, parts: tuple, statics: list,
               starts: list | None):
    """Create the contexts of the worker's parts and run ``init`` on them."""
    code = _code(code)
    for i, p in enumerate(parts):
        ctx = Context(p, code.nparts, statics[i], {})
        if code.init is not None:
            code.init(ctx, None if starts is None else starts[i])
        _CONTEXTS[(token, p)] = ctx
    _DONE[(token, label)] = -1
    _UNIT_START[(token, label)] = time.time()
    return None


def _run_step(code: ProgramCode, token: str, label: str, t: int, parts: tuple,
              bundles, batch=None) -> None:
    """Step t for every part of the worker; outboxes to the registry, a unit's report to
    ``batch`` when given."""
    from daskhpc.comm import PlanMismatch, Program

    start = time.perf_counter()
    fn, args, report, step_label = code.steps[t]
    remote_in: dict[int, dict] = {}
    for bundle in bundles:
        if bundle:
            for (src, dst), payload in bundle.items():
                remote_in.setdefault(dst, {})[src] = payload
    unit = code.unit_of_step[t]
    for p in parts:
        ctx = _CONTEXTS[(token, p)]
        inbox = _LOCAL.pop((token, t - 1, p), {})
        inbox.update(remote_in.get(p, {}))
        ctx.step, ctx.unit = t, unit
        ctx.inbox = dict(sorted(inbox.items()))
        out = fn(ctx, *args)
        ctx.inbox = {}
        want = code.dests[t].get(p, [])
        got = {} if out is None else out
        if sorted(got) != want:
            raise PlanMismatch(f"{code.name} step {t} ({step_label}): part {p} sent to parts "
                               f"{sorted(got)}, its plan says {want}")
        for dst, payload in got.items():
            w = code.where[dst]
            if w == label:
                _LOCAL.setdefault((token, t, dst), {})[p] = payload
            else:
                _REMOTE.setdefault((token, t, w), {})[(p, dst)] = payload
    if report:
        _report(code, token, label, parts, unit, batch)
        if code.stop is not None and Program.stop_of(code.stop, code.name,
                                                     [_CONTEXTS[(token, p)] for p in parts]):
            _STOPPED[(token, label)] = unit
    _DONE[(token, label)] = t
    clock = step_clock(token, label)    # (a unit's report and checkpoint count as its work)
    clock.compute += time.perf_counter() - start
    clock.steps += 1


def _report(code: ProgramCode, token: str, label: str, parts: tuple, unit: int,
            batch=None) -> None:
    """Checkpoint (if kept) and send the parts' values of ``unit``."""
    values, saved = {}, False
    for p in parts:
        ctx = _CONTEXTS[(token, p)]
        if code.ckpt is not None and code.save is not None:
            from daskhpc.runtime._checkpoint import save_arrays, step_file

            save_arrays(step_file(code.ckpt, unit + 1, f"part-{p}.npz"), **code.save(ctx))
            saved = True
        values[p] = ctx.reported
        ctx.reported = {}
    now = time.time()
    start = _UNIT_START.get((token, label), now)
    _UNIT_START[(token, label)] = now
    if batch is not None:
        batch.add(unit, values, start=start, stop=now, saved=saved)
    elif code.topic is not None:
        from daskhpc.runtime._reports import send_report

        send_report(code.topic, unit, values, start=start, stop=now, saved=saved)


def step_group(code: ProgramCode, token: str, label: str, t: int, parts: tuple,
               for_worker: str | None, chain, *bundles):
    """A task of step t's group: run the step unless the group did, return the bundle for
    ``for_worker``."""
    code = _code(code)
    if _DONE[(token, label)] < t:
        _run_step(code, token, label, t, parts, bundles)
    if for_worker is None:
        return None
    return _REMOTE.pop((token, t, for_worker))


async def step_group_in_loop(code, token, label, t, parts, for_worker, chain, *bundles):
    """:func:`step_group` in the worker's event loop: cheaper for short steps."""
    return step_group(code, token, label, t, parts, for_worker, chain, *bundles)


async def steps_direct(code: ProgramCode, token: str, label: str, t0: int, t1: int,
                       parts: tuple, chain, statics=None, starts=None, final=False):
    """Steps ``t0 .. t1 - 1`` in the direct mode: wait for the plan's messages, run the
    step, push what it sends (one write per receiver). ``statics`` (``starts``): create the
    parts first; ``final``: return :func:`final_group`'s value."""
    from daskhpc.runtime._exchange import extension

    code = _code(code)
    if statics is not None:   # off the event loop too: a large part's init takes minutes,
        # and a loop that long blocked sends no heartbeat (the run counts the worker lost)
        await asyncio.to_thread(init_group, code, token, label, parts, statics, starts)
    with _Loop(code, token, label, t1, parts, None, None) as loop:
        ext, clock = extension(loop.worker), step_clock(token, label)
        clock.exchange = True            # its waits and sends are timed
        for t in loop.steps(t0, t1):
            inbox = await _receive(ext, code, token, label, t, clock)
            if code.in_loop:
                _run_step(code, token, label, t, parts, [inbox], loop.batch)
            else:   # off the event loop, which keeps receiving pushes (context copied)
                await asyncio.to_thread(_run_step, code, token, label, t, parts, [inbox],
                                        loop.batch)
            await _send(ext, code, token, label, t, clock)
    return _last(code, token, label, parts, final)


async def _receive(ext, code: ProgramCode, token: str, label: str, t: int, clock) -> dict:
    """The messages from other workers that step ``t`` reads, ``{(src, dst): payload}``; the
    wait is timed."""
    waited = time.perf_counter()
    ids = [(t - 1, *m) for m in code.incoming[t - 1].get(label, [])] if t else []
    got = await ext.wait(token, ids, clock=clock) if ids else {}
    clock.wait += time.perf_counter() - waited
    return {mid[1:]: payload for mid, payload in got.items()}


async def _send(ext, code: ProgramCode, token: str, label: str, t: int, clock) -> None:
    """Push what step ``t`` sends to other workers, one write per receiving worker."""
    sending = time.perf_counter()
    outgoing = [(k[2], _REMOTE.pop(k)) for k in [k for k in _REMOTE if k[:2] == (token, t)]]
    await ext.push_all(token, [
        (code.address[w], (f"{code.name}-{token}", label, t, w),
         [((t, src, dst), payload) for (src, dst), payload in msgs.items()])
        for w, msgs in outgoing])
    clock.send += time.perf_counter() - sending


def steps_single(code: ProgramCode, token: str, label: str, t0: int, t1: int,
                 parts: tuple, chain, statics=None, starts=None, final=False):
    """Steps ``t0 .. t1 - 1`` when this worker holds every part: one loop, no exchange, the
    same results bit for bit. Arguments as :func:`steps_direct`."""
    code = _code(code)
    with _Loop(code, token, label, t1, parts, statics, starts) as loop:
        for t in loop.steps(t0, t1):
            _run_step(code, token, label, t, parts, (), loop.batch)
    return _last(code, token, label, parts, final)


class _Loop:
    """A task's loop of steps up to ``t1 - 1``: creates the parts on the first task,
    coalesces the units' reports (``batch``)."""

    def __init__(self, code: ProgramCode, token: str, label: str, t1: int, parts: tuple,
                 statics, starts):
        from distributed import get_worker

        from daskhpc.runtime._reports import ReportBatch

        self.code, self.token, self.label = code, token, label
        self.worker = get_worker()
        if statics is not None:
            init_group(code, token, label, parts, statics, starts)
        self.batch = None if code.topic is None else ReportBatch(code.topic, self.worker)
        self.key = (f"{code.name}-{token}", label, t1 - 1, "")

    def __enter__(self) -> "_Loop":
        return self

    def __exit__(self, *exc) -> None:
        if self.batch is not None:
            self.batch.flush()

    def steps(self, t0: int, t1: int):
        """The steps to run: none after the program's stop rule ended it, none after a
        unit's end once the task is cancelled."""
        for t in range(t0, t1):
            if (self.token, self.label) in _STOPPED:
                return
            yield t
            if self.code.steps[t][2]:
                ts = self.worker.state.tasks.get(self.key)
                if ts is None or ts.state == "cancelled":
                    return


def _last(code: ProgramCode, token: str, label: str, parts: tuple, final: bool):
    """The final values if this is the attempt's last loop and the run is not cleaned up."""
    if not final or any((token, p) not in _CONTEXTS for p in parts):
        return None
    return final_group(code, token, label, parts, None)


def final_group(code: ProgramCode, token: str, label: str, parts: tuple, chain) -> dict:
    """``{part: final(ctx)}`` of the worker's parts after the last step."""
    code = _code(code)
    if code.final is None:
        return {p: None for p in parts}
    return {p: code.final(_CONTEXTS[(token, p)]) for p in parts}


def stopped_at(token: str) -> int | None:
    """The unit after which run ``token``'s program stopped here, or None."""
    return next((u for (tok, _), u in _STOPPED.items() if tok == token), None)


def cleanup(token: str, dask_worker=None) -> dict:
    """Forget run ``token``'s contexts and messages; the worker's step time split."""
    times = step_times(token, forget=True)   # (the clocks' totals stay counted)
    if dask_worker is not None:
        from daskhpc.runtime._exchange import extension

        ext = extension(dask_worker)
        if ext is not None:
            ext.forget(token)
    for reg in _REGISTRIES:
        for key in [k for k in reg if k[0] == token]:
            del reg[key]
    return times
