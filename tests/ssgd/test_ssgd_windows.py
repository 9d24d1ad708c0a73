"""Long SSGD runs (issue 22): the attempt graph goes to the scheduler in windows of epochs,
so what the scheduler holds at once, and the largest graph the client sends, are bounded
by the window, not by the number of epochs (counted by a scheduler plugin, not timed),
and the result is still the serial reference's, bit for bit."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from distributed.diagnostics.plugin import SchedulerPlugin

from daskhpc import datasets
from daskhpc.runtime import run_job
from daskhpc.ssgd._job import ssgd_job
from daskhpc.ssgd._serial import run_serial
from daskhpc.ssgd._setup import prepare


class GraphSizes(SchedulerPlugin):
    """Per graph the client submits: its SSGD tasks, and the SSGD tasks the scheduler
    holds once it is in."""

    name = "test-ssgd-graph-sizes"

    def __init__(self):
        self.submitted: list[int] = []
        self.held: list[int] = []

    def update_graph(self, scheduler, *, tasks=(), **kwargs):
        self.submitted.append(sum(1 for k in tasks if _ours(k)))
        self.held.append(sum(1 for k in scheduler.tasks if _ours(k)))


def _ours(key) -> bool:
    return isinstance(key, tuple) and str(key[0]).startswith("ssgd-")


def _read(dask_scheduler=None):
    p = dask_scheduler.plugins[GraphSizes.name]
    return {"submitted": p.submitted, "held": p.held}


@contextlib.contextmanager
def counting(client):
    client.register_plugin(GraphSizes(), name=GraphSizes.name)
    got: dict = {}
    try:
        yield got
        got.update(client.run_on_scheduler(_read))
    finally:
        client.unregister_scheduler_plugin(GraphSizes.name)


@pytest.mark.parametrize("exchange", ["direct", "graph"])
def test_the_scheduler_holds_a_window_of_epochs_not_the_run(client2, exchange):
    seen = {}
    for epochs in (6, 30):
        s = prepare(datasets.ratings(), 4, epochs=epochs, partition="random",
                    strategy="hc", eval_every=1)
        with counting(client2) as got:
            out = run_job(client2, ssgd_job(s, exchange=exchange, window=2),
                          progress_bar=False)
        seen[epochs] = got
        ser = run_serial(s)
        W, H = out.value
        assert np.array_equal(W, ser["W"]) and np.array_equal(H, ser["H"])
        assert [h["test_rmse"] for h in out.history] == \
            [h["test_rmse"] for h in ser["history"]]
    short, long = seen[6], seen[30]
    total = sum(long["submitted"])
    assert len(long["submitted"]) >= 15                # one graph per window of 2 epochs
    # the largest graph sent is one window, whatever the run's length (a run sent whole:
    # 5 times the 6-epoch run's)
    assert max(long["submitted"]) <= max(short["submitted"])
    # held at once: the window running, the next one, and what it reads of the one before
    assert max(long["held"]) <= 3 * max(short["submitted"]) < total / 2
