"""Settings a run puts on the cluster, made with one call to the workers and one to the
scheduler.

While a run is on, the frame unbatches the control messages (``_latency``), filters the
lost-data lines of its keys (``_quiet``) and bounds Dask's logs (``_logs``); afterwards it
puts the first two back. Each used to make its own ``client.run`` or
``run_on_scheduler``: seven calls when a run started and three when it ended, 1-2 ms
each on 2 busy cores. Seven trivial calls in a row took 7.6-8.1 ms, one of each kind
2.3-2.4 ms (measured, median of 30). A :class:`Setting` names the worker and scheduler
functions that turn it on and off; :func:`applied` turns several on with one call of
each kind and off the same way.

The calls never fail the run: a function that raises, or a worker that left, is left
out (its setting is then not restored there), as each setting did on its own.

Examples
--------
>>> from daskhpc.runtime._latency import LowLatency
>>> with applied(client, LowLatency(0.0)):                     # doctest: +SKIP
...     client.gather(futures)
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import inspect
from contextlib import contextmanager
from typing import Callable

__all__ = ["Calls", "Got", "Setting", "applied", "apply_once", "together"]


class Calls:
    """Functions to run on every worker (``fn(*args, dask_worker=...)``) and on the
    scheduler (``fn(*args, dask_scheduler=...)``), in the order given, sent together."""

    def __init__(self, client):
        self.client = client
        self.workers: list = []
        self.scheduler: list = []

    def on_workers(self, fn, *args) -> int:
        """Add a worker call; returns its index in :meth:`Got.workers`."""
        self.workers.append((fn, args))
        return len(self.workers) - 1

    def on_scheduler(self, fn, *args) -> int:
        """Add a scheduler call; returns its index in :meth:`Got.scheduler`."""
        self.scheduler.append((fn, args))
        return len(self.scheduler) - 1

    def send(self, workers: list | None = None) -> Got:
        """Make the calls (the worker ones on ``workers``, default all), the worker and the
        scheduler call at the same time (one round trip, not two in a row: 1-1.5 ms
        less a call, measured); never raises."""
        calls = {}
        if self.workers and (workers is None or workers):
            calls["workers"] = self.client.run(_on_worker, self.workers, workers=workers,
                                               on_error="return", asynchronous=True)
        if self.scheduler:
            calls["scheduler"] = self.client.run_on_scheduler(_on_scheduler, self.scheduler,
                                                              asynchronous=True)
        got: dict = {}
        if calls:
            try:
                got = dict(zip(calls, self.client.sync(together, list(calls.values()))))
            except Exception:  # noqa: BLE001 - a cluster going away: nothing was set
                for c in calls.values():
                    c.close()                  # (never awaited: no warning about it)
        by_worker, on_scheduler = got.get("workers"), got.get("scheduler")
        by_worker = by_worker if isinstance(by_worker, dict) else {}
        on_scheduler = on_scheduler if isinstance(on_scheduler, list) else []
        return Got({w: r for w, r in by_worker.items() if isinstance(r, list)}, on_scheduler)


async def together(coros: list) -> list:
    """Await ``coros`` at once (in the client's loop: ``client.sync(together, coros)``);
    one that raised reads as its exception."""
    return list(await asyncio.gather(*coros, return_exceptions=True))


class Got:
    """What :meth:`Calls.send` brought back; failed calls read as absent."""

    def __init__(self, by_worker: dict, on_scheduler: list):
        self.by_worker = by_worker
        self.on_scheduler = on_scheduler

    def workers(self, i: int) -> dict:
        """``{worker address: value}`` of worker call ``i`` where it succeeded."""
        return {w: r[i] for w, r in self.by_worker.items()
                if i < len(r) and not isinstance(r[i], _Failed)}

    def scheduler(self, i: int):
        """Value of scheduler call ``i``, None if it failed or was not made."""
        r = self.on_scheduler[i] if i < len(self.on_scheduler) else None
        return None if isinstance(r, _Failed) else r


class Setting(abc.ABC):
    """Something a run sets on the cluster: :meth:`on` adds the calls that set it,
    :meth:`off` (given what ``on``'s calls returned) the calls that undo it."""

    @abc.abstractmethod
    def on(self, calls: Calls) -> None:
        """Add the calls that turn it on."""

    def off(self, calls: Calls, got: Got) -> None:
        """Nothing to undo by default."""

    def closed(self, got: Got) -> None:
        """What the undoing calls returned (nothing to read by default)."""


@contextmanager
def applied(client, *settings: Setting, lost: Callable[[], bool] | None = None):
    """The body runs with ``settings`` on (one call of each kind to turn them on, one to
    turn them off; the worker calls that undo go to the workers still there that took
    the first ones: a call to a lost worker's address waits for the connect timeout).
    ``lost``: says whether the body saw workers leave; where it says no, the workers
    that took the first calls are taken as there (no round trip to the scheduler to
    ask, 2 ms at the end of every run)."""
    got = apply_once(client, *settings)
    try:
        yield got
    finally:
        calls = Calls(client)
        for s in reversed(settings):
            s.off(calls, got)
        workers = None
        if calls.workers:
            workers = list(got.by_worker) if lost is not None and not lost() else \
                _alive(client, got.by_worker)
        undone = calls.send(workers=workers)
        for s in settings:
            s.closed(undone)


def apply_once(client, *settings: Setting) -> Got:
    """Turn ``settings`` on (for good: nothing undoes them); what the calls returned."""
    calls = Calls(client)
    for s in settings:
        s.on(calls)
    return calls.send()


def _alive(client, workers) -> list:
    """Those of ``workers`` the scheduler still has (``_connect.worker_addresses``'s
    source: the client's cached view can be stale)."""
    try:
        now = client.sync(client.scheduler.identity, n_workers=-1)["workers"]
    except Exception:  # noqa: BLE001 - a cluster going away: nothing to restore
        return []
    return [w for w in workers if w in now]


class _Failed:
    """A call that raised (returned instead of the value: the other calls still run)."""

    def __init__(self, error: str):
        self.error = error

    def __repr__(self) -> str:
        return f"_Failed({self.error!r})"


async def _on_worker(calls: list, dask_worker=None) -> list:
    return await _each(calls, "dask_worker", dask_worker)


async def _on_scheduler(calls: list, dask_scheduler=None) -> list:
    return await _each(calls, "dask_scheduler", dask_scheduler)


async def _each(calls: list, name: str, server) -> list:
    """Run ``calls`` here, each given ``server`` by keyword ``name`` (as distributed
    does); every call's value, or :class:`_Failed`."""
    out = []
    for fn, args in calls:
        try:
            value = fn(*args, **{name: server})
            if inspect.isawaitable(value):
                value = await value
            out.append(value)
        except Exception as e:  # noqa: BLE001 - one setting's failure is its own
            out.append(_Failed(f"{type(e).__name__}: {e}"))
    return out
