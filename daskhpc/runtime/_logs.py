"""Dask's own logs during a daskhpc run: the lines that are no news to a user kept off
stderr, and the run-long logs kept at their usual length.

*Noise.* A LocalCluster's nannies and scheduler live in the client's process and log to
its stderr through ``distributed``'s handler (also on the ``bokeh`` and ``tornado``
loggers), its workers from their own processes (the worker preload :func:`dask_setup`
filters there). Some of those lines say nothing the user can act on: a nanny killing a
worker that took more than its few seconds to close at the end of a run ("Worker process
still alive after 4.0 seconds, killing"), a worker's heartbeat that met the scheduler
closing the cluster, bokeh's ``AssertionError`` tracebacks when a
dashboard tab is closed mid-update, and the ``NameError`` traceback of
``distributed.utils.sync`` when a Ctrl-C comes before its coroutine started (a race of
distributed 2026.8, seen under load). :func:`quiet_dask_noise` drops exactly those from
the handlers unless ``--debug`` (or ``DASKHPC_DEBUG``) is given; every other record
passes.

*Length.* ``connect()`` raises ``distributed.admin.low-level-log-length`` to 100,000 so
that the workers' transfer logs hold a long run's messages (:class:`TransferLedger`).
The same setting sizes the scheduler's transition log, every event topic, each worker's
state machine and stimulus logs (every task's spec), and the ``recent_message_log`` of
every batched stream (scheduler to each worker and client, client to scheduler, worker
to scheduler), which keeps every message sent: over a long SSGD run they grew the client
(where a LocalCluster's scheduler lives) and the workers by 50-110 kB per epoch, for
hundreds of MB before they wrapped. :func:`bound_logs` shortens those (not the transfer
logs) on the cluster the run uses: logs of small records to ``KEEP`` entries, logs of
whole messages to ``KEEP_MESSAGES``.

.. warning::
   Reads and replaces ``Scheduler.transition_log``, ``Scheduler._broker._topics``,
   ``BatchedSend.recent_message_log``, ``WorkerState.log``/``stimulus_log`` and
   ``Worker.profile_*history`` of distributed 2026.8 (private attributes).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import sys
from collections import deque

from daskhpc.runtime._calls import Setting, apply_once

__all__ = ["quiet_dask_noise", "is_noise", "bound_logs", "BoundLogs", "bound_topic", "KEEP",
           "KEEP_MESSAGES"]

#: The loggers whose handlers (one shared StreamHandler) ``distributed`` sets up.
LOGGERS = ("distributed", "bokeh", "tornado")


def is_noise(record: logging.LogRecord) -> bool:
    """Whether ``record`` is one of the known messages that mean nothing to a user."""
    if record.name == "distributed.nanny" and "still alive after" in str(record.msg):
        return True
    exc = record.exc_info[1] if record.exc_info else None
    if record.name.startswith(("bokeh", "tornado")) and isinstance(exc, AssertionError):
        return True     # a closed dashboard tab: bokeh asserts on a document that is gone
    if (record.name == "distributed.worker" and type(exc).__name__ == "CommClosedError"
            and str(record.msg).startswith("Failed to communicate with scheduler")):
        # a LocalCluster's worker whose heartbeat met its scheduler closing the comm at
        # the cluster's close (a race of distributed 2026.8, seen under load): that
        # scheduler lives in the client's process, so its comm closes only at the end
        return True
    # distributed.utils.sync (2026.8): a Ctrl-C before its coroutine started makes the
    # loop's cancel() read an unbound 'future' (a race under load; nothing to cancel)
    return (record.name.startswith("tornado") and isinstance(exc, NameError)
            and "'future'" in str(exc))


class _Quiet(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not is_noise(record) or _debug()


_QUIET = _Quiet()


def _debug() -> bool:
    return bool(os.environ.get("DASKHPC_DEBUG")) or "--debug" in sys.argv


def quiet_dask_noise() -> None:
    """Add the filter to the handlers of Dask's loggers (once; idempotent)."""
    for name in LOGGERS:
        for handler in logging.getLogger(name).handlers:
            handler.addFilter(_QUIET)


def dask_setup(worker) -> None:  # noqa: ARG001 - the preload protocol passes the worker
    """Worker preload of a LocalCluster (``connect``): the filter in the worker's process."""
    quiet_dask_noise()


#: Entries kept (distributed's default ``low-level-log-length``).
KEEP = 1000
#: Whole messages kept in a stream's ``recent_message_log`` and events of a run's report
#: topic: each can be tens of kB (a compute-task message carries its task's spec), and
#: nothing reads them but a person debugging Dask.
KEEP_MESSAGES = 16


def _shorten(obj, name: str, n: int) -> None:
    d = getattr(obj, name, None)
    if isinstance(d, deque) and (d.maxlen is None or d.maxlen > n):
        setattr(obj, name, deque(list(d)[-n:], maxlen=n))


def _stream(bs, n: int) -> None:
    """A ``BatchedSend``'s ``recent_message_log``: every payload under 1 MB it sent (the
    scheduler's compute-task messages with their task specs, the client's graphs),
    ``low-level-log-length`` of them."""
    if bs is not None:
        _shorten(bs, "recent_message_log", min(n, KEEP_MESSAGES))


def _worker(n: int, dask_worker=None) -> bool:
    for name in ("log", "stimulus_log"):
        _shorten(dask_worker.state, name, n)
    for name in ("profile_keys_history", "profile_history"):
        _shorten(dask_worker, name, n)
    _stream(getattr(dask_worker, "batched_stream", None), n)
    return True


def _scheduler(n: int, dask_scheduler=None) -> bool:
    s = dask_scheduler
    _shorten(s, "transition_log", n)
    for streams in (s.stream_comms, s.client_comms):       # one per worker / client
        for bs in list(streams.values()):
            _stream(bs, n)
    broker = s._broker
    for topic in list(broker._topics.values()):
        _shorten(topic, "events", n)
    # topics made later (a new worker's, a run's reports) start short too
    make = broker._topics.default_factory
    if isinstance(make, functools.partial) and make.keywords.get("maxlen", n + 1) > n:
        broker._topics.default_factory = functools.partial(make.func, maxlen=n)
    return True


def _client(client, n: int) -> None:
    """The client's own stream to the scheduler (in this process, wherever the scheduler
    is), shortened on the client's event loop, where it is appended to."""
    client.loop.add_callback(_stream, getattr(client, "scheduler_comm", None), n)


def _topic(topic: str, n: int, dask_scheduler=None) -> bool:
    _shorten(dask_scheduler._broker._topics[topic], "events", n)
    return True


class BoundLogs(Setting):
    """Dask's logs on the cluster and in the client shortened to ``n`` entries
    (``KEEP_MESSAGES`` for logs of whole messages); for good, nothing to undo."""

    def __init__(self, n: int = KEEP):
        self.n = n

    def on(self, calls) -> None:
        calls.on_workers(_worker, self.n)
        calls.on_scheduler(_scheduler, self.n)
        with contextlib.suppress(Exception):
            _client(calls.client, self.n)


def bound_logs(client, n: int = KEEP) -> None:
    """Shorten the scheduler's and the workers' transition and stimulus logs and event
    topics to ``n`` entries, and the batched streams' message logs (the client's too) to
    ``KEEP_MESSAGES`` (workers and clients that join later are shortened at the next
    call). Never fails."""
    apply_once(client, BoundLogs(n))


def bound_topic(client, topic: str, n: int = KEEP_MESSAGES) -> None:
    """Keep only the last ``n`` events of ``topic`` on the scheduler (its subscribers
    get every event as it comes; the history is what grew). Never fails."""
    with contextlib.suppress(Exception):
        client.run_on_scheduler(_topic, topic, n)
