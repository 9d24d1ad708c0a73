"""This thread's allocations counted by tracemalloc, with the process's other event loops
paused: tracemalloc counts every thread, and an in-process scheduler's loop alone
allocates a few 100 kB a second (more under load), enough to fail a count of MBs."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import threading
import tracemalloc

#: How long a paused loop waits before it runs again, whatever the traced code does.
PAUSE_LIMIT = 60.0


@dataclasses.dataclass
class Traced:
    """What :func:`traced` counted: bytes still held at the end, and the peak."""

    held: int = 0
    peak: int = 0


def _other_loops() -> list[asyncio.AbstractEventLoop]:
    try:
        mine = asyncio.get_running_loop()
    except RuntimeError:
        mine = None
    # by type: isinstance on a dead weakref.proxy raises ReferenceError
    return [o for o in gc.get_objects() if issubclass(type(o), asyncio.AbstractEventLoop)
            and o.is_running() and o is not mine]


@contextlib.contextmanager
def traced():
    """Count this thread's allocations in the ``with`` block.

    Every other running event loop of the process (a LocalCluster's scheduler and
    nannies, a client's) runs a callback that blocks until the block ends, so the traced
    code must not wait on one of them (it would wait :data:`PAUSE_LIMIT` seconds).

    Examples
    --------
    >>> import numpy as np
    >>> with traced() as t:
    ...     a = np.ones(1_000_000)
    >>> t.held >= a.nbytes
    True
    """
    release = threading.Event()
    paused = []
    for loop in _other_loops():
        started = threading.Event()

        def hold(started=started):
            started.set()
            release.wait(PAUSE_LIMIT)

        with contextlib.suppress(RuntimeError):      # closed since it was listed
            loop.call_soon_threadsafe(hold)
            paused.append(started)
    out = Traced()
    try:
        for started in paused:
            if not started.wait(PAUSE_LIMIT):
                raise RuntimeError(f"an event loop did not pause in {PAUSE_LIMIT:g} s")
        tracemalloc.start()
        try:
            yield out
            out.held, out.peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    finally:
        release.set()
