"""The batch-admission scheduler plugin: :class:`BatchPolicy` on the kit's holding engine.

Tasks of a batch not yet admitted are parked (:class:`daskhpc.runtime.HoldingPlugin`);
when batch ``t``'s ``done`` task reaches memory, batch ``t + w`` is released.
"""

from __future__ import annotations

import time

from daskhpc.runtime import HoldingPlugin, call, install

from ._policy import BatchPolicy

PLUGIN_NAME = "daskhpc-batch-admission"
PRODUCT_STEP = "cblock"   # Merge-Fiber output: the batch's product is finished
DONE_STEP = "done"        # after every consumer task of the batch


def step_key(run: str, step: str, t: int, *rest) -> tuple:
    """The key of a task of batch ``t``: ``("spgemm-<run>-<step>", t, *rest)``."""
    return (f"spgemm-{run}-{step}", int(t), *rest)


def _parse(key):
    if not (isinstance(key, tuple) and len(key) >= 2 and isinstance(key[0], str)
            and key[0].startswith("spgemm-")):
        return None
    parts = key[0].split("-", 2)
    return (parts[1], parts[2], int(key[1])) if len(parts) == 3 else None


class BatchAdmission(HoldingPlugin):
    """Hold the tasks of batch ``t + w`` until batch ``t`` is consumed."""

    name = PLUGIN_NAME

    def __init__(self):
        super().__init__()
        self.policies: dict[str, BatchPolicy] = {}

    def register_run(self, run: str, nbatches: int, window: int, batches=None) -> None:
        self.policies[run] = BatchPolicy(nbatches, window, now=time.time(), batches=batches)

    def units_of(self, key):
        parsed = _parse(key)
        return None if parsed is None or parsed[0] not in self.policies else \
            [(parsed[0], parsed[2])]

    def hold(self, scheduler, key, units) -> list:
        return [u for u in units if not self.policies[u[0]].is_admitted(u[1])]

    def started(self, key, units, now) -> None:
        for run, t in units:
            self.policies[run].started(t, now)

    def finish(self, key, units, state, now) -> list:
        run, step, t = _parse(key)
        if state != "memory":
            return []
        if step == PRODUCT_STEP:
            self.policies[run].finished(t, now)
        elif step == DONE_STEP:
            return [(run, nxt) for nxt in self.policies[run].consumed(t, now)]
        return []

    def timeline(self, run: str) -> dict:
        pol = self.policies[run]
        return {"window": pol.window, "batches": pol.timeline(), "violations": pol.check()}

    def forget(self, run: str) -> None:
        super().forget(run)
        self.policies.pop(run, None)


def ensure_plugin(client) -> None:
    """Register the plugin on the client's scheduler unless it is there already."""
    install(client, BatchAdmission)


def register_run(client, run: str, nbatches: int, window: int, batches=None) -> None:
    """Tell the plugin about a run before its graph is submitted (``batches``: in order)."""
    call(client, PLUGIN_NAME, "register_run", run, nbatches, window,
         None if batches is None else [int(t) for t in batches])


def fetch_timeline(client, run: str, forget: bool = True) -> dict:
    """The run's batch timeline from the scheduler (and drop the run's state)."""
    out = call(client, PLUGIN_NAME, "timeline", run)
    if forget:
        call(client, PLUGIN_NAME, "forget", run)
    return out
