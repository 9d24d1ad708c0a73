"""Settings a run puts on the cluster: one call to the workers and one to the scheduler
turn them all on, one of each turns them off (docs/benchmarks.md). A call that raises,
or a worker that left, is left out: the calls never fail the run.
"""

from __future__ import annotations

import abc
import asyncio
import inspect
from typing import Callable


class Calls:
    """Functions to run on every worker (``fn(*args, dask_worker=...)``) and on the
    scheduler (``fn(*args, dask_scheduler=...)``), in order, sent together."""

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

    def send(self, workers: list | None = None, wait: bool = True) -> Got:
        """Make the calls (the worker ones on ``workers``, default all) at the same time;
        never raises. ``wait=False``: return at once, the :class:`Got` waits when first
        read."""
        calls = {}
        if self.workers and (workers is None or workers):
            calls["workers"] = self.client.run(_on_worker, self.workers, workers=workers,
                                               on_error="return", asynchronous=True)
        if self.scheduler:
            calls["scheduler"] = self.client.run_on_scheduler(_on_scheduler, self.scheduler,
                                                              asynchronous=True)
        if not calls:
            return Got({}, [])
        coros = list(calls.values())
        try:
            sent = asyncio.run_coroutine_threadsafe(together(coros),
                                                    self.client.loop.asyncio_loop)
        except Exception:  # noqa: BLE001 - the client's loop has closed: nothing was set
            for c in coros:
                c.close()                      # (never awaited: no warning about it)
            return Got({}, [])
        got = Got(lambda: _received(calls, sent))
        return got.wait() if wait else got


def _received(calls: dict, sent) -> tuple[dict, list]:
    """``(by_worker, on_scheduler)`` of :meth:`Calls.send`'s calls once they are back."""
    try:
        got = dict(zip(calls, sent.result()))
    except Exception:  # noqa: BLE001 - a cluster going away: nothing was set
        got = {}
    by_worker, on_scheduler = got.get("workers"), got.get("scheduler")
    by_worker = by_worker if isinstance(by_worker, dict) else {}
    on_scheduler = on_scheduler if isinstance(on_scheduler, list) else []
    return {w: r for w, r in by_worker.items() if isinstance(r, list)}, on_scheduler


async def together(coros: list) -> list:
    """Await ``coros`` at once; one that raised reads as its exception."""
    return list(await asyncio.gather(*coros, return_exceptions=True))


class Got:
    """What :meth:`Calls.send` brought back; failed calls read as absent. Made with a
    callable (calls on their way): called when first read."""

    def __init__(self, by_worker: dict | Callable, on_scheduler: list | None = None):
        self._later = by_worker if callable(by_worker) else None
        if self._later is None:
            self._by_worker, self._on_scheduler = by_worker, on_scheduler

    def wait(self) -> Got:
        """Wait for the calls (if they are on their way); returns self."""
        later, self._later = self._later, None
        if later is not None:
            self._by_worker, self._on_scheduler = later()
        return self

    @property
    def by_worker(self) -> dict:
        """``{worker address: [value of each worker call]}``."""
        return self.wait()._by_worker

    @property
    def on_scheduler(self) -> list:
        """``[value of each scheduler call]``."""
        return self.wait()._on_scheduler

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
    :meth:`off` those that undo it."""

    @abc.abstractmethod
    def on(self, calls: Calls) -> None:
        """Add the calls that turn it on."""

    def off(self, calls: Calls, got: Got) -> None:
        """Nothing to undo by default."""

    def closed(self, got: Got) -> None:
        """What the undoing calls returned (nothing to read by default)."""


class Applied:
    """``with Applied(client, *settings) as got:`` the body runs with ``settings`` on. The
    undoing calls go to the workers that took the first ones and are still there (``lost()``
    false: all of them, without asking the scheduler). ``wait=False``: the body starts while
    the calls are on their way; it may send the undoing calls itself (:meth:`undo_soon`)."""

    def __init__(self, client, *settings: Setting, lost: Callable[[], bool] | None = None,
                 wait: bool = True):
        self.client, self.settings, self.lost, self.wait = client, settings, lost, wait
        self.got: Got | None = None
        self._undone: Got | None = None

    def __enter__(self) -> Got:
        calls = Calls(self.client)
        for s in self.settings:
            s.on(calls)
        self.got = calls.send(wait=self.wait)
        return self.got

    def undo_soon(self) -> None:
        """Send the calls that undo the settings, without waiting for them (once)."""
        if self._undone is not None:
            return
        calls = Calls(self.client)
        for s in reversed(self.settings):
            s.off(calls, self.got)
        workers = None
        if calls.workers:
            workers = list(self.got.by_worker) if self.lost is not None and \
                not self.lost() else _alive(self.client, self.got.by_worker)
        self._undone = calls.send(workers=workers, wait=False)

    def __exit__(self, *exc) -> None:
        self.undo_soon()
        undone = self._undone.wait()
        for s in self.settings:
            s.closed(undone)


def _alive(client, workers) -> list:
    """Those of ``workers`` the scheduler still has."""
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
    """Run ``calls`` here, each given ``server`` by keyword ``name``; each value, or
    :class:`_Failed`."""
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
