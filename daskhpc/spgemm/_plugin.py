"""Thin scheduler plugin that applies :class:`BatchPolicy` to a BatchedSumma3D graph.

The whole graph (all b batches) is submitted at once. Keys are tuples
``("spgemm-<run>-<step>", t, ...)`` with the batch ``t`` second. In
``update_graph`` the plugin parks every task of a batch the policy has not
admitted: it swaps its worker restriction for an address no worker has, so the
task waits in ``no-worker`` (DASK_NOTES, "Holding tasks back"). When the
``done`` task of batch ``t`` (it runs after every consumer task of the batch)
reaches memory, the policy admits batch ``t + w``; from a new stimulus
(``scheduler.loop.add_callback``) the plugin restores the real restrictions and
moves the parked tasks to ``processing``.

The batch timeline is ``scheduler.plugins["daskhpc-batch-admission"].timeline(run)``
(for the dashboard) or :func:`fetch_timeline` from a client.

.. warning::
   Relies on ``TaskState.worker_restrictions``, ``Scheduler.set_restrictions``
   and ``Scheduler.transitions`` of ``distributed`` 2026.8. Parked tasks show as
   ``no-worker`` on the dashboard; ``distributed.scheduler.no-workers-timeout``
   must stay unset.
"""

from __future__ import annotations

import time

from distributed.diagnostics.plugin import SchedulerPlugin

from daskhpc.spgemm._policy import BatchPolicy

__all__ = ["BatchAdmission", "PLUGIN_NAME", "ensure_plugin", "register_run",
           "fetch_timeline", "step_key", "PARKED"]

PLUGIN_NAME = "daskhpc-batch-admission"
#: An address no worker can have: tasks restricted to it wait in no-worker.
PARKED = "tcp://daskhpc-parked.invalid:1"
PRODUCT_STEP = "cblock"   # Merge-Fiber output: the batch's product is finished
DONE_STEP = "done"        # after every consumer task of the batch


def step_key(run: str, step: str, t: int, *rest) -> tuple:
    """The key of a task of batch ``t``: ``("spgemm-<run>-<step>", t, *rest)``."""
    return (f"spgemm-{run}-{step}", int(t), *rest)


def _parse(key) -> tuple[str, str, int] | None:
    if not (isinstance(key, tuple) and len(key) >= 2 and isinstance(key[0], str)
            and key[0].startswith("spgemm-")):
        return None
    parts = key[0].split("-", 2)
    if len(parts) != 3:
        return None
    return parts[1], parts[2], int(key[1])


class BatchAdmission(SchedulerPlugin):
    """Hold the tasks of batch ``t + w`` until batch ``t`` is consumed.

    Examples
    --------
    >>> client.register_plugin(BatchAdmission())            # doctest: +SKIP
    >>> register_run(client, "ab12", nbatches=4, window=1)  # doctest: +SKIP
    """

    name = PLUGIN_NAME

    def __init__(self):
        self.policies: dict[str, BatchPolicy] = {}
        self._held: dict[str, dict[int, dict]] = {}

    async def start(self, scheduler) -> None:
        self.scheduler = scheduler

    # -- called through client.run_on_scheduler ---------------------------------
    def register_run(self, run: str, nbatches: int, window: int, batches=None) -> None:
        self.policies[run] = BatchPolicy(nbatches, window, now=time.time(), batches=batches)
        self._held[run] = {}

    def timeline(self, run: str) -> dict:
        pol = self.policies[run]
        return {"window": pol.window, "batches": pol.timeline(), "violations": pol.check()}

    def forget(self, run: str) -> None:
        self.policies.pop(run, None)
        self._held.pop(run, None)

    # -- scheduler hooks -----------------------------------------------------------
    def update_graph(self, scheduler, *, tasks=(), **kwargs) -> None:
        for key in tasks:
            parsed = _parse(key)
            if parsed is None or parsed[0] not in self.policies:
                continue
            run, _, t = parsed
            if self.policies[run].is_admitted(t):
                continue
            ts = scheduler.tasks[key]
            self._held[run].setdefault(t, {})[key] = ts.worker_restrictions
            ts.worker_restrictions = {PARKED}

    def transition(self, key, start, finish, *args, **kwargs) -> None:
        parsed = _parse(key)
        if parsed is None or parsed[0] not in self.policies:
            return
        run, step, t = parsed
        pol, now = self.policies[run], time.time()
        if finish == "processing":
            pol.started(t, now)
        elif finish == "memory" and step == PRODUCT_STEP:
            pol.finished(t, now)
        elif finish == "memory" and step == DONE_STEP:
            for nxt in pol.consumed(t, now):
                # never transition from inside transition(): a new stimulus
                self.scheduler.loop.add_callback(self._release, run, nxt)

    def _release(self, run: str, t: int) -> None:
        held = self._held.get(run, {}).pop(t, {})
        tasks = self.scheduler.tasks
        alive = {k: r for k, r in held.items() if k in tasks}
        self.scheduler.set_restrictions(alive)
        recs = {k: "processing" for k in alive if tasks[k].state == "no-worker"}
        self.scheduler.transitions(recs, stimulus_id=f"daskhpc-admit-{run}-{t}-{time.time()}")


# -- client side ---------------------------------------------------------------------

def ensure_plugin(client) -> None:
    """Register the plugin on the client's scheduler unless it is there already."""
    def has(dask_scheduler):
        return PLUGIN_NAME in dask_scheduler.plugins

    if not client.run_on_scheduler(has):
        client.register_plugin(BatchAdmission(), name=PLUGIN_NAME)


def register_run(client, run: str, nbatches: int, window: int, batches=None) -> None:
    """Tell the plugin about a run before its graph is submitted.

    ``batches``: the batch numbers the run's graph holds, in admission order
    (default all ``nbatches``); a run restarted after a lost worker holds only
    the batches whose results were lost, under a new ``run`` id.
    """
    order = None if batches is None else [int(t) for t in batches]

    def reg(dask_scheduler, run=run, nbatches=nbatches, window=window, order=order):
        dask_scheduler.plugins[PLUGIN_NAME].register_run(run, nbatches, window, order)

    client.run_on_scheduler(reg)


def fetch_timeline(client, run: str, forget: bool = True) -> dict:
    """The run's batch timeline from the scheduler (and drop the run's state)."""
    def get(dask_scheduler, run=run, forget=forget):
        plugin = dask_scheduler.plugins[PLUGIN_NAME]
        out = plugin.timeline(run)
        if forget:
            plugin.forget(run)
        return out

    return client.run_on_scheduler(get)
