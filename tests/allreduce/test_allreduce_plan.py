"""Plans equal an independent simulation, runs send exactly the plan, and the byte
properties (identical / disjoint sets, uniform model, dense switch)."""

from __future__ import annotations

import math

import allreduce_reference as reference
import numpy as np
import pytest
from allreduce_reference import DENSITIES, PARTS, run_recorded, vectors

import daskhpc.allreduce as ar
from daskhpc.allreduce._program import program, statics
from daskhpc.allreduce._setup import prepare

ALGOS = sorted(ar.ALGORITHMS)


def _plan_msgs(plan):
    dense = plan.meta["dense"]
    return sorted(zip(plan.phase.tolist(), plan.src.tolist(), plan.dst.tolist(),
                      plan.volume.tolist(), [bool(x) for x in dense]))


def _sets(vecs):
    return [np.flatnonzero(v) for v in vecs]


@pytest.mark.parametrize("P", PARTS)
@pytest.mark.parametrize("N", [1, "P-1", 1000])
@pytest.mark.parametrize("density", DENSITIES)
def test_plan_equals_independent_simulation_and_the_run(P, N, density):
    N = P - 1 if N == "P-1" else N
    if N < 1:
        pytest.skip("N = P - 1 = 0")
    vecs = vectors(N, P, density, seed=P * 7 + N, integer=False)
    for name in ALGOS:
        s = prepare(vecs, algorithm=name)
        want = reference.simulate(name, _sets(vecs), N)
        assert _plan_msgs(s.plan) == want, name
        # what the Program really sends, step by step, is the plan message for message
        _, _, log = run_recorded(program(s), statics(s))
        sent = sorted((st, src, dst, items, dense) for st, src, dst, items, dense, _ in log)
        assert sent == want, name
        isize = 8
        assert [b for *_, b in log] == [n * (isize if d else isize + 4)
                                        for _, _, _, n, d, _ in log]


@pytest.mark.parametrize("P", [2, 4, 8])
def test_identical_sets_rec_dbl_sends_log2P_k_per_rank(P):
    N, k = 10_000, 300
    idx = np.sort(np.random.default_rng(1).choice(N, k, replace=False))
    vecs = [(idx, np.full(k, r + 1.0)) for r in range(P)]
    plan = ar.plan(vecs, N=N, algorithm="ssar_rec_dbl")
    assert plan["per_rank"]["items"] == [int(math.log2(P)) * k] * P


@pytest.mark.parametrize("P", [2, 4, 8])
def test_disjoint_sets_below_threshold_send_P_minus_1_k(P):
    N, k = 10_000, 200            # P k = 1600 items stay below phi(N) = 6666
    perm = np.random.default_rng(2).permutation(N)
    vecs = [(np.sort(perm[r * k:(r + 1) * k]), np.ones(k)) for r in range(P)]
    plan = ar.plan(vecs, N=N, algorithm="ssar_rec_dbl")
    assert plan["per_rank"]["items"] == [(P - 1) * k] * P
    assert all(st["dense_messages"] == 0 for st in plan["stages"])


def test_uniform_model_matches_table_3_1_expectation():
    # N = 2^20, P = 8, density 1 %, 20 trials: mean items per rank within 1 %
    N, P, d = 2 ** 20, 8, 0.01
    k = round(d * N)
    f = ar.expected_union
    want = {"ssar_rec_dbl": sum(f(k, N, 2 ** (i - 1)) for i in range(1, 4)),
            "ssar_split_allgather": (P - 1) / P * k + (P - 1) * f(k / P, N / P, P)}
    # the closed form is the inclusion-exclusion sum of section 3.2.1
    assert math.isclose(f(k, N, P), N * sum((-1) ** (i - 1) * math.comb(P, i) * (k / N) ** i
                                            for i in range(1, P + 1)), rel_tol=1e-9)
    for name, expect in want.items():
        got = [np.mean(ar.plan(N=N, nparts=P, density=d, seed=t, algorithm=name)
                       ["per_rank"]["items"]) for t in range(20)]
        assert abs(np.mean(got) / expect - 1) < 0.01, (name, np.mean(got), expect)


@pytest.mark.parametrize("total,dense", [(1999, False), (2000, True), (2001, True)])
def test_dense_switch_at_threshold(total, dense):
    # N = 3000, float64: phi(N) = floor(3000 * 8 / 12) = 2000; a merge goes dense when
    # |H1| + |H2| >= phi (Listing 4.3), here with overlapping sets
    N = 3000
    assert ar.Format(np.float64).phi(N) == 2000
    a = np.arange(0, 1000)
    b = np.arange(500, 500 + total - 1000)
    r = ar.allreduce_local([(a, np.ones(a.size)), (b, np.ones(b.size))], N=N,
                           algorithm="ssar_rec_dbl")
    assert all(s.dense == dense for s in r.streams)
    assert r.history[0]["result_dense"] == dense
    # and a 4-rank Rec_Dbl sends that merged partial in its second stage
    r4 = ar.plan([(a, np.ones(a.size)), (b, np.ones(b.size)), None, None][:2] +
                 [(np.array([0]), np.ones(1))] * 2, N=N, algorithm="ssar_rec_dbl")
    assert (r4["stages"][1]["dense_messages"] > 0) == dense


@pytest.mark.parametrize("P", [2, 3, 4, 5, 8])
@pytest.mark.parametrize("density", [1e-3, 0.05, 0.3, 0.6, 1.0])
def test_no_rank_sends_more_than_a_dense_allreduce(P, density):
    N = 4096
    vecs = vectors(N, P, density, seed=11, integer=True)
    dense_in = [np.ones(N, np.int64)] * P
    for name in ALGOS:
        got = ar.plan(vecs, algorithm=name)["per_rank"]["bytes"]
        bound = ar.plan(dense_in, algorithm=name)["per_rank"]["bytes"]
        assert all(g <= b for g, b in zip(got, bound)), name
        if name in ("ssar_split_allgather", "dsar_split_allgather", "dsar_early_switch") \
                and P & (P - 1) == 0:
            raben = ar.plan(dense_in, algorithm="dense_rabenseifner")["per_rank"]["bytes"]
            assert max(got) <= max(raben), name


def test_auto_picks_the_least_predicted_time_and_reports_it():
    from daskhpc.comm import CostModel

    for d in (1e-4, 1e-2, 0.5):
        r = ar.plan(N=100_000, nparts=4, density=d, algorithm="auto", alpha=1e-3, beta=1e-9)
        c = r["choice"]
        assert c["algorithm"] == r["algorithm"] == min(c["candidates"], key=c["candidates"].get)
        t = ar.predicted_times(4, 100_000, round(d * 100_000), 8,
                               CostModel(alpha=1e-3, beta=1e-9))
        assert c["predicted_s"] == pytest.approx(min(t.values()))
    # latency-bound tiny vectors: recursive doubling; bandwidth-bound dense: not Rec_Dbl
    assert ar.plan(N=64, nparts=8, density=0.1, alpha=1e-3, beta=1e-9)["algorithm"] \
        in ("ssar_rec_dbl", "dense_rec_dbl")
    assert ar.plan(N=10 ** 6, nparts=8, density=1.0, alpha=1e-6, beta=1e-9)["algorithm"] \
        in ("dense_rabenseifner", "dense_ring", "dsar_early_switch", "dsar_split_allgather")


def test_table_3_1_bounds_of_the_extremes():
    # K = k (identical sets): Rec_Dbl log2(P) k beta; K = kP (disjoint): (P - 1) k beta
    from daskhpc.comm import CostModel

    cm = CostModel(alpha=0.0, beta=1.0)
    P, N, k = 8, 10 ** 9, 1000       # density ~0: f(k, N, 2^i) ~ 2^i k (disjoint)
    t = ar.predicted_times(P, N, k, 8, cm)
    assert t["ssar_rec_dbl"] == pytest.approx((P - 1) * k * 12, rel=1e-4)
    assert t["dense_rabenseifner"] == pytest.approx(2 * (P - 1) / P * N * 8)
    # split: (P - 1)/P k; allgather of P - 1 blocks of union k/P * P = k each (~ P k)
    assert t["ssar_split_allgather"] == pytest.approx(((P - 1) / P * k + (P - 1) * k) * 12,
                                                     rel=1e-4)
