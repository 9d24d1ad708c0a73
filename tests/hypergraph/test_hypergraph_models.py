"""Hypergraph models: column-net, row-net, tensor coarse/fine (+ post-pass), stochastic, graph."""

import numpy as np
import pytest
import scipy.sparse as sp

import daskhpc.hypergraph as hg


def nets_of(h):
    return [sorted(h.nets(n).tolist()) for n in range(h.num_nets)]


def test_column_and_row_net():
    A = sp.csr_array(np.array([[1, 0, 2], [0, 0, 3], [4, 5, 0]]))
    h = hg.column_net(A, net_cost=16)
    assert nets_of(h) == [[0, 2], [2], [0, 1]]
    assert h.vertex_weights[:, 0].tolist() == [2, 1, 2]
    assert h.net_costs.tolist() == [16, 16, 16]
    r = hg.row_net(A)
    assert nets_of(r) == [[0, 2], [2], [0, 1]]  # rows as nets over column vertices
    assert r.vertex_weights[:, 0].tolist() == [2, 1, 2]


def test_explicit_zero_rating_is_a_pin():
    # A rating of 0 is still a rating: the model must see the stored entry.
    A = sp.csr_array((np.array([0.0, 1.0]), np.array([0, 1]), np.array([0, 1, 2])), shape=(2, 2))
    assert hg.column_net(A).num_pins == 2


def test_tensor_coarse_paper_figure1():
    # Figure 1 of the hypertensor paper: nonzeros (1,2,3), (2,3,1), (3,1,2) of a 3x3x3 tensor.
    coords = np.array([[0, 1, 2], [1, 2, 0], [2, 0, 1]])
    h = hg.tensor_coarse((coords, (3, 3, 3)))
    assert h.meta["offsets"] == [0, 3, 6, 9]
    # n_A^1 holds t_A^1, t_B^2, t_C^3 -> vertices 0, 3+1, 6+2
    assert nets_of(h)[0] == [0, 4, 8]
    assert nets_of(h)[3 + 1] == [0, 4, 8]  # n_B^2 is the same triple
    assert h.num_constraints == 3
    assert h.vertex_weights[:3].tolist() == [[1, 0, 0]] * 3
    assert h.vertex_weights[6:].tolist() == [[0, 0, 1]] * 3


def test_tensor_coarse_empty_slice_keeps_own_net():
    coords = np.array([[0], [0]])
    h = hg.tensor_coarse((coords, (2, 1)))
    assert nets_of(h)[1] == [1]  # index 1 of mode 0 has no nonzero: net holds only itself
    assert h.vertex_weights[1].tolist() == [0, 0]


def test_tensor_fine_and_factor_rows():
    coords = np.array([[0, 1, 1], [0, 0, 1]])
    h = hg.tensor_fine((coords, (2, 2)))
    assert nets_of(h) == [[0], [1, 2], [0, 1], [2]]
    owners = hg.assign_factor_rows(h, [0, 1, 1], 2)
    assert [o.tolist() for o in owners] == [[0, 1], [0, 1]]
    # every owner is in its net's connectivity set here, so the volume is km1
    assert hg.fine_grain_volume(h, [0, 1, 1], owners, 2) == hg.metrics(h, [0, 1, 1], 2)["km1"]


def test_factor_rows_overload_goes_elsewhere():
    # All nonzeros in part 0; 4 rows of mode 0, K=2, cap = ceil(4/2)*1.0 = 2 rows per part.
    coords = np.array([[0, 1, 2, 3], [0, 0, 0, 0]])
    h = hg.tensor_fine((coords, (4, 1)))
    owners = hg.assign_factor_rows(h, [0, 0, 0, 0], 2, epsilon=0.0)
    assert np.bincount(owners[0], minlength=2).tolist() == [2, 2]
    # two rows had to leave their net's only part: +1 volume each
    assert hg.fine_grain_volume(h, [0, 0, 0, 0], owners, 2) == 2


def test_fine_grain_post_pass_balances_real_tensor(shared_data):
    from daskhpc.io import read

    X = read(shared_data / "tensors/umls_head_rel_tail.tns").tensor
    h = hg.tensor_fine(X)
    p = hg.partition(h, 4, "mtkahypar", seed=1)
    owners = hg.assign_factor_rows(h, p.parts, 4, epsilon=0.03)
    for mode, o in enumerate(owners):
        cap = hg.max_part_weight(np.array([X.shape[mode]]), 4, 0.03)[0]
        assert np.bincount(o, minlength=4).max() <= cap
    vol = hg.fine_grain_volume(h, p.parts, owners, 4)
    assert p.metrics()["km1"] <= vol < p.metrics()["km1"] + sum(X.shape)


def test_stochastic_model():
    A = sp.random_array((60, 60), density=0.08, random_state=2, format="csr")
    h = hg.stochastic(A, batches=3, batch_size=20, seed=5)
    assert h.num_vertices == 60
    # each batch contributes one net per sampled vertex (self loops make every column non-empty)
    assert h.num_nets == 3 * 20
    # every net is a column j of a sampled subgraph: pins are sampled rows adjacent to j
    Ahat = sp.csr_array(A + sp.eye_array(60)).tolil()
    for n in range(h.num_nets):
        pins = h.nets(n)
        assert pins.size >= 1
    same_seed = hg.stochastic(A, batches=3, batch_size=20, seed=5)
    assert np.array_equal(same_seed.pins, h.pins)
    assert h.vertex_weights[:, 0].tolist() == np.diff(sp.csr_array(A + sp.eye_array(60)).indptr).tolist()


def test_symmetric_graph():
    A = sp.csr_array(np.array([[1, 1, 0], [0, 0, 1], [0, 0, 0]]))
    G = hg.symmetric_graph(A)
    assert G.toarray().tolist() == [[0, 1, 0], [1, 0, 1], [0, 1, 0]]
    with pytest.raises(ValueError, match="square"):
        hg.symmetric_graph(sp.csr_array(np.ones((2, 3))))


def test_subhypergraph_splits_cut_nets():
    h = hg.Hypergraph.from_nets(4, [[0, 1, 2], [2, 3], [3]], net_costs=[5, 6, 7])
    sub, kept = h.subhypergraph(np.array([2, 3]))
    assert kept.tolist() == [0, 1, 2]
    assert nets_of(sub) == [[0], [0, 1], [1]]
    assert sub.net_costs.tolist() == [5, 6, 7]


def test_hypergraph_validation():
    with pytest.raises(ValueError, match="pins must lie"):
        hg.Hypergraph(2, [0, 2], [0, 5])
    with pytest.raises(ValueError, match="non-negative"):
        hg.Hypergraph(2, [0, 2], [0, 1], vertex_weights=[1, -1])
