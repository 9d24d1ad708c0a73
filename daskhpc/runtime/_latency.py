"""Shorter batching of Dask's control messages (5 ms scheduler to worker, 2 ms back, 10 ms
from the client, hard-coded in ``distributed``) while a latency-bound run is in flight.
"""

from __future__ import annotations

from daskhpc._dask_internals import client_stream, scheduler_streams, worker_stream
from daskhpc.runtime._calls import Applied, Setting


def _scheduler(interval, client_id, previous=None, dask_scheduler=None):
    """The scheduler's streams to the workers and to ``client_id`` at ``interval``, or back
    at ``previous``."""
    old = {}
    for addr, bs in scheduler_streams(dask_scheduler, client_id).items():
        old[addr] = bs.interval
        bs.interval = previous.get(addr, bs.interval) if previous is not None else interval
    return old


def _worker(interval, dask_worker=None):
    bs = worker_stream(dask_worker)
    old, bs.interval = bs.interval, interval
    return old


def _restore(old: dict, dask_worker=None):
    """Put back this worker's interval from ``{address: interval}``."""
    if dask_worker.address in old:
        worker_stream(dask_worker).interval = old[dask_worker.address]


class LowLatency(Setting):
    """The batching intervals at ``interval`` s while a run is on."""

    def __init__(self, interval: float = 0.0):
        self.interval = interval

    def on(self, calls) -> None:
        self._sched = calls.on_scheduler(_scheduler, self.interval, calls.client.id)
        self._work = calls.on_workers(_worker, self.interval)
        own = client_stream(calls.client)
        self._own = None if own is None else (own, own.interval)
        if own is not None:
            own.interval = self.interval

    def off(self, calls, got) -> None:
        if self._own is not None:
            stream, interval = self._own
            stream.interval = interval
            self._own = None
        old = got.scheduler(self._sched)
        if old is not None:
            calls.on_scheduler(_scheduler, None, calls.client.id, old)
        work_old = got.workers(self._work)
        if work_old:          # (Applied sends it to the workers still there)
            calls.on_workers(_restore, work_old)


def low_latency(client, interval: float = 0.0):
    """Run the body with the client <-> scheduler <-> worker batching intervals at
    ``interval`` s (more, smaller control messages are the price).

    Examples
    --------
    >>> with low_latency(client):                                   # doctest: +SKIP
    ...     client.gather(futures)
    """
    return Applied(client, LowLatency(interval))
