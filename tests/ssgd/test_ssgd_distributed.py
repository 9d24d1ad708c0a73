"""Distributed SSGD on a real LocalCluster over TCP: serializable, placed, measured."""

from __future__ import annotations

import numpy as np
import pytest

from daskhpc.ssgd import check_timeline, fit, serial_fit
from daskhpc.ssgd._setup import prepare

pytestmark = pytest.mark.usefixtures("exchange")


@pytest.mark.parametrize("K", [2, 4])
@pytest.mark.parametrize("strategy", ["dsgd", "p2p", "hc"])
def test_distributed_equals_serial_bit_for_bit(client4, ml_small, K, strategy):
    res = fit(ml_small, K, client=client4, strategy=strategy, epochs=3,
              partition="random" if K == 2 else "hp", check_serial=True)
    # fit(check_serial=True) ran serial_fit's reference on the same setup and compared
    # W and H with np.array_equal, and the loss / test RMSE histories with ==.
    chk = res.report()["serial_check"]
    assert chk["identical"] and chk["max_abs_diff"] == 0.0 and chk["history_identical"]
    # The plugin saw every step, in an order that keeps the run serializable.
    tl = res.timeline
    assert {(r["part"], r["epoch"], r["subepoch"]) for r in tl} == \
        {(p, e, k) for p in range(K) for e in range(3) for k in range(K)}
    assert check_timeline(tl) == []
    # Steps ran on their part's worker.
    place = res.report()["placement"]
    assert all(r["worker"] == place[str(r["part"])] for r in tl)


def test_random_strata_distributed_equals_serial(client4, ml_small):
    res = fit(ml_small, 4, client=client4, strategy="hc", strata="random", epochs=3,
              partition="random", check_serial=True)
    assert res.report()["serial_check"]["identical"]


def test_p2p_bytes_match_the_plan(client4, ml_small):
    # One part per worker: every planned row crosses TCP exactly once per message.
    res = fit(ml_small, 4, client=client4, strategy="p2p", epochs=2, partition="hp",
              test_fraction=0.0, order_plugin=False)
    m = res.report()["measured"]
    planned = m["planned_bytes"]
    assert m["inter_worker_bytes_sizeof"] == planned           # the payload, exactly
    assert m["inter_worker_messages"] <= res.report()["run_plan"]["tot_msgs"]
    framing = m["inter_worker_bytes"] - planned
    assert 0 < framing <= 400 * m["inter_worker_messages"]      # ~300 B per transfer
    assert abs(m["inter_worker_bytes"] - planned) <= 0.1 * planned
    # Per epoch: the planned column matches the run plan, measured follows it.
    assert sum(h["planned_bytes"] for h in res.history) == planned
    assert sum(h["measured_bytes"] for h in res.history) == pytest.approx(
        m["inter_worker_bytes"], abs=2)


def test_serial_fit_is_the_reference_fit_compares_with(client4, ml_small):
    res = fit(ml_small, 2, client=client4, strategy="p2p", epochs=2, partition="random",
              order_plugin=False)
    ser = serial_fit(ml_small, 2, strategy="p2p", epochs=2, partition="random")
    assert np.array_equal(res.W, ser.W) and np.array_equal(res.H, ser.H)
    assert res.test_rmse == ser.test_rmse and res.train_loss == ser.train_loss


def test_setup_is_what_the_serial_and_distributed_runs_share(ml_small):
    s = prepare(ml_small, 4, strategy="hc", epochs=2, partition="random")
    ptr = s.blocks()
    got = [s.block_ratings(p) for p in range(s.K)]
    assert ptr[-1] == s.train.nnz
    assert [x.size for p in range(s.K) for x in got[p][0]] == np.diff(ptr).tolist()
    pairs = {(int(r), int(c)) for p in range(s.K) for b in range(s.K)
             for r, c in zip(got[p][0][b], got[p][1][b])}
    assert pairs == set(zip(s.train.rows.tolist(), s.train.cols.tolist()))


@pytest.mark.parametrize("strategy", ["dsgd", "hc"])
def test_two_parts_per_worker(client4, ml_small, strategy):
    # K = 8 on 4 workers: ring neighbours share a worker, their messages are read from
    # the co-located sender's state instead of moving; still bit for bit the serial run.
    res = fit(ml_small, 8, client=client4, strategy=strategy, epochs=2, partition="random",
              check_serial=True)
    rep = res.report()
    assert rep["serial_check"]["identical"]
    place = rep["placement"]
    assert place["0"] == place["1"] != place["2"] == place["3"]
    assert check_timeline(res.timeline) == []


def test_bytes_with_parts_sharing_workers(client4, ml_small):
    # K = 8 on 4 workers: only messages between parts on different workers move, bundled
    # per (sending worker, receiving worker, sub-epoch); the payload is still exact.
    res = fit(ml_small, 8, client=client4, strategy="p2p", epochs=2, partition="random",
              test_fraction=0.0, order_plugin=False)
    m = res.report()["measured"]
    assert m["parts_per_worker"] == 2
    assert m["planned_bytes"] < res.report()["run_plan"]["part_bytes"]
    assert m["planned_bytes"] <= m["inter_worker_bytes_sizeof"] <= 1.01 * m["planned_bytes"]
    assert abs(m["inter_worker_bytes"] - m["planned_bytes"]) <= 0.1 * m["planned_bytes"]
