"""Dask's own log lines during a daskhpc run: those that are no news to a user kept off
stderr.

A LocalCluster's nannies and scheduler live in the client's process and log to
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
"""

from __future__ import annotations

import logging
import os
import sys

__all__ = ["quiet_dask_noise", "is_noise"]

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
