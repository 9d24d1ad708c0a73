"""Pinned graphs run exactly where the placement says."""

from __future__ import annotations

import asyncio
import time
from operator import add

import numpy as np
import pytest
from dask._task_spec import Task, TaskRef
from distributed import Event, get_worker

from daskhpc.runtime import Placement, pinned_graph, submit_pinned
from daskhpc.testing import assert_placement


def here(*inputs):
    """The address of the worker running this task, with the inputs' addresses."""
    return get_worker().address, [x[0] for x in inputs]


def test_pinned_graph_layer_and_annotations():
    hlg = pinned_graph(
        {"x": (add, 1, 2), ("y", 0): (add, "x", 1)},
        {"x": "tcp://a:1", ("y", 0): ["tcp://b:1"]},
    )
    [layer] = hlg.layers.values()
    assert dict(layer) == {"x": (add, 1, 2), ("y", 0): (add, "x", 1)}
    assert layer.annotations["workers"]("x") == ["tcp://a:1"]
    assert layer.annotations["workers"](("y", 0)) == ["tcp://b:1"]
    assert layer.annotations["allow_other_workers"](("y", 0)) is False


def test_pinned_graph_refuses_unpinned_or_unknown_keys():
    with pytest.raises(KeyError, match="no worker"):
        pinned_graph({"x": 1, "y": 2}, {"x": "tcp://a:1"})
    with pytest.raises(KeyError, match="unknown"):
        pinned_graph({"x": 1}, {"x": "tcp://a:1", "z": "tcp://a:1"})
    with pytest.raises(ValueError, match="empty"):
        pinned_graph({"x": 1}, {"x": []})


def test_twenty_tasks_run_where_the_placement_says(client3, workers3):
    # Four parts on three workers (part 3 shares worker 0 with part 0), five
    # phases; phase s of part p reads phase s-1 of parts p and p+1, so every
    # phase has inputs that live on another worker.
    pl = Placement(4, workers3)
    tasks, where = {}, {}
    for s in range(5):
        for p in range(4):
            key = ("phase", s, p)
            deps = [] if s == 0 else [("phase", s - 1, p), ("phase", s - 1, (p + 1) % 4)]
            tasks[key] = (here, *deps)
            where[key] = pl.worker(p)
    assert len(tasks) == 20
    futures = submit_pinned(client3, tasks, where, list(tasks))
    results = dict(zip(tasks, client3.gather(futures)))
    for key, (ran_on, input_places) in results.items():
        assert ran_on == where[key]
        _, s, p = key
        if s:
            assert input_places == [
                where[("phase", s - 1, p)],
                where[("phase", s - 1, (p + 1) % 4)],
            ]
    assert any(ran_on != inputs[1] for ran_on, inputs in results.values() if inputs)
    assert_placement(client3, futures, where)
    with pytest.raises(AssertionError, match="expected"):
        assert_placement(client3, [("phase", 0, 0)], {("phase", 0, 0): workers3[1]})


def wait_then_where(event_name):
    # bounded: once (in a full run) the release did not reach the waiters and six
    # 30 s waits cost 3 minutes; the placement assertions hold either way
    Event(event_name).wait(timeout=5)
    return get_worker().address


@pytest.mark.slow             # CI budget (20 min on 2 cores): default run keeps a lighter test of the same path
def test_scheduler_holds_hard_restrictions_while_tasks_wait(client3, workers3):
    # Six blocked tasks on worker 0 and none elsewhere: an idle thief would
    # take them if restrictions were loose or stealing were on.
    event = Event("release-pinned")
    tasks = {("wait", i): (wait_then_where, "release-pinned") for i in range(6)}
    where = dict.fromkeys(tasks, workers3[0])
    futures = submit_pinned(client3, tasks, where, list(tasks))

    async def restrictions(keys, dask_scheduler):
        # The graph travels on the batched stream; this request may overtake it.
        while not all(k in dask_scheduler.tasks for k in keys):
            await asyncio.sleep(0.01)
        tasks = [dask_scheduler.tasks[k] for k in keys]
        return [
            (ts.key, sorted(ts.worker_restrictions), ts.loose_restrictions, ts.state)
            for ts in tasks
        ]

    try:
        got = client3.run_on_scheduler(restrictions, list(tasks))
        time.sleep(0.3)  # idle workers 1 and 2 would have stolen by now
        got_later = client3.run_on_scheduler(restrictions, list(tasks))
    finally:
        event.set()
    assert {(k, tuple(w), loose) for k, w, loose, _ in got} == {
        (k, (workers3[0],), False) for k in tasks
    }
    assert [state for *_, state in got_later] == ["processing"] * 6
    assert client3.gather(futures) == [workers3[0]] * 6
    assert_placement(client3, futures, where)


def test_task_spec_objects_futures_and_existing_keys(client3, workers3):
    a, b, c = workers3
    [data] = client3.scatter([np.arange(4.0)], workers=[a])
    tasks = {
        "spec-x": Task("spec-x", np.sum, TaskRef(data.key)),
        "spec-y": Task("spec-y", add, TaskRef("spec-x"), 1.0),
        "tuple-z": (add, "spec-y", data),
    }
    where = {"spec-x": b, "spec-y": c, "tuple-z": a}
    futures = submit_pinned(client3, tasks, where, ["spec-y", "tuple-z"])
    y, z = client3.gather(futures)
    assert y == 7.0
    np.testing.assert_array_equal(z, np.arange(4.0) + 7.0)
    assert_placement(client3, list(tasks), where)
    with pytest.raises(KeyError, match="not in the graph"):
        submit_pinned(client3, tasks, where, ["nope"])
