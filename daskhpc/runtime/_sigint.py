"""Worker preload: leave Ctrl-C to the client, which closes the cluster and exits 130
(each worker would die with a traceback, and the client try to recover).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading


def dask_setup(worker) -> None:  # noqa: ARG001 - the preload protocol passes the worker
    """Leave Ctrl-C to the client in this worker process (in the main thread)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _quiet)


def _quiet(signum, frame) -> None:  # noqa: ARG001 - a signal handler's signature
    # the client ends the run: what this worker would log meanwhile is no news
    import logging

    logging.getLogger("distributed").setLevel(logging.CRITICAL + 1)


def start_without_sigint(start, close):
    """``start()`` (a LocalCluster's start-up) with Ctrl-C held back until it returns.

    The worker processes are born with SIGINT ignored (through a shell wrapper of the
    interpreter), so a Ctrl-C while they import Dask prints nothing there. Here it is only
    recorded; once ``start`` returned, ``close(started)`` runs and KeyboardInterrupt is
    raised. Outside the main thread ``start()`` runs as it is.
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
