"""The workflow frame: one run loop for every workflow.

A workflow describes its run as a :class:`Job` (dask-free pieces: the per-part static
data, the :class:`~daskhpc.comm.Program` of the remaining iterations or a function that
builds one attempt's graph, how reports become history rows, a fingerprint) and
:func:`run_job` does the rest, the same way for everybody:

* place the parts (:class:`Placement`) and keep their data on the workers (:class:`PartStore`);
* run *attempts*: submit the program (in windows of units when the job can stop early),
  collect the units' reports as they arrive (history rows, progress, the user's callback,
  the dashboard), mark checkpoint steps complete;
* notice a lost worker (:class:`WorkerWatch`), release the attempt, re-place its parts
  (the nanny's replacement first), re-send only moved data, and start again from the
  newest checkpoint (ordered jobs) or with the units that are not safe (unordered ones),
  up to ``max_restarts``; one error when it gives up, one record per recovery;
* measure the bytes between workers (:class:`TransferLedger`) next to the plan projected
  on the same workers, per run and per unit.

Examples
--------
>>> job = Job("demo", nparts=4, units=10, program=make_program, statics=statics,
...           row=lambda u, rep: {"loss": sum(v["loss"] for v in rep.values())})
>>> out = run_job(client, job, checkpoint="ck/", resume=True)      # doctest: +SKIP
>>> out.history[-1]["loss"], out.measured["inter_worker_bytes"]    # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import time
import uuid
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from daskhpc.runtime._checkpoint import CheckpointDir, load_arrays
from daskhpc.runtime._connect import worker_addresses
from daskhpc.runtime._engine import ProgramRunner, step_of_key
from daskhpc.runtime._fault import (WorkerLost, WorkerWatch, gather_watching, release_futures,
                                    replace_lost)
from daskhpc.runtime._graph import submit_pinned
from daskhpc.runtime._ledger import TransferLedger
from daskhpc.runtime._placement import Placement
from daskhpc.runtime._progress import progress
from daskhpc.runtime._reports import ReportInbox
from daskhpc.runtime._steps import cleanup

__all__ = ["Job", "Attempt", "AttemptGraph", "Outcome", "run_job", "GaveUp"]


class GaveUp(WorkerLost):
    """More workers were lost than the run may recover from (``max_restarts``)."""

    def __init__(self, lost, recovered: int, max_restarts: int):
        super().__init__(lost)
        self.args = (f"{self.args[0]} (the run had recovered {recovered} time(s) already; "
                     f"max_restarts={max_restarts})",)


@dataclass
class Job:
    """What a workflow hands :func:`run_job` (see the module docstring).

    Parameters
    ----------
    name : str
        The workflow ("cpals"): checkpoint manifests, keys, progress label.
    nparts : int
    units : int
        Iterations of the whole run (epochs, ALS iterations, batches).
    row : callable
        ``row(unit, {reporter: values}) -> dict``: the history row of a complete unit.
    fingerprint : dict
        What must be equal to continue a checkpoint (inputs, parts, seeds, options).
    program : callable, optional
        ``program(first_unit) -> Program`` of units ``first_unit .. units - 1``.
    statics : dict or list, optional
        Per part, its static data (scattered once to its worker).
    assemble : callable, optional
        ``assemble(finals) -> value`` from the parts' ``final`` values (in part order).
    attempt : callable, optional
        Instead of ``program``: ``attempt(Attempt) -> AttemptGraph`` builds one attempt's
        graph (workflows whose graphs are not bulk-synchronous programs).
    restore : callable, optional
        ``restore(checkpoint, n) -> start`` after ``n`` complete units (default for
        programs: every part's ``part-<p>.npz`` of step n).
    reporters : callable, optional
        ``reporters(unit) -> set``: who must report a unit (default every part).
    savers : callable, optional
        ``savers(unit) -> set``: the reporters whose ``saved`` reports make the unit's
        checkpoint complete (default: all of ``reporters``).
    ordered : bool
        Units build on each other: a restart continues from the newest checkpoint. If
        False (independent batches) only units that are not *safe* run again.
    lost : callable, optional
        Unordered jobs: ``lost(workers, safe_units, durable_units) -> dict`` with
        ``invalidated`` (the units whose results died with the workers) and any fields the
        job wants in the recovery record.
    entry : callable, optional
        ``entry(unit, row) -> (step, meta)``: how a complete unit is recorded in the
        checkpoint manifest (default: step ``unit + 1``, "state after unit + 1 units",
        with the row as ``history``); ``unentry(meta) -> (unit, row)`` reads it back.
    stop : callable, optional
        ``stop(history) -> bool`` after every unit: end the run early (convergence). The
        program is then submitted one window of ``window`` units at a time.
    window : int, optional
        Units per submission (default: all at once, or 1 with ``stop``).
    placement : callable, optional
        ``placement(workers) -> Placement`` (default round robin).
    part_of : callable, optional
        Part of a static-data key (default: keys are parts).
    warm_up : callable, optional
        Run on every worker before anything is timed (load compiled kernels).
    unit_name : str
        What a unit is ("epochs", "iterations", "batches"): progress and messages.
    opened : callable, optional
        ``opened(checkpoint)`` once the checkpoint directory is accepted (write run-wide
        files next to its manifest, e.g. the partition).
    in_loop : bool
        Programs: run steps in the workers' event loops (short steps).
    """

    name: str
    nparts: int
    units: int
    row: Callable[[int, dict], dict]
    fingerprint: dict = field(default_factory=dict)
    program: Callable | None = None
    statics: Any = None
    assemble: Callable | None = None
    attempt: Callable | None = None
    restore: Callable | None = None
    reporters: Callable | None = None
    savers: Callable | None = None
    ordered: bool = True
    lost: Callable | None = None
    entry: Callable | None = None
    unentry: Callable | None = None
    stop: Callable | None = None
    window: int | None = None
    placement: Callable | None = None
    part_of: Callable | None = None
    warm_up: Callable | None = None
    unit_name: str = "units"
    opened: Callable | None = None
    in_loop: bool = False


@dataclass
class Attempt:
    """What a graph-building job gets for one attempt."""

    client: Any
    number: int
    token: str
    placement: Placement
    store: Any
    topic: str
    todo: list
    start: Any = None
    checkpoint: CheckpointDir | None = None


@dataclass
class AttemptGraph:
    """One attempt's graph and how to read it.

    ``tasks``/``where``: the pinned graph; ``wanted``: the keys to wait on;
    ``collect(values)`` turns their values into the run's value; ``cleanup()`` runs after
    the attempt, failed or not. For planned-vs-measured bytes: ``plans``, a list of
    ``(Plan, unit_of_phase)`` or ``(Plan, unit_of_phase, broadcast)`` (part-level plans of
    what the attempt sends, a phase mapped to its unit; ``broadcast``: its messages are
    keys fetched once per receiving worker, default ``broadcast`` below) and
    ``unit_of_key(key)`` (the unit of a transferred key, or None).
    ``hold``: keys whose futures outlive the attempt (results a later step needs, such as
    SpGEMM's kept blocks): submitted with the graph, handed to ``held({key: Future})``,
    and never released by the frame.
    """

    tasks: dict
    where: dict
    wanted: list
    collect: Callable | None = None
    cleanup: Callable | None = None
    plans: list = field(default_factory=list)
    unit_of_key: Callable | None = None
    broadcast: bool = False
    hold: list = field(default_factory=list)
    held: Callable | None = None


@dataclass
class Outcome:
    """What :func:`run_job` returns."""

    value: Any
    history: list
    measured: dict
    timing: dict
    recovery: dict
    placement: Placement
    ledger: TransferLedger | None = None


class _Book:
    """Reports per unit, the rows of complete units, what the checkpoint holds."""

    def __init__(self, job: Job, ck: CheckpointDir | None, t0: float):
        self.job, self.ck, self.t0 = job, ck, t0
        self.reports: dict[int, dict] = {}
        self.saved: dict[int, set] = {}
        self.spans: dict[int, list] = {}
        self.rows: dict[int, dict] = {}
        self.durable: set[int] = set()
        self.new_rows: list[dict] = []
        self.done_at: dict[int, float] = {}     # perf_counter time a unit completed
        self.attempt_t0 = t0
        if ck is not None:
            for meta in ck.steps():
                u, row = job.unentry(meta) if job.unentry else \
                    (int(meta["step"]) - 1, dict(meta.get("history", {})))
                self.rows[u] = {"unit": u, **row}
                self.durable.add(u)

    def want(self, u: int) -> set:
        return self.job.reporters(u) if self.job.reporters else set(range(self.job.nparts))

    def add(self, msg: dict) -> None:
        u = int(msg["unit"])
        got = self.reports.setdefault(u, {})
        got.update(msg["reports"])
        if msg.get("saved"):
            self.saved.setdefault(u, set()).update(msg["reports"])
        self.spans.setdefault(u, []).append((msg["start"], msg["stop"]))
        want = self.want(u)
        if u not in self.rows and want <= set(got):
            row = {"unit": u, **self.job.row(u, {r: got[r] for r in sorted(want, key=str)})}
            spans = self.spans[u]
            prev = self.rows.get(u - 1, {}).get("_end")
            end = max(s for _, s in spans)
            begin = prev if prev is not None else min(s for s, _ in spans)
            row["time_s"] = end - begin
            row["_end"] = end
            self.rows[u] = row
            self.new_rows.append(row)
            self.done_at[u] = time.perf_counter()
        savers = self.job.savers(u) if self.job.savers else want
        if self.ck is not None and u in self.rows and u not in self.durable and \
                savers <= self.saved.get(u, set()):
            self.durable.add(u)
            step, meta = self.job.entry(u, _public(self.rows[u])) if self.job.entry else \
                (u + 1, {"history": _public(self.rows[u])})
            self.ck.complete(step, **meta)

    def complete_silent(self, units) -> None:
        """Units nobody reports (``reporters`` empty) are complete when the attempt is."""
        for u in units:
            if u not in self.rows and not self.want(u):
                self.add({"unit": u, "reports": {}, "start": time.time(), "stop": time.time()})

    def restart_unit(self) -> int:
        """Ordered jobs: where an attempt starts (after the newest durable unit)."""
        done = [u for u in self.durable]
        return max(done) + 1 if done else 0

    def forget_from(self, u0: int) -> None:
        for store in (self.reports, self.saved, self.spans):
            for u in [u for u in store if u >= u0]:
                del store[u]
        for u in [u for u in self.rows if u >= u0 and u not in self.durable]:
            del self.rows[u]

    def history(self) -> list[dict]:
        return [_public(self.rows[u]) for u in sorted(self.rows)]


def _public(row: dict) -> dict:
    return {k: v for k, v in row.items() if not k.startswith("_")}


def run_job(client, job: Job, *, checkpoint=None, resume: bool = False,
            max_restarts: int = 3, callback: Callable | None = None,
            progress_bar: bool | None = None, low_latency: bool = True,
            placement: Placement | None = None, store=None,
            recoveries: list | None = None, announce: bool = True) -> Outcome:
    """Run ``job`` on ``client``'s cluster (see the module docstring).

    Parameters
    ----------
    client : distributed.Client
    job : Job
    checkpoint : path or CheckpointDir, optional
        A directory every worker and the client see: each part writes its state there
        after every unit, and a lost worker costs only the units since the newest one
        (an already opened :class:`CheckpointDir` is used as it is).
    resume : bool
        Continue the run recorded in ``checkpoint`` (same fingerprint).
    max_restarts : int
        Lost workers survived; one more raises :class:`GaveUp`.
    callback : callable, optional
        ``callback(row)`` for every unit as it completes (history rows).
    progress_bar : bool, optional
        Force the progress display on/off (default: ``daskhpc.runtime.progress``).
    low_latency : bool
        Unbatch scheduler <-> worker control messages during the run.
    placement : Placement, optional
        Override ``job.placement``.
    store : PartStore, optional
        Part data already on the workers (a run of several jobs shares it; its placement
        is used and kept up to date across recoveries). Default: a new one, released at
        the end.
    recoveries : list, optional
        Recovery records are appended here (several jobs of one run share the budget).
    announce : bool
        Tell the dashboard a run starts (its measured counters start from zero). A
        workflow that runs several jobs announces once itself.

    Returns
    -------
    Outcome
    """
    if max_restarts < 0:
        raise ValueError(f"max_restarts must be >= 0, not {max_restarts}")
    t_start = time.perf_counter()
    run_id = uuid.uuid4().hex[:10]
    own_store = store is None
    if own_store:
        from daskhpc.runtime._store import PartStore

        if placement is None:
            workers = worker_addresses(client)
            placement = job.placement(workers) if job.placement else \
                Placement(job.nparts, workers)
        store = PartStore(client, placement, run_id, part_of=job.part_of)
    placement = store.placement
    if job.statics is not None:
        statics = job.statics if isinstance(job.statics, dict) else dict(enumerate(job.statics))
        store.put("static", statics)
    ck = None
    if isinstance(checkpoint, CheckpointDir):
        ck = checkpoint
    elif checkpoint is not None:
        ck = CheckpointDir(checkpoint, job.name, job.fingerprint, resume=resume)
        if job.opened is not None:
            job.opened(ck)
    elif resume:
        from daskhpc.errors import InputError

        raise InputError("resume needs a checkpoint directory (--checkpoint DIR)")
    book = _Book(job, ck, t_start)
    resumed_from = book.restart_unit() if job.ordered and book.durable else None
    if job.warm_up is not None:
        client.run(job.warm_up)
    if announce:
        _publish_start(client, job, placement)
    recoveries = [] if recoveries is None else recoveries
    budget_used = len(recoveries)
    attempts = 0
    mode = None if progress_bar is None else ("auto" if progress_bar else "off")
    t0 = time.perf_counter()
    value, ledger = None, None
    meter: dict = {}         # the last attempt's plans and key -> unit map (_measure)
    with progress(job.units, f"{job.name} {job.unit_name}", mode=mode) as bar, \
            _maybe_low_latency(client, low_latency):
        bar.advance(len(book.rows))
        while True:
            todo = _todo(job, book)
            token = f"{run_id}a{attempts}"
            try:
                with warnings.catch_warnings():
                    # a worker that died took its transfer log along (the recovery says so)
                    warnings.filterwarnings("ignore", message="workers left during")
                    with TransferLedger(client, settle=0.5) as ledger:
                        value = _attempt(client, job, book, store, ck, token, attempts, todo,
                                         callback, bar, meter)
                break
            except WorkerLost as lost:
                t_lost = time.perf_counter()
                if len(recoveries) >= max_restarts:
                    raise GaveUp(lost.lost, len(recoveries), max_restarts) from lost
                in_flight = _todo(job, book)
                since = max([book.done_at.get(u, 0.0) for u in todo] + [book.attempt_t0])
                rec = {"lost": sorted(lost.lost), "attempt": attempts,
                       "in_flight": in_flight, "after_s": round(t_lost - t0, 3),
                       "wasted_s": max(t_lost - since, 0.0) if in_flight else 0.0}
                rec.update(_invalidate(job, book, lost.lost))
                old = store.placement
                new_placement = replace_lost(client, old, lost.lost)
                moved = store.move(new_placement)
                if job.warm_up is not None:
                    fresh = [w for w in new_placement.workers if w not in old.workers]
                    if fresh:
                        with contextlib.suppress(Exception):
                            client.run(job.warm_up, workers=fresh)
                after = _todo(job, book)
                rec.update(
                    restart=(after or [None])[0], rerun=after,
                    moved=[int(m) if isinstance(m, (int, np.integer)) else list(m)
                           for m in moved],
                    new_workers=[w for w in new_placement.workers if w not in old.workers],
                    recovery_s=time.perf_counter() - t_lost)
                rec["time_lost_s"] = rec["wasted_s"] + rec["invalidated_s"] + rec["recovery_s"]
                recoveries.append(rec)
                attempts += 1
    run_s = time.perf_counter() - t0
    history = book.history()
    measured = _measure(job, ledger, store.placement, book, meter)
    for row in history:
        row.update(measured["per_unit"].get(row["unit"], {}))
    measured.pop("per_unit")
    if own_store:
        store.release()
    timing = {"run_s": run_s, "per_iteration_s": [r.get("time_s") for r in history],
              "setup_s": t0 - t_start}
    recovery = {"recoveries": recoveries[budget_used:], "max_restarts": max_restarts,
                "attempts": attempts + 1,
                "checkpoint": None if ck is None else ck.path, "resumed_from": resumed_from,
                "saved": None if ck is None else (ck.latest() or (None,))[0]}
    return Outcome(value, history, measured, timing, recovery, store.placement, ledger)


def _todo(job: Job, book: _Book) -> list[int]:
    if job.ordered:
        return list(range(book.restart_unit(), job.units))
    return [u for u in range(job.units) if u not in book.rows]


def _invalidate(job: Job, book: _Book, lost) -> dict:
    """After a loss: forget the complete units whose results died; what to record."""
    if job.ordered:
        start = book.restart_unit()
        gone = sorted(u for u in book.rows if u >= start)
        extra = {}
    else:
        extra = dict(job.lost(set(lost), set(book.rows) - book.durable, set(book.durable))
                     if job.lost else {})
        gone = sorted(extra.pop("invalidated", ()))
    wasted = sum(book.rows[u].get("time_s", 0.0) for u in gone if u in book.rows)
    if job.ordered:
        book.forget_from(book.restart_unit())
    for u in gone:
        book.rows.pop(u, None)
        for store in (book.reports, book.saved, book.spans):
            store.pop(u, None)
    return {"invalidated": gone, "invalidated_s": wasted, **extra}


def _attempt(client, job: Job, book: _Book, store, ck, token: str, number: int, todo: list,
             callback, bar, meter: dict):
    """One attempt; returns the job's value or raises WorkerLost."""
    topic = f"daskhpc-{token}"
    owners = set(store.placement.workers)
    book.attempt_t0 = time.perf_counter()

    def drain():
        for msg in inbox.drain():
            book.add(msg)
        rows = [_public(row) for row in book.new_rows]
        book.new_rows = []
        for row in rows:
            bar.advance()
            if callback is not None:
                callback(row)
        if rows:
            _publish(client, "history", rows=rows)

    futures: list = []
    with ReportInbox(client, topic) as inbox, WorkerWatch(client, owners) as watch:
        try:
            meter.clear()
            meter["units"] = set(todo)
            if job.program is not None:
                return _run_program(client, job, book, store, ck, token, topic, todo, watch,
                                    drain, futures, meter)
            start, first = None, todo[0] if todo else job.units
            if job.ordered and first > 0 and ck is not None and job.restore is not None:
                start = job.restore(ck, first)
            g = job.attempt(Attempt(client, number, token, store.placement, store, topic,
                                    todo, start, ck))
            meter.update(plans=g.plans, unit_of_key=g.unit_of_key, broadcast=g.broadcast,
                         cleanup=g.cleanup)
            if not g.tasks:
                return g.collect([]) if g.collect else None
            submitted = submit_pinned(client, g.tasks, g.where, g.wanted + g.hold)
            futures[:] = submitted[:len(g.wanted)]
            if g.hold:
                g.held(dict(zip(g.hold, submitted[len(g.wanted):])))
            values = gather_watching(client, futures, watch, on_poll=drain)
            book.complete_silent(todo)
            _settle(book, todo, drain)
            return g.collect(values) if g.collect else values
        except WorkerLost:
            # reports the workers sent before the loss may still be on their way (the
            # loss can be seen first by polling): take them, so the restart is as late
            # as the checkpoints allow
            deadline = time.monotonic() + 0.5
            while time.monotonic() < deadline:
                drain()
                time.sleep(0.02)
            raise
        finally:
            release_futures(futures)
            drain()
            if job.program is not None:
                with contextlib.suppress(Exception):
                    client.run(cleanup, token)
            elif meter.get("cleanup") is not None:
                with contextlib.suppress(Exception):
                    meter["cleanup"]()


def _run_program(client, job, book, store, ck, token, topic, todo, watch, drain, futures,
                 meter):
    """An attempt of a program job: windows of units, then the final values."""
    first = todo[0] if todo else job.units
    starts = None
    if first > 0:
        starts = (job.restore(ck, first) if job.restore else
                  {p: load_arrays(ck.file(first, f"part-{p}.npz")) for p in range(job.nparts)})
    prog = job.program(first)
    if not todo:
        # the checkpoint is at the end: the parts' final values from their saved state
        from daskhpc.comm import run_local

        statics = [store.data["static"][p] for p in range(job.nparts)]
        finals, _ = run_local(prog, statics, [starts[p] for p in range(job.nparts)])
        return job.assemble(finals) if job.assemble else finals
    _publish_plan(client, job, store.placement, prog.plan())
    meter.update(plans=[(prog.plan(), prog.unit_of)], broadcast=False,
                 unit_of_key=lambda key: None if step_of_key(key) is None else
                 prog.unit_of(step_of_key(key)))
    if starts is not None:
        starts = store.put("start", starts, transient=True)
    runner = ProgramRunner(client, prog, store.placement, store["static"], starts=starts,
                           token=token, topic=topic,
                           checkpoint=None if ck is None else ck.path, in_loop=job.in_loop)
    futures += runner.frontier()
    ends = prog.unit_steps
    if len(ends) != len(todo):
        raise RuntimeError(f"{job.name}: the program for units {todo[0]}..{todo[-1]} has "
                           f"{len(ends)} reported steps")
    window = job.window or (1 if job.stop else len(ends))
    # windows of units; without a stop rule the next window is submitted before the
    # previous one is waited for (the workers never idle between windows)
    bounds = [(i, min(i + window, len(ends))) for i in range(0, len(ends), window)]
    pending, ran = None, len(ends)
    for i, j in bounds:
        futs = runner.submit(range(ends[i - 1] + 1 if i else 0, ends[j - 1] + 1))
        futures += futs
        if job.stop is None:
            if pending is not None:
                gather_watching(client, pending, watch, on_poll=drain)
            pending = futs
            continue
        gather_watching(client, futs, watch, on_poll=drain)
        _settle(book, todo[i:j], drain)
        if job.stop(book.history()):
            ran = j
            break
    if ran == len(ends) and ends[-1] + 1 < prog.nsteps:     # steps after the last report
        futures += runner.submit(range(ends[-1] + 1, prog.nsteps))
    fin = runner.finish()
    futures += fin
    values = gather_watching(client, fin, watch, on_poll=drain)
    _settle(book, todo[:ran], drain)
    finals = ProgramRunner.finals(values, job.nparts)
    return job.assemble(finals) if job.assemble else finals


def _settle(book: _Book, units, drain, grace: float = 5.0) -> None:
    """Wait (briefly) until every unit of ``units`` has its row: reports travel as events
    and may trail the futures by a moment."""
    deadline = time.monotonic() + grace
    while True:
        drain()
        missing = [u for u in units if u not in book.rows]
        if not missing:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{book.job.name}: no complete report for unit(s) "
                               f"{missing[:5]} although their tasks finished")
        time.sleep(0.01)


def _measure(job: Job, ledger, placement: Placement, book: _Book, meter: dict) -> dict:
    """Measured bytes of the last attempt next to its plans on the same workers, per run
    and per unit (only the units that ran: a run that stopped early ran fewer)."""
    if ledger is None or ledger.entries is None:
        return {"per_unit": {}}
    workers = list(placement.workers)
    owner = [workers.index(placement.worker(p)) for p in range(job.nparts)]
    out = dict(ledger.report())
    per_unit: dict[int, dict] = {}

    def unit(u):
        return per_unit.setdefault(u, {"planned_bytes": 0, "measured_bytes": 0.0})

    plans = meter.get("plans") or []
    if plans:
        total, count = 0, 0
        ran = meter.get("units", set()) & set(book.rows)
        for entry in plans:
            plan, unit_of_phase = entry[0], entry[1]
            bcast = entry[2] if len(entry) > 2 else meter.get("broadcast", False)
            placed = plan.placed(owner, len(workers), broadcast=bcast)
            units = [None if unit_of_phase is None else unit_of_phase(int(ph))
                     for ph in placed.phase.tolist()]
            for u, nbytes in zip(units, placed.message_bytes().tolist()):
                if u is None or u in ran:
                    total += int(nbytes)
                    count += 1
                    if u is not None:
                        unit(u)["planned_bytes"] += int(nbytes)
        out["planned_bytes"], out["planned_messages"] = total, count
        if out["inter_worker_messages"]:
            out["framing_bytes_per_message"] = (out["inter_worker_bytes"] - total) / \
                out["inter_worker_messages"]
    unit_of_key = meter.get("unit_of_key")
    if unit_of_key is not None:
        for e in ledger.entries:
            total = sum(e["keys"].values()) or 1
            for key, nbytes in e["keys"].items():
                u = unit_of_key(tuple(key) if isinstance(key, list) else key)
                if u is not None:
                    unit(u)["measured_bytes"] += e["bytes"] * nbytes / total
    for d in per_unit.values():
        d["measured_bytes"] = int(round(d["measured_bytes"]))
    out["per_unit"] = per_unit
    return out


def _maybe_low_latency(client, on: bool):
    if on:
        from daskhpc.runtime._latency import low_latency

        return low_latency(client)
    return contextlib.nullcontext()


def _publish(client, topic: str, **data) -> None:
    """Feed the dashboard pages (``publish`` never fails a run: it logs instead)."""
    from daskhpc.dashboard import publish

    publish(client, topic, **data)


def _publish_start(client, job: Job, placement: Placement) -> None:
    """Tell the dashboard pages a run starts (the measured matrix counts from here)."""
    _publish(client, "run", name=f"{job.name} K={job.nparts}", workflow=job.name,
             workers=list(placement.workers))


def _publish_plan(client, job: Job, placement: Placement, plan) -> None:
    """The attempt's planned bytes between workers, for the whole attempt (what the
    measured matrix adds up to when it is over)."""
    workers = list(placement.workers)
    owner = [workers.index(placement.worker(p)) for p in range(job.nparts)]
    matrix = plan.placed(owner, len(workers)).bytes_matrix()
    _publish(client, "plan", matrix=matrix, workers=workers, unit="bytes per run")
