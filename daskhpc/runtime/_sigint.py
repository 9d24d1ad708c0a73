"""Worker preload: leave Ctrl-C to the client.

A Ctrl-C in a terminal sends SIGINT to every process of the foreground group, the worker
processes a LocalCluster spawned included. Each would die printing its own traceback
(~70 lines for two workers), and the client would see lost workers and try to recover
instead of stopping. Workers keep running on SIGINT, with their logging silenced; the
client process gets KeyboardInterrupt, closes the cluster (its nannies stop the workers)
and exits 130.

Before the preload runs (a worker process spends seconds importing Dask), the workers are
protected by :func:`start_without_sigint`, which ``connect()`` starts a LocalCluster with.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading


def dask_setup(worker) -> None:  # noqa: ARG001 - the preload protocol passes the worker
    """Leave Ctrl-C to the client in this worker process (a signal handler needs the
    main thread): the worker keeps running, and stops logging."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _quiet)


def _quiet(signum, frame) -> None:  # noqa: ARG001 - a signal handler's signature
    # The user pressed Ctrl-C: the client ends the run and closes the cluster. What this
    # worker would log meanwhile ("Compute Failed" for a task that waited for a message
    # of the run that ended, seen under load) is no news; the handler runs before any
    # of that, as the client reacts only after the same Ctrl-C.
    import logging

    logging.getLogger("distributed").setLevel(logging.CRITICAL + 1)


def start_without_sigint(start, close):
    """``start()`` (a LocalCluster's start-up) with Ctrl-C held back until it returns.

    The worker processes it spawns are born with SIGINT ignored (the one signal state a
    new program inherits; a two-line shell wrapper of the interpreter sets it), so a
    Ctrl-C while they import Dask is no traceback in each. In this process a Ctrl-C
    meanwhile is only recorded; once ``start`` returned, ``close(started)`` runs and
    KeyboardInterrupt is raised: nothing is left half started for ``atexit`` to trip
    over. Outside the main thread (where signals cannot be handled) ``start()`` runs
    as it is.
    """
    if threading.current_thread() is not threading.main_thread():
        return start()
    from multiprocessing import spawn

    came = []
    handler = signal.signal(signal.SIGINT, lambda *_: came.append(True))
    exe = spawn.get_executable()
    wrapper = _ignoring_interpreter(exe)
    if wrapper:
        spawn.set_executable(wrapper)
    try:
        started = start()
    finally:
        spawn.set_executable(exe)
        signal.signal(signal.SIGINT, signal.SIG_DFL if handler is None else handler)
        if came and sys.exc_info()[0] is not None:
            raise KeyboardInterrupt
    if came:
        close(started)
        raise KeyboardInterrupt
    return started


def _ignoring_interpreter(exe) -> str | None:
    """A shell script that runs ``exe`` with SIGINT ignored (None where none can run)."""
    if os.name != "posix" or not exe or not os.path.exists("/bin/sh"):
        return None
    exe = os.fsdecode(exe)
    import hashlib
    import shlex
    import tempfile

    folder = os.path.join(tempfile.gettempdir(), f"daskhpc-{os.getuid()}")
    key = hashlib.sha1(os.fsencode(exe)).hexdigest()[:12]
    path = os.path.join(folder, f"python-nosigint-{key}")
    text = f"#!/bin/sh\ntrap '' INT\nexec {shlex.quote(exe)} \"$@\"\n"
    with contextlib.suppress(OSError), open(path) as f:
        if f.read() == text and os.access(path, os.X_OK):
            return path
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        tmp = f"{path}.{os.getpid()}"
        with open(tmp, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o755)
        os.replace(tmp, path)
    except OSError:
        return None
    return path if os.access(path, os.X_OK) else None      # not on a noexec mount
