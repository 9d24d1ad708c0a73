"""Full garbage collections kept off a run's path: while runs are on, the objects that
existed when the first started are frozen (:func:`gc.freeze`; a full collection inside a
short SSGD run doubled its cost, docs/benchmarks.md).
"""

from __future__ import annotations

import gc
import threading
from contextlib import contextmanager

from daskhpc.runtime._calls import Setting

_lock = threading.Lock()
_runs = 0           # runs of this process that are on


def _freeze(**_server) -> None:
    global _runs
    with _lock:
        if _runs == 0:
            gc.freeze()
        _runs += 1


def _unfreeze(**_server) -> None:
    global _runs
    with _lock:
        if _runs == 0:
            return
        _runs -= 1
        if _runs == 0:
            gc.unfreeze()


@contextmanager
def frozen():
    """The body runs with the process's objects of now frozen."""
    _freeze()
    try:
        yield
    finally:
        _unfreeze()


class FrozenHeap(Setting):
    """The workers' and the scheduler's objects frozen while a run is on."""

    def on(self, calls) -> None:
        calls.on_workers(_freeze)
        calls.on_scheduler(_freeze)

    def off(self, calls, got) -> None:
        calls.on_workers(_unfreeze)
        calls.on_scheduler(_unfreeze)
