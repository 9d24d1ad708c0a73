"""Dask's log lines that are no news to a user kept off stderr (unless ``--debug`` or
``DASKHPC_DEBUG``): in the client's process (a LocalCluster's nannies and scheduler) and,
through the worker preload :func:`dask_setup`, in its workers."""

from __future__ import annotations

import logging
import os
import sys

#: The loggers whose handlers (one shared StreamHandler) ``distributed`` sets up.
LOGGERS = ("distributed", "bokeh", "tornado")


def is_noise(record: logging.LogRecord) -> bool:
    """Whether ``record`` is one of the known messages that mean nothing to a user: a nanny
    killing a slow-closing worker, bokeh's assertions on a closed tab, a heartbeat meeting
    the closing scheduler, ``sync``'s NameError on an early Ctrl-C."""
    if record.name == "distributed.nanny" and "still alive after" in str(record.msg):
        return True
    exc = record.exc_info[1] if record.exc_info else None
    if record.name.startswith(("bokeh", "tornado")) and isinstance(exc, AssertionError):
        return True     # a closed dashboard tab: bokeh asserts on a document that is gone
    if (record.name == "distributed.worker" and type(exc).__name__ == "CommClosedError"
            and str(record.msg).startswith("Failed to communicate with scheduler")):
        # a race of distributed 2026.8 at the cluster's close, seen under load
        return True
    # distributed.utils.sync (2026.8): a Ctrl-C before its coroutine started
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
    """Worker preload of a LocalCluster: the filter in the worker's process."""
    quiet_dask_noise()
