"""Cut metrics: hand-computed small cases and an independent brute force on real data."""

import numpy as np
import pytest
import scipy.sparse as sp

import daskhpc.hypergraph as hg
from daskhpc.io import read


def brute_force(h, parts, K):
    """Per-net sets in plain Python: the definition, with no vectorisation to share bugs."""
    cut = km1 = soed = 0
    for n in range(h.num_nets):
        lam = len({int(parts[v]) for v in h.nets(n)})
        c = int(h.net_costs[n])
        km1 += c * max(lam - 1, 0)
        if lam > 1:
            cut += c
            soed += c * lam
    weights = np.zeros((K, h.num_constraints), dtype=np.int64)
    for v in range(h.num_vertices):
        weights[parts[v]] += h.vertex_weights[v]
    return cut, km1, soed, weights


def test_hand_case():
    # nets: {0,1} uncut; {1,2,3} spans parts 0,1; {3} single pin; {0,2,3,4} spans 0,1,2
    h = hg.Hypergraph.from_nets(5, [[0, 1], [1, 2, 3], [3], [0, 2, 3, 4]],
                                vertex_weights=[1, 2, 3, 4, 5], net_costs=[1, 2, 3, 4])
    parts = [0, 0, 1, 1, 2]
    m = hg.metrics(h, parts, 3)
    assert hg.connectivity(h, parts, 3).tolist() == [1, 2, 1, 3]
    assert m["cut"] == 2 + 4
    assert m["km1"] == 2 * 1 + 4 * 2
    assert m["soed"] == 2 * 2 + 4 * 3
    assert m["part_weights"] == [[3], [7], [5]]
    # imbalance = max W_p / (W / K) - 1 = 7 / 5 - 1
    assert m["imbalance"] == pytest.approx(0.4)


def test_connectivity_sets_sorted_csr():
    h = hg.Hypergraph.from_nets(4, [[3, 0, 2], [], [1]])
    ptr, ps = hg.connectivity_sets(h, [2, 0, 1, 2], 3)
    assert ptr.tolist() == [0, 2, 2, 3]
    assert ps.tolist() == [1, 2, 0]


def test_multi_constraint_imbalance():
    w = np.array([[1, 0], [1, 0], [0, 3], [0, 1]])
    h = hg.Hypergraph.from_nets(4, [[0, 1, 2, 3]], vertex_weights=w)
    m = hg.metrics(h, [0, 1, 0, 1], 2, epsilon=0.03)
    assert m["imbalance_per_constraint"] == pytest.approx([0.0, 0.5])
    assert m["balanced"] is False and m["balance_possible"] is False
    assert "single vertex weighs 3" in m["balance_notes"][0]


def test_balance_possible_but_violated():
    h = hg.Hypergraph.from_nets(4, [[0, 1, 2, 3]])
    m = hg.metrics(h, [0, 0, 0, 1], 2, epsilon=0.03)
    assert m["balance_possible"] and not m["balanced"]


def test_bad_partition_vectors():
    h = hg.Hypergraph.from_nets(3, [[0, 1, 2]])
    with pytest.raises(ValueError, match="3 vertices"):
        hg.metrics(h, [0, 1], 2)
    with pytest.raises(ValueError, match=r"\[0, 2\)"):
        hg.metrics(h, [0, 1, 2], 2)


@pytest.mark.parametrize("K", [2, 7, 32])
def test_against_brute_force_on_ratings(shared_data, K):
    A = read(shared_data / "ratings/ml-latest-small/ratings.csv").matrix
    h = hg.column_net(A, net_cost=3)
    parts = np.random.default_rng(K).integers(0, K, h.num_vertices)
    m = hg.metrics(h, parts, K)
    cut, km1, soed, weights = brute_force(h, parts, K)
    assert (m["cut"], m["km1"], m["soed"]) == (cut, km1, soed)
    assert m["part_weights"] == weights.tolist()


def test_against_brute_force_on_tensor(shared_data):
    X = read(shared_data / "tensors/umls_head_rel_tail.tns").tensor
    h = hg.tensor_coarse(X)
    parts = np.random.default_rng(0).integers(0, 5, h.num_vertices)
    m = hg.metrics(h, parts, 5)
    cut, km1, soed, weights = brute_force(h, parts, 5)
    assert (m["cut"], m["km1"], m["soed"]) == (cut, km1, soed)
    assert m["part_weights"] == weights.tolist()


def test_metrics_agree_with_mtkahypar_own_count(shared_data):
    """Mt-KaHyPar's own km1/soed/cut of its partition equal ours on the same hypergraph."""
    import mtkahypar

    from daskhpc.hypergraph._mtkahypar import _context, _initializer
    from daskhpc.hypergraph._prepare import nets_as_lists

    A = read(shared_data / "matrices/bcsstk13.mtx").matrix
    h = hg.column_net(A)
    init = _initializer(1)
    ctx = _context(init, 4, "km1", 0.03, "default")
    mtkahypar.set_seed(0)
    nets = np.arange(h.num_nets)
    g = init.create_hypergraph(ctx, h.num_vertices, h.num_nets, nets_as_lists(h, nets),
                               h.vertex_weights[:, 0].tolist(), h.net_costs.tolist())
    ph = g.partition(ctx)
    m = hg.metrics(h, np.array(ph.get_partition()), 4)
    assert (m["km1"], m["soed"], m["cut"]) == (ph.km1(), ph.soed(), ph.cut())
