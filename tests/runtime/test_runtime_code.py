"""The steps' code goes to the workers pickled once (``_steps.Packed``): workers in other
processes get the code back (a step defined here, which only cloudpickle can send,
included) and the collector is on again after the unpickling; a cluster in the client's
process (``processes=False``, nothing pickled) runs the same code; both give the serial
reference's bits."""

from __future__ import annotations

import functools
import gc
import pickle

import numpy as np
import pytest
from distributed import Client, LocalCluster

from daskhpc.comm import Plan, Program, run_local
from daskhpc.runtime import Job, run_job
from daskhpc.runtime._steps import Packed, ProgramCode
from daskhpc.testing import toy_program, toy_row

LENGTH = 40


def _job(K, units, program=None):
    program = program or functools.partial(_toy, K, units)
    return Job("toy", K, units, row=toy_row, fingerprint={"K": K}, program=program,
               statics=[LENGTH] * K, exchange="direct")


def _toy(K, units, first_unit):
    return toy_program(K, units, length=LENGTH, first_unit=first_unit)


def test_packed_gives_the_code_back_and_the_collector_on():
    prog = toy_program(2, 3, length=LENGTH)
    code = ProgramCode(prog, {0: "w0", 1: "w1"}, None, None)
    assert gc.isenabled()
    back = pickle.loads(pickle.dumps(Packed(code)))
    assert gc.isenabled()
    assert isinstance(back, ProgramCode)
    assert [s[3] for s in back.steps] == [s[3] for s in code.steps]
    assert back.dests == code.dests and back.unit_of_step == code.unit_of_step


def test_in_process_cluster_runs_the_packed_code():
    # (a free port for the dashboard: 8787, Dask's default, may be another run's)
    with LocalCluster(n_workers=2, processes=False, threads_per_worker=1,
                      dashboard_address="127.0.0.1:0") as cluster, Client(cluster) as client:
        out = run_job(client, _job(2, 3), progress_bar=False)
    finals, reports = run_local(toy_program(2, 3, length=LENGTH), [LENGTH] * 2)
    assert all(np.array_equal(a, b) for a, b in zip(out.value, finals))
    assert [r["norm"] for r in out.history] == [toy_row(u, r)["norm"]
                                                for u, r in enumerate(reports)]


def _keys_run(client, job):
    from distributed import get_task_stream

    with get_task_stream(client) as ts:
        out = run_job(client, job, progress_bar=False)
    return out, [str(d["key"]) for d in ts.data]


@pytest.mark.parametrize("in_graph", [True, False])
@pytest.mark.parametrize("per_task", [0, 1])
def test_code_in_the_first_task_or_scattered_and_no_final_task(client2, monkeypatch,
                                                               in_graph, per_task):
    # the code goes in each worker's first loop task (or is scattered when large): no
    # task of its own, whose completion the loop's task waited for; a worker's later
    # tasks (a task per unit) find it there. The last loop tasks give the final values,
    # so no final task runs
    import dask

    from daskhpc.runtime import _engine

    if not in_graph:
        monkeypatch.setattr(_engine, "GRAPH_CODE_BYTES", 0)
    with dask.config.set({"daskhpc.runtime.units-per-task": per_task}):
        out, keys = _keys_run(client2, _job(2, 3))
    finals, _ = run_local(toy_program(2, 3, length=LENGTH), [LENGTH] * 2)
    assert all(np.array_equal(a, b) for a, b in zip(out.value, finals))
    assert not [k for k in keys if "-final-" in k]
    assert not [k for k in keys if k.startswith("daskhpc-code-")]
    loops = [k for k in keys if k.startswith("('toy-")]
    assert len(loops) == (6 if per_task else 2), keys
    assert not any(client2.run(_code_left).values())       # the run's cleanup took it


def _code_left():
    from daskhpc.runtime import _steps

    return len(_steps._CODE)


def test_a_stop_rule_the_client_checks_keeps_the_final_tasks(client2):
    # the client decides after each window whether to go on: the finals come after
    job = _job(2, 3)
    job.stop = lambda history: len(history) >= 2
    out, keys = _keys_run(client2, job)
    finals, _ = run_local(toy_program(2, 2, length=LENGTH), [LENGTH] * 2)
    assert len(out.history) == 2
    assert all(np.array_equal(a, b) for a, b in zip(out.value, finals))
    assert len([k for k in keys if "-final-" in k]) == 2


def _scaled_program(K, units, first_unit):
    # a step made here (a closure over a local): pickle refuses it, cloudpickle sends it
    factor = 3.0
    scale = lambda ctx: ctx.state.__setitem__("x", ctx.state["x"] * factor)  # noqa: E731
    prog = Program(K, "scaled", init=lambda ctx, start: ctx.state.update(x=np.ones(4)),
                   final=lambda ctx: ctx.state["x"], first_unit=first_unit)
    for _ in range(first_unit, units):
        prog.step(scale, report=True)
    return prog


def test_a_step_only_cloudpickle_sends(client2):
    K = 2
    job = Job("scaled", K, 2, row=lambda u, reports: {"u": u}, fingerprint={},
              program=functools.partial(_scaled_program, K, 2), statics=[None] * K,
              exchange="direct")
    out = run_job(client2, job, progress_bar=False)
    assert all(np.array_equal(v, np.full(4, 9.0)) for v in out.value)


def test_plan_checks_small_and_large_plans_alike():
    for m in (2, 200):               # the Python check and numpy's
        src = np.arange(m) % 3
        dst = (src + 1) % 3
        ok = Plan(3, np.zeros(m, int), src, dst, volume=np.ones(m, int))
        assert ok.nphases == 1 and ok.num_messages == m
        with pytest.raises(ValueError, match="endpoints must lie in"):
            Plan(3, np.zeros(m, int), src, np.where(dst == 2, 3, dst), volume=np.ones(m, int))
        with pytest.raises(ValueError, match="endpoints must lie in"):
            Plan(3, np.zeros(m, int), src - 2 * (src == 0), dst, volume=np.ones(m, int))
        with pytest.raises(ValueError, match="to itself"):
            Plan(3, np.zeros(m, int), src, np.where(src == 1, 1, dst), volume=np.ones(m, int))
        with pytest.raises(ValueError, match="non-negative"):
            Plan(3, -(np.arange(m) == m - 1).astype(int), src, dst, volume=np.ones(m, int))
        assert Plan(3, np.arange(m), src, dst, volume=np.ones(m, int)).nphases == m
