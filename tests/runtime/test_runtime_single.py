"""One worker holds every part: the engine runs a window's steps in ONE task on it (no
exchange, no task per unit or step), reports and checkpoints every unit as before, says
so in the report, and gives the serial reference's bits (CP-ALS, GCN, the frame's toy)."""

from __future__ import annotations

import functools
import os
import signal

import numpy as np
import pytest
from distributed.diagnostics.plugin import SchedulerPlugin

import daskhpc as dh
from daskhpc.comm import run_local
from daskhpc.runtime import Job, run_job
from daskhpc.testing import toy_program, toy_row

LENGTH = 50


@pytest.fixture(scope="module")
def client1():
    from daskhpc.testing import validated_client

    with validated_client(1) as client:
        yield client


class Started(SchedulerPlugin):
    """Every task of a program run's steps the scheduler sent to a worker (keys
    ``(<program>-<token>, worker label, step, receiver)``)."""

    name = "test-runtime-single-started"

    def __init__(self):
        self.keys: list = []

    def transition(self, key, start, finish, *args, **kwargs):
        if finish == "processing" and isinstance(key, tuple) and len(key) == 4:
            self.keys.append(key)


def _started(dask_scheduler=None):
    return list(dask_scheduler.plugins[Started.name].keys)


def counted(client, fn):
    """``fn()`` and the step tasks the scheduler started while it ran."""
    client.register_plugin(Started(), name=Started.name)
    try:
        out = fn()
        return out, client.run_on_scheduler(_started)
    finally:
        client.unregister_scheduler_plugin(Started.name)


def toy_job(K, units, **kw):
    return Job("toy", K, units, row=toy_row, fingerprint={"K": K, "length": LENGTH},
               program=functools.partial(_prog, K, units, kw.pop("delay", 0.0)),
               statics=[LENGTH] * K, exchange="direct", **kw)


def _prog(K, units, delay, first_unit):
    return toy_program(K, units, length=LENGTH, first_unit=first_unit, delay=delay)


def _never(history) -> bool:
    return False


@pytest.mark.parametrize("K", [1, 3])
def test_one_task_per_window_not_per_unit(client1, K):
    # K = 3: the ring's messages go between parts of the one worker (the registry)
    units = 6
    out, keys = counted(client1, lambda: run_job(client1, toy_job(K, units),
                                                 progress_bar=False))
    finals, reports = run_local(toy_program(K, units, length=LENGTH), [LENGTH] * K)
    assert all(np.array_equal(a, b) for a, b in zip(out.value, finals))
    assert [(r["norm"], r["first"]) for r in out.history] == \
        [(toy_row(u, r)["norm"], toy_row(u, r)["first"]) for u, r in enumerate(reports)]
    assert [r["unit"] for r in out.history] == list(range(units))
    # all units at once: one task for the whole run's steps (it was one per unit)
    assert len(keys) == 1, keys
    assert out.measured["inter_worker_bytes"] == 0
    assert out.execution["single_worker"] is True and out.execution["in_loop"] is False


def test_a_stop_rule_still_goes_one_unit_per_task(client1):
    out, keys = counted(client1, lambda: run_job(
        client1, toy_job(2, 4, stop=lambda h: len(h) >= 3), progress_bar=False))
    assert [r["unit"] for r in out.history] == [0, 1, 2]
    assert len(keys) == 3, keys
    finals, _ = run_local(toy_program(2, 3, length=LENGTH), [LENGTH] * 2)
    assert all(np.array_equal(a, b) for a, b in zip(out.value, finals))


def test_graph_exchange_stays_the_per_step_reference(client1):
    job = toy_job(1, 3)
    job.exchange = "graph"
    out, keys = counted(client1, lambda: run_job(client1, job, progress_bar=False))
    assert len(keys) == job.program(0).nsteps and out.execution["single_worker"] is False


def test_every_unit_checkpointed_and_reported_in_order(client1, tmp_path):
    rows: list = []
    out = run_job(client1, toy_job(2, 8), checkpoint=tmp_path, callback=rows.append,
                  progress_bar=False)
    assert [r["unit"] for r in rows] == list(range(8))
    assert out.recovery["saved"] == 8
    for p in range(2):             # the last unit's state, written in the loop
        assert list(tmp_path.glob(f"**/step-000008/part-{p}.npz")), p


def test_cpals_one_worker_is_the_serial_reference(client1):
    X = dh.datasets.tensor()
    res, keys = counted(client1, lambda: dh.cpals.fit(
        X, 4, 1, iters=5, tol=0.0, client=client1, check_serial=True, progress=False))
    rep = res.report()
    assert rep["serial_check"]["identical"] is True
    assert rep["serial_check"]["plain_serial"]["within_tolerance"] is True
    assert len(keys) == 1, keys                     # was one per iteration: 5
    assert rep["execution"]["single_worker"] is True
    assert rep["measured"]["inter_worker_bytes"] == 0
    assert "one worker: steps run in one loop, no exchange" in res.summary()


@pytest.mark.slow           # the textbook check trains GCN twice more in the client
def test_gcn_one_worker_is_the_serial_reference(client1):
    res, keys = counted(client1, lambda: dh.gcn.fit(
        "cora", nparts=1, client=client1, epochs=3, check_serial=True, progress=False))
    rep = res.report()
    assert rep["serial_check"]["identical"] is True and \
        rep["serial_check"]["max_abs_diff"] == 0.0
    assert len(keys) == 1, keys
    assert rep["execution"]["single_worker"] is True
    assert rep["measured"]["inter_worker_bytes"] == 0


@pytest.mark.slow
def test_a_killed_worker_restarts_from_the_newest_checkpoint(make_client, tmp_path):
    # the worker dies in the middle of the one task that runs every unit: the run
    # starts again after the last unit the client was told was checkpointed
    client = make_client(1)
    [pid] = client.run(os.getpid).values()
    killed: list = []

    def kill(row):
        if row["unit"] == 3 and not killed:
            killed.append(row["unit"])
            os.kill(pid, signal.SIGKILL)

    units = 12
    out = run_job(client, toy_job(2, units, delay=0.05), checkpoint=tmp_path,
                  callback=kill, progress_bar=False)
    [rec] = out.recovery["recoveries"]
    assert rec["restart"] >= 4 and out.execution["single_worker"] is True
    finals, reports = run_local(toy_program(2, units, length=LENGTH), [LENGTH] * 2)
    assert all(np.array_equal(a, b) for a, b in zip(out.value, finals))
    assert [r["norm"] for r in out.history] == [toy_row(u, r)["norm"]
                                                for u, r in enumerate(reports)]


def _nan_at_2(u, rep):
    return {**toy_row(u, rep), "loss": float("nan") if u == 2 else 0.5}


def _executing(dask_worker=None) -> int:
    return sum(1 for ts in dask_worker.state.tasks.values()
               if ts.state in ("executing", "cancelled", "long-running"))


@pytest.mark.slow
def test_a_diverged_run_stops_the_one_task_at_the_next_unit(client1, tmp_path):
    import time

    from daskhpc.runtime import Diverged

    # one task holds all 400 units (4 s of sleeps at least): the run stops at unit 2, and
    # the task at its next unit instead of running to the last one (which would write
    # the last unit's checkpoint)
    job = toy_job(2, 400, delay=0.01)
    job.row = _nan_at_2
    seen: list = []
    with pytest.raises(Diverged):
        run_job(client1, job, callback=seen.append, checkpoint=tmp_path,
                progress_bar=False)
    assert [r["unit"] for r in seen] == [0, 1]
    deadline = time.monotonic() + 120
    while sum(client1.run(_executing).values()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sum(client1.run(_executing).values()) == 0
    assert not list(tmp_path.glob("**/step-000400"))
    assert run_job(client1, toy_job(1, 2), progress_bar=False).history[-1]["unit"] == 1
