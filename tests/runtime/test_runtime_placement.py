"""Placement: pure tests, and a re-map on a real cluster that lost a worker."""

from __future__ import annotations

import pytest
from dask.base import tokenize

from daskhpc.runtime import Placement, worker_addresses
from daskhpc.runtime._connect import _natural

W = ["tcp://10.0.0.1:1", "tcp://10.0.0.2:1", "tcp://10.0.0.3:1"]


def test_round_robin_in_given_order():
    pl = Placement(8, W)
    assert [pl.worker(p) for p in range(8)] == [W[p % 3] for p in range(8)]
    assert pl.parts_of(W[0]) == [0, 3, 6]
    assert pl.parts_of(W[2]) == [2, 5]
    assert pl.parts_of("tcp://elsewhere:1") == []
    assert pl.as_dict() == {p: W[p % 3] for p in range(8)}
    assert pl.nparts == 8 and pl.workers == tuple(W)


def test_more_workers_than_parts():
    pl = Placement(2, W)
    assert pl.parts_of(W[2]) == []
    assert pl.as_dict() == {0: W[0], 1: W[1]}


def test_explicit_owners_and_validation():
    pl = Placement(3, W, owners=[W[2], W[2], W[0]])
    assert pl.parts_of(W[2]) == [0, 1]
    with pytest.raises(ValueError, match="owners"):
        Placement(2, W, owners=[W[0]])
    with pytest.raises(ValueError, match="not in the list"):
        Placement(1, W, owners=["tcp://x:1"])
    with pytest.raises(ValueError, match="at least one worker"):
        Placement(3, [])
    with pytest.raises(ValueError, match="duplicate"):
        Placement(3, [W[0], W[0]])
    with pytest.raises(IndexError):
        Placement(3, W).worker(3)


def test_remap_moves_only_lost_parts_balanced():
    pl = Placement(12, W)
    new = pl.remap([W[0], W[2]])
    for p in range(12):
        if pl.worker(p) != W[1]:
            assert new.worker(p) == pl.worker(p)
    assert {new.worker(p) for p in pl.parts_of(W[1])} == {W[0], W[2]}
    assert len(new.parts_of(W[0])) == len(new.parts_of(W[2])) == 6
    assert new.workers == (W[0], W[2])
    # Deterministic: same inputs, same answer.
    assert new == pl.remap([W[0], W[2]])


def test_remap_fills_new_workers_first_and_is_identity_when_nobody_left():
    pl = Placement(6, W[:2])
    assert pl.remap(W[:2]) == pl
    new = pl.remap([W[1], W[2]])  # W[0] lost its parts 0, 2, 4; W[2] is new
    assert new.parts_of(W[1]) == [1, 3, 5]
    assert new.parts_of(W[2]) == [0, 2, 4]
    with pytest.raises(ValueError, match="no worker left"):
        pl.remap([])


def test_remap_uneven_load_goes_to_least_loaded():
    pl = Placement(5, W[:2], owners=[W[0], W[0], W[0], W[1], W[0]])
    new = pl.remap([W[1], W[2]])
    # Orphans 0, 1, 2, 4 go one by one to the least loaded (W[1] starts with
    # part 3, W[2] with nothing); ties go to the first in the alive list.
    assert new.as_dict() == {0: W[2], 1: W[1], 2: W[2], 3: W[1], 4: W[1]}


def test_equality_hash_tokenize_repr():
    a, b = Placement(4, W), Placement(4, list(W))
    assert a == b and hash(a) == hash(b)
    assert tokenize(a) == tokenize(b)
    assert tokenize(a) != tokenize(Placement(4, W[::-1]))
    assert a != Placement(5, W)
    assert a != "not a placement"
    assert repr(a) == (
        "Placement(4 parts on 3 workers: 'tcp://10.0.0.1:1': [0, 3], "
        "'tcp://10.0.0.2:1': [1], 'tcp://10.0.0.3:1': [2])"
    )


def test_tokenize_is_the_same_in_another_process():
    import subprocess
    import sys

    code = (
        "from dask.base import tokenize; from daskhpc.runtime import Placement; "
        f"print(tokenize(Placement(4, {W!r})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == tokenize(Placement(4, W))


def test_worker_name_order_is_natural():
    names = [10, "2", 1, "gpu-10", "gpu-9"]
    assert sorted(names, key=_natural) == [1, "2", 10, "gpu-9", "gpu-10"]


def test_from_client_and_remap_after_retiring_a_worker(make_client):
    client = make_client(3)
    before = Placement.from_client(client, 7)
    assert before == Placement(7, worker_addresses(client))
    lost = before.workers[1]
    client.retire_workers([lost], close_workers=True)
    alive = worker_addresses(client)
    assert lost not in alive and len(alive) == 2
    after = before.remap(alive)
    for p in range(7):
        if before.worker(p) == lost:
            assert after.worker(p) in alive
        else:
            assert after.worker(p) == before.worker(p)
    assert after == Placement(7, alive, owners=[after.worker(p) for p in range(7)])


def test_remap_after_scale_down_then_run_there(make_client):
    import time
    from operator import add

    from daskhpc.runtime import submit_pinned
    from daskhpc.testing import assert_placement

    client = make_client(3)
    before = Placement.from_client(client, 6)
    client.cluster.scale(2)  # SpecCluster drops the worker with the highest name
    deadline = time.monotonic() + 30
    while len(worker_addresses(client)) != 2:
        assert time.monotonic() < deadline, "scale down did not finish"
        time.sleep(0.05)
    alive = worker_addresses(client)
    [lost] = set(before.workers) - set(alive)
    assert lost == before.workers[2]
    after = before.remap(alive)
    assert [after.worker(p) for p in before.parts_of(lost)] == [alive[0], alive[1]]
    tasks = {("part", p): (add, p, 1) for p in range(6)}
    where = {("part", p): after.worker(p) for p in range(6)}
    assert client.gather(submit_pinned(client, tasks, where, list(tasks))) == list(range(1, 7))
    assert_placement(client, tasks, where)
