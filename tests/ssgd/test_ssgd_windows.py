"""Long SSGD runs: the attempt graph goes to the scheduler in windows of epochs,
so what the scheduler holds at once, and the largest graph the client sends, are bounded
by the window, not by the number of epochs (counted by a scheduler plugin, not timed),
and the result is still the serial reference's, bit for bit."""

from __future__ import annotations

import contextlib
import json

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
    # 60 epochs: the direct mode's window is a task per worker (its epochs' test errors
    # run inside it), and its whole run must still be far more than a window
    for epochs in (6, 60):
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
    short, long = seen[6], seen[60]
    total = sum(long["submitted"])
    assert len(long["submitted"]) >= 15                # one graph per window of 2 epochs
    # the largest graph sent is one window, whatever the run's length (a run sent whole:
    # 10 times the 6-epoch run's)
    assert max(long["submitted"]) <= max(short["submitted"])
    # held at once: the window running, the next one, and what it reads of the one before
    assert max(long["held"]) <= 3 * max(short["submitted"]) < total / 2


@pytest.mark.parametrize("per_task", [0, 1, 3])
def test_direct_tasks_span_the_units_per_task(client2, tmp_path, per_task):
    """Direct mode: a worker runs ``daskhpc.runtime.units-per-task`` epochs per task (0:
    the window), their test errors and checkpoints inside the task (no evaluation or
    checkpoint task), with the serial bits, test errors, a checkpoint file per part and
    epoch, and the planned messages (the test rows of H included)."""
    import dask
    from distributed import get_task_stream

    s = prepare(datasets.ratings(), 4, epochs=6, partition="random", strategy="hc",
                eval_every=1)
    with dask.config.set({"daskhpc.runtime.units-per-task": per_task}), \
            get_task_stream(client2) as ts:
        out = run_job(client2, ssgd_job(s, exchange="direct", checkpointing=True),
                      checkpoint=tmp_path, progress_bar=False)
    keys = [str(r["key"]) for r in ts.data]
    assert sum("ssgd-epoch-" in k for k in keys) == 2 * {0: 1, 1: 6, 3: 2}[per_task]
    assert not [k for k in keys if "ssgd-eval" in k or "ssgd-ckpt" in k]
    ser = run_serial(s)
    W, H = out.value
    assert np.array_equal(W, ser["W"]) and np.array_equal(H, ser["H"])
    assert [h["test_rmse"] for h in out.history] == [h["test_rmse"] for h in ser["history"]]
    # every epoch checkpointed (the newest steps are kept, each with all 4 parts)
    saved = json.loads((tmp_path / "manifest.json").read_text())["complete"]
    assert [c["step"] for c in saved] == list(range(1, 7))
    assert {len(list(d.glob("part-*.npz"))) for d in tmp_path.glob("step-*")} == {4}
    assert out.measured["inter_worker_messages"] == out.measured["planned_messages"]


def test_direct_windows_grow_to_their_cap_with_the_serial_bits(client2, monkeypatch):
    """Direct mode: each window after the first is twice as long, up to
    ``DIRECT_MAX_SUBEPOCHS`` (a window's end costs the workers a round trip to the
    client); a window the job sets stays fixed. The epochs' results are the serial
    reference's whichever way the run is cut."""
    from distributed import get_task_stream

    from daskhpc.ssgd import _job

    monkeypatch.setattr(_job, "DIRECT_SUBEPOCHS", 16)       # K = 2: 8 epochs first
    monkeypatch.setattr(_job, "DIRECT_MAX_SUBEPOCHS", 64)   # at most 32 epochs
    s = prepare(datasets.ratings(), 2, epochs=60, partition="random", strategy="dsgd",
                eval_every=0, test_fraction=0)
    ser = run_serial(s)
    ends = {}
    for window in (None, 8):
        with get_task_stream(client2) as ts:
            out = run_job(client2, ssgd_job(s, exchange="direct", window=window),
                          progress_bar=False)
        ends[window] = sorted({r["key"][-1] for r in ts.data
                               if str(r["key"][0]).startswith("ssgd-epoch-")})
        W, H = out.value
        assert np.array_equal(W, ser["W"]) and np.array_equal(H, ser["H"])
        assert [h["train_loss"] for h in out.history] == \
            [h["train_loss"] for h in ser["history"]]
    assert ends[None] == [7, 23, 55, 59]                    # 8, 16, 32, then the rest
    assert ends[8] == list(range(7, 60, 8)) + [59]
