"""The stratum-order scheduler plugin: a thin adapter from Dask's scheduler to the policy.

It recognises SSGD step keys ``("ssgd-step-<run>", part, epoch, subepoch, block, i)``
(part and block are labels like ``"0+1"`` when one task sweeps several parts).
When a graph arrives (``update_graph``) it registers every unit with the
:class:`~daskhpc.ssgd._policy.StratumPolicy` and *holds* each unit whose predecessors
(the part's previous sub-epoch, the block's previous update) are neither done nor
already upstream of it in the graph (a direct dependency, or one hop further): its tasks
get a worker restriction no worker satisfies, so they wait in ``no-worker``. When a
predecessor finishes, the ``transition`` hook asks the policy what it frees, and a
callback on the scheduler's event loop (a new stimulus, never a transition inside a
transition) restores the real restrictions and sends the tasks on to ``processing``.

Every finished step is recorded in :attr:`StratumOrderPlugin.timeline` (key, run,
part, epoch, sub-epoch, block, worker, start, stop, sent, done, held), which a
dashboard page can read as ``scheduler.plugins["daskhpc-stratum-order"].timeline``; the
client gets it with :func:`fetch_timeline`. ``sent``/``done`` are the scheduler's clock
when it sent the task to its worker and when it learnt the result: one clock for all
tasks, so the order rules are checked on them. ``start``/``stop`` are the worker's
compute span, shifted by the worker's estimate of its clock offset to the scheduler
(heartbeat based: on a loaded machine it can be off by a second, fine for a picture,
not for an order check).

.. warning::
   Relies on scheduler internals of ``distributed`` 2026.8: ``TaskState.
   worker_restrictions``, the ``no-worker`` state, ``Scheduler.transitions`` and the
   ``startstops`` transition argument. ``distributed.scheduler.no-workers-timeout``
   must stay unset, or held tasks would be failed.

Examples
--------
>>> client.register_plugin(StratumOrderPlugin())                # doctest: +SKIP
>>> fetch_timeline(client, "ssgd-step-1234")[:1]                # doctest: +SKIP
[{'key': ..., 'part': 0, 'epoch': 0, 'subepoch': 0, 'block': 0, 'worker': ..., ...}]
"""

from __future__ import annotations

import time

from distributed.diagnostics.plugin import SchedulerPlugin

from ._policy import StratumPolicy

__all__ = ["StratumOrderPlugin", "register", "fetch_timeline", "NAME", "HELD"]

NAME = "daskhpc-stratum-order"
HELD = "daskhpc-held://stratum-order"   # an address no worker has
PREFIX = "ssgd-step-"


class StratumOrderPlugin(SchedulerPlugin):
    """Hold SSGD steps that would break the stratum order; record the timeline.

    Parameters
    ----------
    prefix : str
        Key-name prefix of the step tasks.
    """

    name = NAME
    idempotent = True

    def __init__(self, prefix: str = PREFIX):
        self.prefix = prefix
        self.policy = StratumPolicy()
        self.timeline: list[dict] = []
        self.units: dict[tuple, list] = {}
        self.restrictions: dict = {}       # held key -> its real worker restrictions
        self.held_units: set = set()
        self.sent: dict = {}               # key -> scheduler time it went to processing
        self.waiting: dict = {}            # held key -> its units still waiting
        self.scheduler = None

    def start(self, scheduler) -> None:
        self.scheduler = scheduler

    def units_of(self, key):
        """``[(run, part, (epoch, subepoch), block), ...]`` of a step key, else None.

        One key can sweep several parts (all the parts of a worker): then its part and
        block fields are labels like ``"0+1"`` and ``"2+3"``.
        """
        if not (isinstance(key, tuple) and len(key) == 6 and isinstance(key[0], str)
                and key[0].startswith(self.prefix)):
            return None
        return [(key[0], p, (key[2], key[3]), b)
                for p, b in zip(_labels(key[1]), _labels(key[4]))]

    # -- new graph: register units, hold the ones the graph does not order ----------
    def update_graph(self, scheduler, *, tasks=(), **kwargs) -> None:
        self.scheduler = scheduler
        new: dict[tuple, list] = {}
        for key in tasks:
            for u in self.units_of(key) or ():
                new.setdefault(u, []).append(key)
        if not new:
            return
        self.policy.add(new)
        for u, keys in new.items():
            self.units.setdefault(u, []).extend(keys)
        for u, keys in new.items():
            pending = [p for p in self.policy.predecessors(u)
                       if not self.policy.done(p) and not self._upstream(scheduler, keys[0], p)]
            if not pending:
                continue
            self.policy.hold(u)
            self.held_units.add(u)
            for key in keys:
                self.waiting.setdefault(key, set()).add(u)
                if key not in self.restrictions:
                    ts = scheduler.tasks[key]
                    self.restrictions[key] = set(ts.worker_restrictions or ())
                    ts.worker_restrictions = {HELD}

    def _upstream(self, scheduler, key, pred) -> bool:
        """Is a task of unit ``pred`` a dependency of ``key``, or one of theirs?"""
        mine = set(self.units.get(pred, ()))
        for dep in scheduler.tasks[key].dependencies:
            if dep.key in mine or any(dd.key in mine for dd in dep.dependencies):
                return True
        return False

    # -- completions: record, release ------------------------------------------------
    def transition(self, key, start, finish, *args, **kwargs) -> None:
        units = self.units_of(key)
        if units is None:
            return
        if finish == "processing":
            self.sent[key] = time.time()
            return
        if start != "processing" or finish not in ("memory", "erred"):
            return
        self._record(key, units, finish, kwargs)
        release = []
        for u in units:
            for f in self.policy.finish(u):
                for k in self.units.get(f, ()):
                    left = self.waiting.get(k)
                    if left is not None:
                        left.discard(f)
                        if not left:
                            del self.waiting[k]
                            release.append(k)
        if release:
            # Not from inside a transition: a new stimulus on the event loop.
            self.scheduler.loop.add_callback(self._release, release)

    def _record(self, key, units, finish, kwargs) -> None:
        spans = [s for s in kwargs.get("startstops", ()) if s.get("action") == "compute"]
        sent, done = self.sent.pop(key, None), time.time()
        for u in units:
            self.timeline.append({
                "key": key, "run": u[0], "part": u[1], "epoch": u[2][0], "subepoch": u[2][1],
                "T": u[2], "block": u[3], "task": key[5], "worker": kwargs.get("worker"),
                "start": spans[0]["start"] if spans else None,
                "stop": spans[0]["stop"] if spans else None,
                "sent": sent, "done": done, "held": u in self.held_units, "state": finish})

    def _release(self, keys) -> None:
        s = self.scheduler
        recs = {}
        for key in keys:
            real = self.restrictions.pop(key, None)
            ts = s.tasks.get(key)
            if ts is None:
                continue
            ts.worker_restrictions = real or None
            if ts.state == "no-worker":
                recs[key] = "processing"
        if recs:
            s.transitions(recs, stimulus_id=f"daskhpc-stratum-release-{time.time()}")

    # -- housekeeping -------------------------------------------------------------------
    def take(self, run: str) -> list[dict]:
        """Return the timeline of ``run`` and forget the run."""
        out = [r for r in self.timeline if r["run"] == run]
        self.timeline = [r for r in self.timeline if r["run"] != run]
        self.policy.forget(run)
        for u in [u for u in self.units if u[0] == run]:
            del self.units[u]
        self.held_units = {u for u in self.held_units if u[0] != run}
        return out


def _labels(x) -> list[int]:
    return [x] if isinstance(x, int) else [int(t) for t in str(x).split("+")]


def register(client) -> None:
    """Register the plugin on the client's scheduler (once; later calls are no-ops)."""
    client.register_plugin(StratumOrderPlugin())


def _take(run, dask_scheduler=None):
    plugin = dask_scheduler.plugins.get(NAME)
    return [] if plugin is None else plugin.take(run)


def fetch_timeline(client, run: str) -> list[dict]:
    """The recorded steps of ``run`` (and forget them on the scheduler)."""
    return client.run_on_scheduler(_take, run)
