"""The stratum-order policy (pure) and the scheduler plugin holding a task on a real cluster."""

from __future__ import annotations

import time
import uuid

from daskhpc.runtime import submit_pinned, worker_addresses
from daskhpc.ssgd import StratumPolicy, check_timeline
from daskhpc.ssgd._plugin import NAME, StratumOrderPlugin, fetch_timeline, register


def test_policy_predecessors_and_release():
    pol = StratumPolicy()
    # K = 2 ring: part p updates block (p + k) mod 2 in sub-epoch k.
    units = [("r", p, T, (p + T) % 2) for p in range(2) for T in range(4)]
    pol.add(units)
    assert pol.predecessors(("r", 0, 0, 0)) == []
    assert pol.predecessors(("r", 1, 1, 0)) == [("r", 1, 0, 1), ("r", 0, 0, 0)]
    pol.hold(("r", 1, 1, 0))
    assert pol.finish(("r", 1, 0, 1)) == []              # still waits for block 0
    assert pol.finish(("r", 0, 0, 0)) == [("r", 1, 1, 0)]
    assert pol.held == set() and pol.ready(("r", 1, 1, 0))
    pol.forget("r")
    assert ("r", 0, 0, 0) not in pol


def test_check_timeline_finds_both_kinds_of_violation():
    ok = [dict(run="r", part=0, T=0, block=0, start=0, stop=1),
          dict(run="r", part=1, T=1, block=0, start=1, stop=2),
          dict(run="r", part=1, T=1, block=0, start=1.5, stop=3)]   # a late send: fine
    assert check_timeline(ok) == []
    bad = ok + [dict(run="r", part=1, T=2, block=1, start=1.8, stop=4)]
    assert check_timeline(bad) == ["part 1 of r: T=2 (part 1) started at 1.8 before T=1 "
                                   "(part 1) finished at 2"]


def sleepy(seconds, *deps):
    t0 = time.time()
    time.sleep(seconds)
    return (t0, time.time())


def waits_for_b(name, *deps):
    """a of the control: runs until b has started (an Event b sets), so that "b
    overlapped a" is seen, not timed (a loaded machine may start b late)."""
    from distributed import Event

    t0 = time.time()
    seen = Event(name).wait(timeout=120)
    return (t0, time.time(), seen)


def starts_b(name, *deps):
    from distributed import Event

    t0 = time.time()
    Event(name).set()
    return (t0, time.time())


def graph(prefix, w0, w1, control=False):
    """Two parts, two blocks, one sub-epoch each side; (1, T=1) lacks its dependency
    on (0, T=0), which updates the same block 0 and is slow. ``control``: a runs until
    b has started."""
    a = (prefix, 0, 0, 0, 0, 0)     # part 0, epoch 0, sub-epoch 0, block 0
    c = (prefix, 1, 0, 0, 1, 0)     # part 1, sub-epoch 0, block 1
    b = (prefix, 1, 0, 1, 0, 0)     # part 1, sub-epoch 1, block 0: should follow a
    d = (prefix, 0, 0, 1, 1, 0)     # part 0, sub-epoch 1, block 1: should follow c
    tasks = {a: (sleepy, 0.6), c: (sleepy, 0.0), b: (sleepy, 0.0, c), d: (sleepy, 0.0, a)}
    if control:
        tasks.update({a: (waits_for_b, f"{prefix}-b"), b: (starts_b, f"{prefix}-b", c)})
    where = {a: w0, d: w0, c: w1, b: w1}
    return tasks, where, (a, b, c, d)


def test_plugin_holds_a_task_with_a_missing_dependency(client4):
    register(client4)
    w0, w1 = worker_addresses(client4)[:2]
    # Control: keys the plugin does not know run as soon as their inputs are ready.
    tasks, where, (a, b, c, d) = graph(f"ctrl-step-{uuid.uuid4().hex[:6]}", w0, w1,
                                       control=True)
    ta, tb, *_ = client4.gather(submit_pinned(client4, tasks, where, [a, b, c, d]))
    assert ta[2] and tb[0] < ta[1]              # b overlapped a: the graph alone allows it
    # The same graph as SSGD steps: b is held in no-worker until a is done.
    run = f"ssgd-step-{uuid.uuid4().hex[:6]}"
    tasks, where, (a, b, c, d) = graph(run, w0, w1)
    ta, tb, tc, td = client4.gather(submit_pinned(client4, tasks, where, [a, b, c, d]))
    assert tb[0] >= ta[1]
    assert td[0] >= tc[1]
    tl = fetch_timeline(client4, run)
    assert len(tl) == 4 and check_timeline(tl) == []
    held = {r["key"] for r in tl if r["held"]}
    assert b in held and a not in held and c not in held
    rec = {r["key"]: r for r in tl}
    assert rec[b]["worker"] == w1 and (rec[b]["part"], rec[b]["epoch"], rec[b]["subepoch"],
                                       rec[b]["block"]) == (1, 0, 1, 0)
    # The timeline is readable on the scheduler by name, for a dashboard page.
    assert client4.run_on_scheduler(
        lambda dask_scheduler: type(dask_scheduler.plugins[NAME]).__name__) == \
        StratumOrderPlugin.__name__
