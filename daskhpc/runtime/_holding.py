"""One engine for scheduler plugins that hold tasks back until a policy lets them run."""

from __future__ import annotations

import time

from distributed.diagnostics.plugin import SchedulerPlugin

#: An address no worker can have: tasks restricted to it wait in no-worker.
PARKED = "tcp://daskhpc-parked.invalid:1"


class HoldingPlugin(SchedulerPlugin):
    """The engine under scheduler plugins that hold pinned tasks back (SSGD's stratum
    order, SpGEMM's batch admission) until a pure policy releases them.

    In ``update_graph`` it *parks* the tasks the policy holds (their restriction swapped for
    :data:`PARKED`, so they wait in ``no-worker``), on every completion asks the policy
    what is released, and restores the real restrictions from a new stimulus. Subclasses
    implement :meth:`units_of`, :meth:`hold` and :meth:`finish`. One timeline row per unit
    of every finished task: ``key, run, worker, sent, done`` (the scheduler's clock),
    ``start, stop`` (the worker's compute span), ``held, state`` and the adapter's fields.
    ``distributed.scheduler.no-workers-timeout`` must stay unset.

    Examples
    --------
    >>> install(client, StratumOrderPlugin)                       # doctest: +SKIP
    >>> rows = take(client, StratumOrderPlugin.name, "ssgd-step-ab12")   # doctest: +SKIP
    """

    name = "daskhpc-holding"
    idempotent = True

    def __init__(self):
        self.scheduler = None
        self.rows: list[dict] = []
        self._real: dict = {}          # parked key -> its real worker restrictions
        self._waiting: dict = {}       # parked key -> units it still waits for
        self._keys: dict = {}          # unit -> keys
        self._held: set = set()        # units that were held at some point
        self._sent: dict = {}          # key -> scheduler time it went to processing

    def units_of(self, key) -> list | None:
        """The policy units ``key`` belongs to, or None if the key is not ours."""
        raise NotImplementedError

    def add(self, scheduler, units_by_key: dict) -> None:
        """New keys of ours arrived (tell the policy)."""

    def hold(self, scheduler, key, units: list) -> list:
        """Those of ``units`` that must wait before ``key`` may run."""
        return []

    def started(self, key, units: list, now: float) -> None:
        """``key`` was sent to its worker."""

    def finish(self, key, units: list, state: str, now: float) -> list:
        """``key`` finished (``memory`` or ``erred``): the units this releases."""
        return []

    def describe(self, key, unit) -> dict:
        """Timeline fields of one unit of a finished key (``run`` at least)."""
        return {"run": unit[0]}

    async def start(self, scheduler) -> None:
        self.scheduler = scheduler

    def update_graph(self, scheduler, *, tasks=(), **kwargs) -> None:
        self.scheduler = scheduler
        new = {key: units for key in tasks if (units := self.units_of(key))}
        if not new:
            return
        self.add(scheduler, new)
        for key, units in new.items():
            for u in units:
                self._keys.setdefault(u, []).append(key)
        for key, units in new.items():
            wait = set(self.hold(scheduler, key, units))
            if wait:
                self._held |= wait
                self._waiting.setdefault(key, set()).update(wait)
                if key not in self._real:
                    ts = scheduler.tasks[key]
                    self._real[key] = set(ts.worker_restrictions or ())
                    scheduler.set_restrictions({key: {PARKED}})

    def transition(self, key, start, finish, *args, **kwargs) -> None:
        if finish == "processing":
            units = self.units_of(key)
            if units:
                self._sent[key] = time.time()
                self.started(key, units, self._sent[key])
            return
        if start != "processing" or finish not in ("memory", "erred"):
            return
        units = self.units_of(key)
        if not units:
            return
        now = time.time()
        self._record(key, units, finish, kwargs, now)
        release = []
        for u in self.finish(key, units, finish, now):
            for k in self._keys.get(u, ()):
                left = self._waiting.get(k)
                if left is not None:
                    left.discard(u)
                    if not left:
                        del self._waiting[k]
                        release.append(k)
        if release:
            # never transition from inside transition(): a new stimulus on the loop
            self.scheduler.loop.add_callback(self._release, release)

    def _record(self, key, units, finish, kwargs, now) -> None:
        spans = [s for s in kwargs.get("startstops", ()) if s.get("action") == "compute"]
        sent = self._sent.pop(key, None)
        for u in units:
            self.rows.append({
                "key": key, **self.describe(key, u), "worker": kwargs.get("worker"),
                "start": spans[0]["start"] if spans else None,
                "stop": spans[0]["stop"] if spans else None,
                "sent": sent, "done": now, "held": u in self._held, "state": finish})

    def _release(self, keys) -> None:
        s = self.scheduler
        recs = {}
        for key in keys:
            real = self._real.pop(key, None)
            ts = s.tasks.get(key)
            if ts is None:
                continue
            s.set_restrictions({key: real or None})
            if ts.state == "no-worker":
                recs[key] = "processing"
        if recs:
            s.transitions(recs, stimulus_id=f"{self.name}-release-{time.time()}")

    def take(self, run: str) -> list[dict]:
        """The timeline rows of ``run``, and forget the run (its units and keys)."""
        out = [r for r in self.rows if r.get("run") == run]
        self.forget(run)
        return out

    def forget(self, run: str) -> None:
        """Drop what the engine knows of ``run`` (adapters also drop their policy's)."""
        self.rows = [r for r in self.rows if r.get("run") != run]
        for u in [u for u in self._keys if u[0] == run]:
            del self._keys[u]
            self._held.discard(u)


def install(client, plugin_class) -> None:
    """Register ``plugin_class()`` on the client's scheduler unless one is there."""
    name = plugin_class.name

    def has(dask_scheduler):
        return name in dask_scheduler.plugins

    if not client.run_on_scheduler(has):
        client.register_plugin(plugin_class(), name=name)


def call(client, name: str, method: str, *args):
    """Call ``method(*args)`` of the scheduler's plugin ``name`` (through the scheduler)."""
    def run(dask_scheduler, name=name, method=method, args=args):
        return getattr(dask_scheduler.plugins[name], method)(*args)

    return client.run_on_scheduler(run)


def take(client, name: str, run: str) -> list[dict]:
    """The timeline rows of ``run`` from plugin ``name`` (and forget the run)."""
    return call(client, name, "take", run)
