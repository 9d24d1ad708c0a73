"""BatchedSumma3D on a real 2-worker cluster: products, consumers, plugin, budget, errors."""

from __future__ import annotations


import numpy as np
import pytest
import scipy.sparse as sp
from spgemm_helpers import assert_same_product, random_matrix

from daskhpc.errors import InputError
from daskhpc import datasets
from daskhpc.datasets import cora
from daskhpc.io import read
from daskhpc.spgemm import (Prune, aat, column_stochastic, load_batch, mcl_step, multiply,
                            plan, triangle_count)

A_RECT = random_matrix(90, 70, 0.06, 11)
B_RECT = random_matrix(70, 110, 0.06, 12)
REF_RECT = A_RECT @ B_RECT


@pytest.mark.parametrize("local", ["staged", "fused"])
@pytest.mark.parametrize("batches", [1, 3])
@pytest.mark.parametrize("grid", ["1x1x1", "2x2x1", "1x1x2", "2x2x2", "3x3x1"])
def test_product_equals_scipy_on_every_grid(client2, grid, batches, local):
    res = multiply(A_RECT, B_RECT, client=client2, grid=grid, batches=batches, local=local,
                   plan=False, measure_memory=False)
    assert res.nbatches == batches
    assert_same_product(res.matrix, REF_RECT)
    assert res.timeline["violations"] == []


def test_aat_rectangular_and_unpermuted(client2):
    a = random_matrix(60, 140, 0.05, 13)
    for seed in (None, 5):
        res = aat(a, client=client2, grid="2x2x1", batches=2, seed=seed, measure_memory=False)
        assert_same_product(res.matrix, a @ a.T)


def test_count_write_and_prune_consumers(client2, tmp_path):
    ref = sp.csc_array(REF_RECT)
    res = multiply(A_RECT, B_RECT, client=client2, grid="2x2x2", batches=3, consume="count")
    assert res.value["nnz"] == REF_RECT.nnz
    assert np.isclose(res.value["sum"], REF_RECT.sum(), rtol=1e-12)
    res = multiply(A_RECT, B_RECT, client=client2, grid="2x2x1", batches=3,
                   consume=f"write:{tmp_path}")
    assert len(res.value) == 3
    total = sum(sp.csr_array(load_batch(p)) for p in res.value)
    assert_same_product(total, ref)
    res = multiply(A_RECT, B_RECT, client=client2, grid="2x2x2", batches=2,
                   consume=Prune(k=3, threshold=-1.5))
    assert_same_product(res.matrix, _reference_prune(ref, 3, -1.5))


def _reference_prune(c, k, threshold):
    c = sp.csc_array(c)
    c.sum_duplicates()
    rows, cols, vals = [], [], []
    for j in range(c.shape[1]):
        r = c.indices[c.indptr[j]:c.indptr[j + 1]]
        v = c.data[c.indptr[j]:c.indptr[j + 1]]
        keep = v >= threshold
        r, v = r[keep], v[keep]
        order = np.lexsort((r, -v))[:k]
        rows += r[order].tolist()
        vals += v[order].tolist()
        cols += [j] * len(order)
    return sp.csr_array((vals, (rows, cols)), shape=c.shape)


def test_triangle_count_matches_independent_count(client2):
    adj = cora().adjacency
    expected = (adj @ adj).multiply(adj).sum() / 6       # trace(A^3)/6 by scipy
    assert triangle_count(adj, client=client2, grid="2x2x1", batches=2) == expected == 1630


def test_mcl_step_matches_scipy(client2):
    """Expansion, prune (threshold, top-k per column), inflation.

    Top-k is applied to our own product: entries tied in exact arithmetic differ
    in the last bit between scipy's and the hash kernel's summation order, and
    either may win the tie; the product itself is checked against scipy.
    """
    a = column_stochastic(cora().adjacency)
    nxt, res = mcl_step(a, client=client2, grid="1x1x2", batches=2, top_k=5, threshold=1e-3)
    expanded = multiply(a, client=client2, grid="1x1x2", batches=2).matrix
    assert_same_product(expanded, a @ a)
    ref = _reference_prune(expanded, 5, 1e-3)
    ref.data **= 2
    ref = sp.csr_array(ref @ sp.diags_array(1 / np.asarray(ref.sum(axis=0)).ravel()))
    assert_same_product(nxt, ref)
    assert res.nbatches == 2


def test_budget_forces_batches_and_is_kept(client2, shared_data):
    a = read(shared_data / "graphs" / "email-Enron.txt.gz").matrix
    res = multiply(a, client=client2, grid="2x2x1", memory_per_worker="200MB",
                   consume="count", plan=False)
    assert res.nbatches > 1
    assert res.value["nnz"] == 30_492_154
    tl = res.timeline
    assert tl["violations"] == []
    batches = tl["batches"]
    for prev, nxt in zip(batches, batches[1:]):
        assert nxt["admitted"] >= prev["consumed"]
        assert nxt["started"] >= prev["consumed"]
    assert res.memory["within_budget"], res.memory


def test_the_client_given_is_the_cluster_that_runs(client2, client3):
    """``client=`` names the cluster even when another client is the current one (it
    was a parameter of its own that never reached the run, which took the current
    client: three workers here, and the plan of another cluster)."""
    with client3.as_current():
        res = multiply(A_RECT, B_RECT, client=client2, consume="count", measure_memory=False)
    assert res.grid == "2x2x1" and res.report()["workers"] == 2


def test_measured_bytes_follow_the_plan(client2):
    res = multiply(A_RECT, B_RECT, client=client2, grid="2x2x1", batches=2, consume="count")
    steps, expected = res.measured["per_step"], res.measured["expected"]
    # placement deals cells (i, j) to worker j: A crosses workers, B and fiber do not
    assert expected["b_bcast"]["bytes"] == 0 and expected["fiber"]["bytes"] == 0
    measured = steps["a_bcast"]
    assert expected["a_bcast"]["bytes"] <= measured["bytes"]
    # plus column pointers (8 bytes each) and framing per message
    slack = expected["a_bcast"]["messages"] * (8 * (A_RECT.shape[1] + 8) + 2000)
    assert measured["bytes"] <= expected["a_bcast"]["bytes"] + slack
    assert measured["messages"] == expected["a_bcast"]["messages"]
    assert set(steps) <= {"a_bcast", "other"}


def test_bad_input_errors(client2):
    with pytest.raises(InputError, match="dimension mismatch"):
        multiply(sp.eye(3, format="csr"), sp.eye(4, format="csr"), client=client2, grid="1x1x1")
    with pytest.raises(InputError, match="empty"):
        multiply(sp.csr_array((5, 5)), client=client2, grid="1x1x1")
    with pytest.raises(InputError, match="layers must be square"):
        multiply(A_RECT, B_RECT, client=client2, grid="2x3x1")
    # no grid on 2 workers: one layer, two cells a worker (2x2x1), the exact product
    res = multiply(A_RECT, B_RECT, client=client2)
    assert res.grid == "2x2x1"
    assert abs(res.matrix - (A_RECT @ B_RECT)).max() == 0
    with pytest.raises(InputError, match="input blocks alone need"):
        multiply(A_RECT, B_RECT, client=client2, grid="1x1x1", memory_per_worker="10kB")
    with pytest.raises(InputError, match="--consume"):
        multiply(A_RECT, B_RECT, client=client2, grid="1x1x1", consume="prune:x")


# -- --check-serial compares what it claims ----------------------------

def test_serial_check_compares_values_where_patterns_differ():
    """Sums cancelling to exactly 0 in one order and to a round-off residue in another:
    the patterns differ, the values agree to round-off (and the report says both)."""
    from daskhpc.spgemm._serial import compare_products

    ref = sp.csr_array(np.array([[1e16, 0.0, 3.0], [0.0, 2.0, 0.0]]))
    c = sp.csr_array(np.array([[1e16, 2.0, 3.0], [0.0, 2.0, 0.0]]))   # a residue of 2
    r = compare_products(c, ref)
    assert (r["same_pattern"], r["only_here"], r["only_here_max_abs"], r["only_in_serial"]) \
        == (False, 1, 2.0, 0)
    assert r["max_abs_diff"] == 2.0 and r["identical"]                # 2 <= 1e-12 * 1e16
    wrong = sp.csr_array(np.array([[1e16, 0.0, 3.0], [0.0, 2.0, 5e5]]))   # a real product
    r = compare_products(wrong, ref)
    assert r["max_abs_diff"] == 5e5 and not r["identical"]


def test_bcsstk13_serial_check_is_identical(client2, shared_data):
    """The issue's case: A·A on bcsstk13 said identical=False with max_abs_diff 0."""
    a = read(shared_data / "matrices/bcsstk13.mtx").matrix
    res = multiply(a, a, client=client2, grid="1x1x2", check_serial=True, plan=False,
                   measure_memory=False)
    check = res.report()["serial_check"]
    ref = sp.csr_array(a @ a)
    assert check["identical"] and check["max_abs_diff"] <= 1e-12 * abs(ref.data).max()
    # the entries only one side stores are round-off residues, not products
    assert check.get("only_here_max_abs", 0.0) <= 1e-12 * abs(ref.data).max()
    assert check.get("only_in_serial_max_abs", 0.0) <= 1e-12 * abs(ref.data).max()


def test_paths_are_read_and_c_comes_back_as_the_kind_given(client2, tmp_path):
    """A path was "A must be a 2-D matrix, got 0 dimension(s)"; an spmatrix
    came back as a csr_array."""
    import scipy.io as sio

    from daskhpc.spgemm import serial_multiply

    sio.mmwrite(tmp_path / "a.mtx", sp.coo_matrix(A_RECT))
    sio.mmwrite(tmp_path / "b.mtx", sp.coo_matrix(B_RECT))
    opts = dict(client=client2, grid="1x1x2", plan=False, measure_memory=False)
    res = multiply(str(tmp_path / "a.mtx"), tmp_path / "b.mtx", **opts)   # str, PathLike
    assert_same_product(res.matrix, REF_RECT)
    assert type(res.matrix) is sp.csr_array
    assert res.report()["input"]["path"] == str(tmp_path / "a.mtx")
    m = multiply(sp.csr_matrix(A_RECT), sp.csc_matrix(B_RECT), **opts)
    assert type(m.matrix) is sp.csr_matrix and m.value is m.matrix
    assert_same_product(m.matrix, REF_RECT)
    assert type(multiply(A_RECT, sp.csr_matrix(B_RECT), **opts).matrix) is sp.csr_array
    assert type(aat(sp.csr_matrix(A_RECT), **opts).matrix) is sp.csr_matrix
    assert type(mcl_step(sp.csr_matrix(abs(A_RECT @ A_RECT.T)), **opts)[0]) is sp.csr_matrix
    assert type(serial_multiply(sp.csr_matrix(A_RECT), B_RECT.tocsc())) is sp.csr_array
    assert type(serial_multiply(sp.csr_matrix(A_RECT), sp.csr_matrix(B_RECT))) is \
        sp.csr_matrix
    with pytest.raises(InputError, match="a matrix is needed, not a tensor"):
        multiply(datasets.path("tensor"), **opts)


@pytest.mark.parametrize("grid, batches, local", [("1x1x1", 1, "staged"),
                                                  ("2x2x2", 3, "fused")])
def test_per_iteration_time_is_each_batchs_multiply(client2, grid, batches, local):
    # the report's per_iteration_s was [0.0] for a run of one batch (the time
    # between two batch reports, with no report before the first)
    res = multiply(A_RECT, B_RECT, client=client2, grid=grid, batches=batches, local=local)
    took = res.report()["timing"]["per_iteration_s"]
    assert len(took) == batches and all(t > 0 for t in took), took
    assert [h["time_s"] for h in res.history] == took          # the table says the same
    for t, e in zip(took, res.timeline["batches"]):
        assert t == e["finished"] - e["started"]


def test_the_plan_runs_beside_the_batches_and_its_failure_loses_nothing(client2,
                                                                          monkeypatch):
    # the plan's pass (a client thread, started once b is known) fills the report's plan
    # and the planned bytes; if it fails, the product still comes back, with a warning
    # and the reason in the report instead of the plan
    from daskhpc.spgemm import _setup

    a = random_matrix(300, 300, 0.02, seed=11)
    res = multiply(a, a, client=client2, grid="2x2x1")
    assert res.plan["tot_vol"] > 0 and res.timing["plan_s"] > 0
    assert res.measured["planned_bytes"] > 0
    assert res.plan["tot_vol"] == plan(a, a, grid="2x2x1")["tot_vol"]   # the same counts

    def broken(*args, **kwargs):
        raise MemoryError("no room for the counts")

    monkeypatch.setattr(_setup.Setup, "symbolic", broken)
    with pytest.warns(UserWarning, match="plan's pass failed .*no room for the counts"):
        res2 = multiply(a, a, client=client2, grid="2x2x1")
    assert_same_product(res2.matrix, a @ a)
    assert res2.plan == {} and "no room" in res2.info["plan_error"]
    assert "planned_bytes" not in res2.measured
