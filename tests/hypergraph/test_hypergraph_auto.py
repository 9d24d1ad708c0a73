"""The size rule of partition(h, K, "auto") and the label-propagation fallback (fast)."""

import numpy as np
import pytest
import scipy.sparse as sp

import daskhpc.hypergraph as hg
from daskhpc.hypergraph import _auto
from daskhpc.hypergraph._mtkahypar import capped_weights
from daskhpc.hypergraph._refine import refine


def _pins_only(num_pins, num_nets, num_vertices=1000):
    """A hypergraph with the given pin and net counts (the rule looks at nothing else)."""
    sizes = np.full(num_nets, num_pins // num_nets, np.int64)
    ptr = np.concatenate([[0], np.cumsum(sizes)])
    return hg.Hypergraph(num_vertices, ptr, np.arange(ptr[-1]) % num_vertices)


@pytest.mark.parametrize("K", [2, 4, 8, 64, 256])
def test_rule_keeps_deterministic_mtkahypar_on_ml_latest_small(ml_column_net, K):
    c = _auto.choose_partitioner(ml_column_net, K)
    assert (c["backend"], c["options"]) == ("mtkahypar", {"preset": "deterministic"})


@pytest.mark.parametrize("pins, nets, K, backend, preset", [
    (100_000, 5_000, 100, "mtkahypar", "deterministic"),   # 1e6
    (1_000_000, 5_000, 16, "mtkahypar", "default"),        # 4e6
    (900_000, 5_000, 32, "mtkahypar", "default"),          # 5.1e6: 1M ratings, K = 32
    (900_000, 5_000, 1024, "lp", None),                    # 2.9e7: 1M ratings, K = 1024
    (9_000_000, 50_000, 1024, "lp", None),                 # the 10M-rating plan
    (9_000_000, 50_000, 2, "lp", None),                    # 1.3e7: Mt-KaHyPar took 26 s
    (10_000_000, 2_000_000, 1024, "mtkahypar", "default"),  # lp would need 7.6 GiB
])
def test_rule_by_pins_sqrt_k(pins, nets, K, backend, preset):
    c = _auto.choose_partitioner(_pins_only(pins, nets), K)
    assert c["backend"] == backend
    assert c["options"].get("preset") == preset
    assert c["work"] == pytest.approx(pins * np.sqrt(K))
    assert _auto.mtkahypar_preset(_pins_only(pins, nets), K) == (preset or "default")


def test_auto_records_the_choice_and_explicit_options_win(ml_column_net):
    p = hg.partition(ml_column_net, 4, "auto", objective="soed", seed=0)
    assert p.partitioner == "mtkahypar" and p.meta["auto"]["options"] == {"preset": "deterministic"}
    assert p.report()["auto"]["backend"] == "mtkahypar"
    # the deterministic preset: the same partition as asking for it by name
    q = hg.partition(ml_column_net, 4, "mtkahypar", objective="soed", seed=0)
    assert np.array_equal(p.parts, q.parts)
    r = hg.partition(ml_column_net, 4, "auto", objective="soed", seed=0, preset="default")
    assert r.partitioner == "mtkahypar"  # (a different, non-reproducible partition)


def test_capped_weights_only_touch_vertices_heavier_than_a_part():
    w = np.array([10, 1, 1, 1, 1])
    assert capped_weights(w, 2).tolist() == [7, 1, 1, 1, 1]
    assert capped_weights(w, 1) is w
    small = np.array([3, 3, 2])
    assert capped_weights(small, 2) is small


def _power_law(nnz=60_000, seed=0):
    from daskhpc.ssgd import power_law_ratings

    r = power_law_ratings(nnz, seed=seed)
    A = sp.csr_array((np.ones(r.nnz), (r.rows, r.cols)), shape=r.shape)
    return hg.column_net(A, net_cost=16)


@pytest.mark.parametrize("objective", ["soed", "km1"])
def test_lp_lowers_the_objective_and_keeps_balance(objective):
    h = _power_law()
    K = 64
    start = hg.partition(h, K, "random", seed=0).parts
    parts = refine(h, start, K, objective=objective, epsilon=0.03, seed=0)
    m0, m = hg.metrics(h, start, K, 0.03), hg.metrics(h, parts, K, 0.03)
    assert m[objective] < 0.95 * m0[objective]
    assert m["empty_parts"] == 0
    # no move may push a part over L_max; parts that start above it only shrink
    w0 = np.array(m0["part_weights"])[:, 0]
    w = np.array(m["part_weights"])[:, 0]
    lmax = m["max_part_weight"][0]
    assert np.all((w <= lmax) | (w <= w0))


def test_lp_is_a_function_of_input_and_seed():
    h = _power_law(20_000, seed=1)
    a = hg.partition(h, 32, "lp", objective="soed", seed=5).parts
    b = hg.partition(h, 32, "lp", objective="soed", seed=5).parts
    c = hg.partition(h, 32, "lp", objective="soed", seed=6).parts
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_lp_on_hand_case():
    # two pairs of identical nets: the optimum puts each pair in one part
    h = hg.Hypergraph.from_nets(4, [[0, 1], [2, 3], [0, 1], [2, 3]])
    p = refine(h, np.array([0, 1, 0, 1]), 2, objective="soed", epsilon=0.5, seed=1)
    assert hg.metrics(h, p, 2)["soed"] == 0


@pytest.fixture(scope="module")
def ml_column_net():
    from daskhpc import datasets
    from daskhpc.ssgd._data import as_ratings, split

    train, _ = split(as_ratings(datasets.ratings()), 0.1, 0)
    return hg.column_net(sp.csr_array((train.vals, (train.rows, train.cols)), shape=train.shape),
                         net_cost=16)
