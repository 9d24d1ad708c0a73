"""Full garbage collections kept off a run's path.

A collection of Python's oldest generation scans every tracked object of the process
(about 250,000 on the client after the imports of dask, distributed, numba and scipy);
one landed inside a short SSGD run and doubled its own cost (docs/benchmarks.md). While a
run is on, the objects that existed when it started are frozen (:func:`gc.freeze`):
collections then scan only what the run made. When the last run of the process ends
they are put back (:func:`gc.unfreeze`), and the next full collection frees whatever of
them became garbage meanwhile: nothing is kept for good. Runs may overlap (threads, or
several clients of one cluster): the objects are frozen by the first and put back by
the last.

:func:`frozen` is the client's; :class:`FrozenHeap`, a run setting (``_calls``), does the
same on the workers and the scheduler in the run's settings calls.
"""

from __future__ import annotations

import gc
import threading
from contextlib import contextmanager

from daskhpc.runtime._calls import Setting

__all__ = ["frozen", "FrozenHeap"]

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
    """The body runs with the process's objects of now frozen (module docstring)."""
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
