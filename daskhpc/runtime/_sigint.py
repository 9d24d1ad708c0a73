"""Worker preload: leave Ctrl-C to the client.

A Ctrl-C in a terminal sends SIGINT to every process of the foreground group, the worker
processes a LocalCluster spawned included. Each would die printing its own traceback
(~70 lines for two workers), and the client would see lost workers and try to recover
instead of stopping. Workers ignore SIGINT; the client process gets KeyboardInterrupt,
closes the cluster (its nannies stop the workers) and exits 130.
"""

from __future__ import annotations

import signal
import threading


def dask_setup(worker) -> None:  # noqa: ARG001 - the preload protocol passes the worker
    """Ignore SIGINT in this worker process (a signal handler needs the main thread)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
