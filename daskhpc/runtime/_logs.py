"""Keep Dask's own logs at their usual length during a run: memory flat over long runs.

``connect()`` raises ``distributed.admin.low-level-log-length`` to 100,000 so that the
workers' transfer logs hold a long run's messages (:class:`TransferLedger`). The same
setting sizes the scheduler's transition log, every event topic, and each worker's state
machine and stimulus logs, which hold every task's spec: over a 2,000-epoch SSGD run
they grew the client (where a LocalCluster's scheduler lives) and the workers by about
0.1-0.2 MB per epoch, for hundreds of MB before they wrapped. :func:`bound_logs` shortens
those (not the transfer logs) to ``KEEP`` entries, on the cluster the run uses.

.. warning::
   Reads and replaces ``Scheduler.transition_log``, ``WorkerState.log``/``stimulus_log``
   and ``Worker.profile_*history`` of distributed 2026.8 (private attributes).
"""

from __future__ import annotations

import contextlib
from collections import deque

__all__ = ["bound_logs", "bound_topic", "KEEP"]

#: Entries kept (distributed's default ``low-level-log-length``).
KEEP = 1000


def _shorten(obj, name: str, n: int) -> None:
    d = getattr(obj, name, None)
    if isinstance(d, deque) and (d.maxlen is None or d.maxlen > n):
        setattr(obj, name, deque(list(d)[-n:], maxlen=n))


def _worker(n: int, dask_worker=None) -> bool:
    for name in ("log", "stimulus_log"):
        _shorten(dask_worker.state, name, n)
    for name in ("profile_keys_history", "profile_history"):
        _shorten(dask_worker, name, n)
    return True


def _scheduler(n: int, dask_scheduler=None) -> bool:
    _shorten(dask_scheduler, "transition_log", n)
    return True


def _topic(topic: str, n: int, dask_scheduler=None) -> bool:
    _shorten(dask_scheduler._broker._topics[topic], "events", n)
    return True


def bound_logs(client, n: int = KEEP) -> None:
    """Shorten the scheduler's and the workers' transition and stimulus logs to ``n``
    entries (workers that join later are shortened at the next call). Never fails."""
    with contextlib.suppress(Exception):
        client.run(_worker, n)
    with contextlib.suppress(Exception):
        client.run_on_scheduler(_scheduler, n)


def bound_topic(client, topic: str, n: int = KEEP) -> None:
    """Keep only the last ``n`` events of ``topic`` on the scheduler (its subscribers
    get every event as it comes; the history is what grew). Never fails."""
    with contextlib.suppress(Exception):
        client.run_on_scheduler(_topic, topic, n)
