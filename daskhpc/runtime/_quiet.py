"""A lost worker's data is an expected event of a recovery: while a run is on, :class:`Quiet`
drops the scheduler's "caused the cluster to lose" lines when every key is the run's.
"""

from __future__ import annotations

import ast
import logging
import threading
from collections import deque

from daskhpc.runtime._calls import Setting

#: The scheduler's logger (``distributed.scheduler``, distributed 2026.8).
LOGGER = "distributed.scheduler"
#: What the two lines of ``Scheduler.remove_worker`` say.
LOST = "caused the cluster to lose"


class RecoveryFilter(logging.Filter):
    """Drops the scheduler's lost-data lines about the keys of the runs in ``runs``."""

    def __init__(self):
        super().__init__()
        self.runs: dict[str, int] = {}        # run id -> runs of that id on
        self.dropped: deque = deque(maxlen=100)
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.runs:
            return True
        msg = record.getMessage()
        if LOST not in msg:
            return True
        keys = _keys(msg)
        with self._lock:
            runs = list(self.runs)
        if keys and all(any(r in str(k) for r in runs) for k in keys):
            self.dropped.append(msg)
            return False
        return True


def _keys(msg: str):
    """The key set a lost-data line names (None if it cannot be read)."""
    i, j = msg.find("{"), msg.rfind("} (stimulus_id")
    if i < 0 or j < i:
        return None
    try:
        keys = ast.literal_eval(msg[i:j + 1])
    except (ValueError, SyntaxError):
        return None
    return keys if isinstance(keys, (set, frozenset)) else None


FILTER = RecoveryFilter()


def _quiet(runs: tuple, dask_scheduler=None) -> bool:
    with FILTER._lock:
        for run in runs:
            FILTER.runs[run] = FILTER.runs.get(run, 0) + 1
    logger = logging.getLogger(LOGGER)
    if FILTER not in logger.filters:
        logger.addFilter(FILTER)
    return True


def _loud(runs: tuple, dask_scheduler=None) -> list:
    with FILTER._lock:
        for run in runs:
            n = FILTER.runs.get(run, 0) - 1
            if n > 0:
                FILTER.runs[run] = n
            else:
                FILTER.runs.pop(run, None)
        empty = not FILTER.runs
    if empty:
        logging.getLogger(LOGGER).removeFilter(FILTER)
    return [m for m in FILTER.dropped if any(run in m for run in runs)]


class Quiet(Setting):
    """The filter on for the keys of ``runs`` (run ids in every key of a run) while a run is
    on."""

    def __init__(self, runs):
        self.runs = tuple(dict.fromkeys(runs))

    def on(self, calls) -> None:
        calls.on_scheduler(_quiet, self.runs)

    def off(self, calls, got) -> None:
        calls.on_scheduler(_loud, self.runs)
