"""The workflow frame: one run loop for every workflow (:func:`run_phase` runs a job).

Places the parts and keeps their data on the workers, runs attempts (windows of units,
reports as they arrive, checkpoint steps), recovers from a lost worker up to
``max_restarts`` (re-place, re-send moved data, restart from the newest checkpoint or
with the units not safe), and measures the bytes between workers next to the plan.
"""

from __future__ import annotations

import contextlib
import operator
import sys
import time
import warnings
from typing import Callable

import numpy as np

from daskhpc._clock import waited_for
from daskhpc.runtime._book import Book, invalidate, measure, public, settle, todo as todo_of
from daskhpc.runtime._calls import Applied
from daskhpc.runtime._checkpoint import load_arrays
from daskhpc.runtime._engine import ProgramRunner, step_of_key, units_per_task
from daskhpc.runtime._fault import (WorkerLost, WorkerWatch, gather_watching, release_futures,
                                    replace_lost, run_on_workers)
from daskhpc.runtime._gc import FrozenHeap
from daskhpc.runtime._graph import submit_pinned
from daskhpc.runtime._job import (Attempt, Diverged, GaveUp, GraphJob, Job, Outcome,
                                  exchange_mode, not_finite)
from daskhpc.runtime._ledger import LedgerClose, LogMarks, TransferLedger
from daskhpc.runtime._latency import LowLatency
from daskhpc.runtime._placement import Placement
from daskhpc.runtime._progress import progress
from daskhpc.runtime._quiet import Quiet
from daskhpc.runtime._reports import AttemptTopics, ReportInbox
from daskhpc.runtime._steps import cleanup, stopped_at
from daskhpc.runtime._warm import warm

#: Seconds between two publications of history rows to the dashboard.
PUBLISH_S = 1.0


def run_phase(client, job: Job | GraphJob, store, ck, recoveries: list, *, run_id: str,
              t_start: float | None = None, max_restarts: int = 3,
              callback: Callable | None = None, progress_bar: bool | None = None,
              low_latency: bool = True, announce: bool = True,
              warm_up: bool = True, rows_at_end: bool = False) -> Outcome:
    """Run ``job`` on a run's ``store`` and checkpoint ``ck``; recovery records go to the
    run's ``recoveries`` (one budget of ``max_restarts``). ``rows_at_end``: the run's end
    carries the last history rows (one scheduler call fewer)."""
    t_start = time.perf_counter() if t_start is None else t_start
    if job.statics is not None:
        statics = job.statics if isinstance(job.statics, dict) else dict(enumerate(job.statics))
        _put_surviving(client, store, "static", statics)
    book = Book(job, ck, t_start)
    resumed_from = book.restart_unit() if job.ordered and book.durable else None
    # a resumed run whose checkpoint holds every unit: the report says so
    complete = ck is not None and job.units > 0 and not todo_of(job, book)
    if warm_up and job.warm_up is not None:
        warm(client, job.warm_up)
    budget_used = len(recoveries)
    run = _PhaseRun(client, job, store, ck, book, run_id, callback, announce, rows_at_end,
                    low_latency)
    mode = None if progress_bar is None else ("on" if progress_bar else "off")
    with progress(job.units, f"{job.name} {job.unit_name}", mode=mode) as run.bar, \
            run.app as run.got:
        run.bar.advance(len(book.rows))
        while True:
            try:
                value = run.attempt()
                break
            except WorkerLost as lost:
                t_lost = time.perf_counter()
                run.losses.append(lost.lost)
                if len(recoveries) >= max_restarts:
                    raise GaveUp(lost.lost, len(recoveries), max_restarts) from lost
                recoveries.append(run.recover(lost, t_lost))
    run_s = time.perf_counter() - run.t0
    history = book.history()
    measured = measure(job, run.ledger, store.placement, book, run.meter)
    for row in history:
        row.update(measured["per_unit"].get(row["unit"], {}))
    measured.pop("per_unit")
    timing = {"run_s": run_s, "per_iteration_s": [r.get("time_s") for r in history],
              "setup_s": run.t0 - t_start}
    recovery = {"recoveries": recoveries[budget_used:], "max_restarts": max_restarts,
                "attempts": run.attempts + 1,
                "checkpoint": None if ck is None else ck.path, "resumed_from": resumed_from,
                "saved": None if ck is None else (ck.latest() or (None,))[0],
                "already_complete": {"units": job.units, "unit_name": job.unit_name}
                if complete else None}
    if ck is not None and getattr(ck, "dropped", None):
        recovery["damaged_steps"] = list(ck.dropped)
    return Outcome(value, history, measured, timing, recovery, store.placement, run.ledger,
                   _execution(job, store, run.meter, run.ledger, history))


class _PhaseRun:
    """A phase's attempts and what they share: the settings on the cluster, the last
    attempt's ledger and ``meter`` (plans, key -> unit), the losses."""

    def __init__(self, client, job, store, ck, book: Book, run_id: str, callback, announce,
                 rows_at_end: bool, low_latency: bool):
        self.client, self.job, self.store, self.ck, self.book = client, job, store, ck, book
        self.run_id, self.callback = run_id, callback
        self.announce, self.rows_at_end = announce, rows_at_end
        self.attempts, self.ledger, self.meter, self.losses = 0, None, {}, []
        self.todo: list = []
        self.bar = self.got = None
        self.t0 = time.perf_counter()
        # one call each to the workers and the scheduler sets the run's settings, one
        # puts them back (_calls); the last ledger is read in the undo call (LedgerClose)
        self.marks, self.closing = LogMarks(), LedgerClose()
        settings = [Quiet((run_id, store.run)), FrozenHeap(), self.marks,
                    AttemptTopics(f"daskhpc-{run_id}a")]
        settings += [LowLatency()] if low_latency else []
        self.app = Applied(client, *settings, self.closing, lost=lambda: bool(self.losses),
                           wait=False)

    def attempt(self):
        """Run the units not done yet under a TransferLedger: the job's value, or
        WorkerLost."""
        token = f"{self.run_id}a{self.attempts}"
        self.todo = todo_of(self.job, self.book)
        with warnings.catch_warnings():
            # a worker that died took its transfer log along (the recovery says so)
            warnings.filterwarnings("ignore", message="workers left during")
            # the first attempt's ledger takes the settings call's marks; only it is read
            # in the undo call (after a loss the undo misses the replacements)
            first_marks = None if self.attempts else (lambda: self.marks.marks(self.got))
            with TransferLedger(self.client, settle=0.5, marks=first_marks,
                                closing=None if self.losses else self.closing) as ledger:
                self.ledger = ledger
                try:
                    return self._run(token)
                finally:
                    # the attempt's cleanup on the workers, in the ledger's call
                    ledger.then = _worker_cleanup(self.job, token, self.meter)

    def work_done(self) -> None:
        """The attempt's last tasks are done: send the call that reads the ledger, cleans up
        and undoes the settings while the final values are gathered."""
        if not self.losses:
            self.ledger.then = _worker_cleanup(self.job, self.token, self.meter)
            self.closing.ledger = self.ledger
            self.app.undo_soon()

    def _run(self, token: str):
        """One attempt of ``self.todo``: the job's value, or WorkerLost."""
        client, job = self.client, self.job
        owners = set(self.store.placement.workers)
        self.book.attempt_t0 = time.perf_counter()
        topic = f"daskhpc-{token}"
        done = False                  # the attempt completed (its value is returned)
        with ReportInbox(client, topic, forget=False) as inbox, \
                WorkerWatch(client, owners) as self.watch:
            self.token, self.topic, self.wake, self.futures = token, topic, inbox.news, []
            self.drain = _Rows(client, job, self.book, self.bar, self.callback, inbox)
            try:
                self.meter.clear()
                self.meter["units"] = set(self.todo)
                value = (_run_program if job.program is not None else _run_graph)(self)
                done = True
                return value
            except WorkerLost:
                # take the reports still on their way: the restart is as late as can be
                deadline = time.monotonic() + 0.5
                while time.monotonic() < deadline:
                    self.drain()
                    time.sleep(0.02)
                raise
            except Exception:
                # stopped early (Diverged, ...): let the workers cancel the released tasks
                # before the cleanup ends their waits, or each logs "Compute Failed"
                release_futures(self.futures)
                with contextlib.suppress(Exception):
                    _quiesce(client, token)
                raise
            finally:
                release_futures(self.futures)
                self.drain(force=True, publish=not (done and self.rows_at_end))
                if job.program is None and self.meter.get("cleanup") is not None:
                    with contextlib.suppress(Exception):
                        self.meter["cleanup"]()

    def recover(self, error: WorkerLost, t_lost: float) -> dict:
        """After losing ``error.lost``: invalidate units, re-place parts, warm the new
        workers; the recovery's record."""
        job, book, store, lost = self.job, self.book, self.store, error.lost
        # a host that went silent does not come back in seconds: no wait for it
        silent = bool(error.why) and set(error.why) >= set(lost)
        in_flight = todo_of(job, book)
        since = max([book.done_at.get(u, 0.0) for u in self.todo] + [book.attempt_t0])
        rec = {"lost": sorted(lost), "attempt": self.attempts,
               "in_flight": unit_ranges(in_flight), "after_s": round(t_lost - self.t0, 3),
               "wasted_s": max(t_lost - since, 0.0) if in_flight else 0.0,
               **({"why": dict(sorted(error.why.items()))} if error.why else {})}
        rec.update(invalidate(job, book, lost))
        old = store.placement
        placement, moved = _move_off(self.client, store, old, set(lost),
                                     wait_s=0.0 if silent else 5.0)
        fresh = [w for w in placement.workers if w not in old.workers]
        if job.warm_up is not None and fresh:
            with contextlib.suppress(Exception):
                warm(self.client, job.warm_up, workers=fresh)
        after = todo_of(job, book)
        rec.update(restart=(after or [None])[0], rerun=unit_ranges(after),
                   rerun_count=len(after), unit_name=job.unit_name,
                   moved=[int(m) if isinstance(m, (int, np.integer)) else list(m)
                          for m in moved],
                   new_workers=fresh, recovery_s=time.perf_counter() - t_lost)
        rec["time_lost_s"] = rec["wasted_s"] + rec["invalidated_s"] + rec["recovery_s"]
        self.attempts += 1
        return rec

    def gather(self, futures: list, **kw):
        return gather_watching(self.client, futures, self.watch, on_poll=self.drain,
                               wake=self.wake, **kw)


class _Rows:
    """An attempt's reports as they arrive: rows to the book, progress bar, callback and
    dashboard; a row that is not finite raises Diverged."""

    def __init__(self, client, job, book: Book, bar, callback, inbox):
        self.client, self.job, self.book, self.bar = client, job, book, bar
        self.callback, self.inbox = callback, inbox
        self.unpublished: list = []
        self.last = time.monotonic()
        self.diverged = False         # raised once; the drains after it only clean up

    def __call__(self, force: bool = False, publish: bool = True) -> None:
        for msg in self.inbox.drain():
            if not self.diverged:      # after a divergence: no more rows, no checkpoints
                self.book.add(msg)
        rows = [] if self.diverged else [public(row) for row in self.book.new_rows]
        self.book.new_rows = []
        stop = None
        for i, row in enumerate(rows):
            stop = self._divergence(row)
            if stop is not None:
                rows = rows[:i]        # nobody sees the rows from the bad one on
                break
            self.bar.advance()
            if self.callback is not None:
                self.callback(row)
        self.unpublished.extend(rows)
        # at most once a second: a round trip per unit cost 10-25 % of a short SSGD epoch
        if publish and self.unpublished and (force or stop or
                                             time.monotonic() - self.last > PUBLISH_S):
            _publish(self.client, "history", rows=list(self.unpublished))
            self.unpublished.clear()
            self.last = time.monotonic()
        if stop is not None:
            raise stop

    def _divergence(self, row: dict) -> Diverged | None:
        """The Diverged error for a NaN/inf value in ``row`` (when the job checks), else
        None."""
        job = self.job
        bad = not_finite({k: v for k, v in row.items() if k != "unit"}) if job.finite else None
        if bad is None:
            return None
        self.diverged = True
        return Diverged(job.name, job.unit_name, row["unit"], *bad, row, job.diverged_hint)


def _execution(job, store, meter: dict, ledger, history: list) -> dict:
    """The report's ``execution``: workers, how a Program's steps ran, the step time split."""
    execution = {"workers": len(store.placement.workers), "units": job.unit_name}
    if job.program is not None:
        single = bool(meter.get("single_worker"))      # the last attempt's (_run_program)
        execution.update(exchange=exchange_mode(job.exchange),
                         in_loop=bool(job.in_loop) and not single, single_worker=single)
    ran = meter.get("units", ())                  # the last attempt's units, as run
    split = step_split(ledger, sum(1 for row in history if row.get("unit") in ran))
    if split is not None:
        execution["steps"] = split
    return execution


def step_split(ledger, units: int) -> dict | None:
    """The report's ``execution["steps"]``: per worker ``compute_s``, ``wait_s``,
    ``send_s``, ``steps`` of the last attempt, and ``waited_for``
    (``daskhpc._clock.waited_for``, else the busiest worker) with ``waited_for_s``; None
    when no worker timed its steps."""
    got = {w: v for w, v in (getattr(ledger, "then_values", None) or {}).items()
           if isinstance(v, dict) and v.get("steps")}
    if not got:
        return None
    late = waited_for(got)
    slowest = late[0] if late else max(
        got, key=lambda w: got[w]["compute_s"] + (got[w].get("send_s") or 0.0))
    return {"per_worker": got, "units": units, "waited_for": slowest,
            **({"waited_for_s": late[1]} if late else {})}


def _worker_cleanup(job, token: str, meter: dict):
    """``(fn, *args)`` that ends an attempt on every worker."""
    return (cleanup, token) if job.program is not None else meter.get("worker_cleanup")


def _put_surviving(client, store, name: str, values: dict) -> None:
    """``store.put`` on the workers left: a worker lost meanwhile moves its parts to the
    others."""
    while True:
        try:
            store.put(name, values)
            return
        except WorkerLost as lost:
            _move_off(client, store, store.placement, set(lost.lost))


def _move_off(client, store, old: Placement, lost: set, wait_s: float = 5.0):
    """The placement without the ``lost`` workers, and the parts moved to it. A worker that
    leaves before its parts reach it is a loss too; each round drops one more worker and
    ``replace_lost`` raises when none is left."""
    moved: list = []
    while True:
        placement = replace_lost(client, old, lost, wait_s=wait_s)
        try:
            got = store.move(placement)
        except WorkerLost as more:
            lost |= more.lost
            continue
        moved += [m for m in got if m not in moved]
        return placement, moved


def _restored(job, ck, first: int) -> dict | None:
    """The parts' states saved before unit ``first`` (None at the start)."""
    if first == 0:
        return None
    if job.restore is not None:
        return job.restore(ck, first)
    return {p: load_arrays(ck.file(first, f"part-{p}.npz")) for p in range(job.nparts)}


def _run_graph(run: _PhaseRun):
    """An attempt of a graph job, window after window."""
    job, store, ck = run.job, run.store, run.ck
    first = run.todo[0] if run.todo else job.units
    ordered = job.ordered and ck is not None and job.restore is not None
    start = _restored(job, ck, first) if ordered else None
    g = job.attempt(Attempt(run.client, run.attempts, run.token, store.placement, store,
                            run.topic, run.todo, start, ck, job.window, units_per_task()))
    run.meter.update(plans=g.plans, unit_of_key=g.unit_of_key, broadcast=g.broadcast,
                     cleanup=g.cleanup, worker_cleanup=g.worker_cleanup)
    if g.plans and run.announce and not callable(g.plans):   # the frame's to show
        _publish_plan(run.client, job, store.placement, g.plans, g.broadcast)
    if not g.tasks:
        return g.collect([]) if g.collect else None
    run.ledger.ready()
    g, values = _run_windows(run, g)
    run.book.complete_silent(run.todo)
    settle(run.book, run.todo, run.drain)
    return g.collect(values) if g.collect else values


def _run_windows(run: _PhaseRun, g):
    """Submit an attempt's graph window after window: the next is built while one runs, so
    the scheduler holds one window. The last window's graph and its ``wanted`` values."""
    while True:
        submitted = submit_pinned(run.client, g.tasks, g.where, g.wanted + g.hold)
        run.futures[:] = submitted[:len(g.wanted)]
        if g.hold:
            g.held(dict(zip(g.hold, submitted[len(g.wanted):])))
        nxt = g.next() if g.next is not None else None
        if nxt is None:
            return g, run.gather(run.futures, when_done=run.work_done)
        run.gather(run.futures, values=False)
        release_futures(run.futures)
        g = nxt


def _run_program(run: _PhaseRun):
    """An attempt of a program job: its units' steps in windows, then the final values."""
    job, store, ck = run.job, run.store, run.ck
    first = run.todo[0] if run.todo else job.units
    starts = _restored(job, ck, first)
    prog = job.program(first)
    replay = not run.todo
    if replay and "static" in store.data:
        from daskhpc.comm import run_local

        statics = [store.data["static"][p] for p in range(job.nparts)]
        finals, _ = run_local(prog, statics, [starts[p] for p in range(job.nparts)])
        return job.assemble(finals) if job.assemble else finals
    plans = [(prog.plan(), prog.unit_of)]      # (one pass over the steps' plans)
    _publish_plan(run.client, job, store.placement, plans, False)
    run.meter.update(plans=plans, broadcast=False,
                     unit_of_key=lambda key: None if step_of_key(key) is None else
                     prog.unit_of(step_of_key(key)))
    if starts is not None:
        starts = store.put("start", starts, transient=True)
    run.ledger.ready()
    runner = ProgramRunner(run.client, prog, store.placement, store["static"], starts=starts,
                           token=run.token, topic=None if replay else run.topic,
                           checkpoint=None if ck is None or replay else ck.path,
                           in_loop=job.in_loop, exchange=exchange_mode(job.exchange))
    run.futures += runner.frontier()
    run.meter["single_worker"] = runner.single
    ends = [] if replay else prog.unit_steps
    if len(ends) != len(run.todo):
        raise RuntimeError(f"{job.name}: the program for units {run.todo[0]}..{run.todo[-1]} "
                           f"has {len(ends)} reported steps")
    # a program's own stop rule with direct exchange: the workers end the run
    on_workers = runner.direct and prog.stop is not None and job.stop is not None
    ran = _unit_windows(run, runner, ends, on_workers)
    return _program_end(run, runner, ends, ran, on_workers)


def _unit_windows(run: _PhaseRun, runner, ends: list, on_workers: bool) -> int:
    """Submit the units' steps (``ends``: each one's last step) in windows; the number of
    units run (fewer when the stop rule ends the run). Without a client-side stop rule
    windows are submitted without waiting for the previous one."""
    job, prog = run.job, runner.program
    window = job.window or (1 if job.stop and not on_workers else max(len(ends), 1))
    last = job.stop is None or on_workers         # the client never stops the run early
    after = ends[-1] + 1 if ends else 0
    pending: list = []
    for i in range(0, len(ends), window):
        j = min(i + window, len(ends))
        futs = runner.submit(range(ends[i - 1] + 1 if i else 0, ends[j - 1] + 1),
                             final=last and j == len(ends) and after == prog.nsteps)
        keep = runner.code_futures() + pending + futs     # the steps' code, on every worker
        ids = {id(f) for f in keep}
        # released now: the new window's tasks, already submitted, keep what they read
        release_futures([f for f in run.futures if id(f) not in ids])
        run.futures[:] = keep
        if last:
            if pending:
                run.gather(pending)
            pending = futs
            continue
        run.gather(futs)
        settle(run.book, run.todo[i:j], run.drain)
        if job.stop(run.book.history()):
            return j
    return len(ends)


def _program_end(run: _PhaseRun, runner, ends: list, ran: int, on_workers: bool):
    """After ``ran`` units: the steps after the last report, the final values, rows settled,
    the workers' stop rule checked."""
    job, prog = run.job, runner.program
    after = ends[-1] + 1 if ends else 0
    if ran == len(ends) and after < prog.nsteps:             # steps after the last report
        run.futures += runner.submit(range(after, prog.nsteps), final=True)
    fin = runner.finish()
    run.futures += fin
    kept = _kept_finals(run.client, runner, fin, job.nparts) if job.keep_finals else None
    values = run.gather(kept or fin, values=kept is None,
                       when_done=None if on_workers else run.work_done)
    if on_workers:
        ran, stopped = _stopped_units(run.client, run.token, prog, ran)
    settle(run.book, run.todo[:ran], run.drain)
    if on_workers:
        _check_stop(job, run.book.history(), ran, stopped)
    if kept is not None:
        return kept
    finals = ProgramRunner.finals(values, job.nparts)
    return job.assemble(finals) if job.assemble else finals


def _kept_finals(client, runner, fin: list, nparts: int) -> list:
    """Per part, a future of its final value on its own worker (``Job.keep_finals``)."""
    tasks, where = {}, {}
    for f, (lab, parts) in zip(fin, runner.parts.items()):
        for p in parts:
            key = (f"{runner.program.name}-kept-{runner.token}", int(p))
            tasks[key] = (operator.getitem, f, p)
            where[key] = runner.address[lab]
    got = dict(zip(tasks, submit_pinned(client, tasks, where, list(tasks))))
    return [got[(f"{runner.program.name}-kept-{runner.token}", p)] for p in range(nparts)]


def unit_ranges(units) -> list:
    """Units as ``[first, last]`` runs of consecutive integers, sorted."""
    runs: list = []
    for u in sorted(int(u) for u in units):
        if runs and u == runs[-1][1] + 1:
            runs[-1][1] = u
        else:
            runs.append([u, u])
    return runs


def _stopped_units(client, token: str, prog, ran: int) -> tuple[int, bool]:
    """``(units run, stopped)``: how many units the workers ran, and whether the program's
    stop rule ended them."""
    said = {u for u in run_on_workers(client, stopped_at, token).values() if u is not None}
    if len(said) > 1:
        raise RuntimeError(f"{prog.name}: the workers stopped after different units "
                           f"{sorted(said)}")
    return (said.pop() - prog.first_unit + 1, True) if said else (ran, False)


def _check_stop(job, history: list, ran: int, stopped: bool) -> None:
    """The workers' rule (``Program.stop``) must agree with the job's on this attempt's
    ``ran`` units."""
    says = [bool(job.stop(history[:n])) for n in range(len(history) - ran + 1,
                                                         len(history) + 1)]
    if says[:-1].count(True) or (bool(says) and says[-1] != stopped):
        raise RuntimeError(f"{job.name}: the workers' stop rule and the job's disagree "
                           f"({'stopped' if stopped else 'ran on'} after {len(history)} "
                           f"{job.unit_name}; the job's rule: {says})")


def _prepare_kernels(client, workflow: str) -> None:
    """A LocalCluster's workers share this machine's numba cache: compile the kernels once
    here."""
    from distributed import LocalCluster

    if isinstance(getattr(client, "cluster", None), LocalCluster):
        from daskhpc._numba import prepare_kernels

        prepare_kernels(workflow, file=sys.stderr)


def _running(token: str, dask_worker=None) -> int:
    """Tasks of run ``token`` still executing on this worker."""
    return sum(1 for k, ts in dask_worker.state.tasks.items()
               if token in str(k) and ts.state in ("executing", "long-running"))


def _quiesce(client, token: str, wait: float = 2.0) -> None:
    """Wait (bounded) until the workers have cancelled every released task of ``token``."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if not sum(run_on_workers(client, _running, token).values()):
            return
        time.sleep(0.02)


def _publish(client, topic: str, **data) -> None:
    """Feed the dashboard pages (``publish`` logs instead of failing a run)."""
    from daskhpc.dashboard import publish

    publish(client, topic, **data)


def _publish_start(client, label: str, workflow: str, placement: Placement,
                   units: int | None = None, unit_name: str | None = None,
                   sent: dict | None = None) -> None:
    """Tell the dashboard pages a run starts (``sent``: the workers' counters)."""
    more = {k: v for k, v in (("units", units), ("unit_name", unit_name)) if v is not None}
    _publish(client, "run", name=label, workflow=workflow, workers=list(placement.workers),
             sent=sent, **more)


def _publish_end(client, status: str, measured: dict | None = None, history=None,
                 ledger=None, execution: dict | None = None) -> None:
    """Tell the dashboard pages the run is over: planned and measured bytes, rows, the
    measured matrix, compute time per worker."""
    data: dict = {"status": status}
    for name, key in (("planned_bytes", "planned_bytes"), ("measured_bytes", "inter_worker_bytes")):
        if (measured or {}).get(key) is not None:
            data[name] = int(measured[key])
    if history is not None:
        data["rows"] = list(history)
    if ledger is not None and ledger.entries is not None:
        data["workers"], data["matrix"] = ledger.matrix("bytes")
    split = (execution or {}).get("steps") or {}
    if split.get("per_worker"):
        data["compute"] = {w: [float(v["compute_s"]), int(v["steps"])]
                           for w, v in split["per_worker"].items()}
        if split.get("waited_for_s"):
            data["waited_for"] = [split["waited_for"], split["waited_for_s"]]
    _publish(client, "end", **data)


@contextlib.contextmanager
def _failed_ends(client, announce: bool):
    """A run that fails ends on the dashboard too."""
    try:
        yield
    except Exception as e:
        if announce:
            _publish_end(client, f"failed: {type(e).__name__}")
        raise


def _publish_plan(client, job: Job, placement: Placement, plans, broadcast) -> None:
    """Publish the attempt's planned bytes between workers, per run and per unit (as
    ``Book.measure`` counts them)."""
    from daskhpc.dashboard import plan_fields

    workers = list(placement.workers)
    owner = [workers.index(placement.worker(p)) for p in range(job.nparts)]
    entries = [e if len(e) > 2 else (e[0], e[1], broadcast) for e in plans]
    _publish(client, "plan", workers=workers, unit="bytes per run", wait=False,
             **plan_fields(entries, owner, len(workers), job.units))
