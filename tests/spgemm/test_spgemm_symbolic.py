"""Symbolic3D without a cluster, Algorithm 3 line 12 / eq. (2), and Table VI trends."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from spgemm_helpers import random_matrix

from daskhpc.errors import InputError
from daskhpc.datasets import cora
from daskhpc.spgemm import Grid, batch_count, batch_lower_bound, grid_symbolic, plan
from daskhpc.spgemm._grid import Layout


@pytest.mark.parametrize("grid", [Grid(1, 1), Grid(2, 1), Grid(1, 3), Grid(3, 2)])
@pytest.mark.parametrize("nb", [1, 4])
def test_grid_symbolic_counts(grid, nb):
    a = random_matrix(70, 50, 0.08, 1)
    b = random_matrix(50, 60, 0.08, 2)
    pa, pb = (abs(a) > 0).astype(np.int64), (abs(b) > 0).astype(np.int64)
    s = grid_symbolic(a, b, grid, nb)
    assert s.nnz_c == (pa @ pb).nnz
    assert s.flops == int((pa @ pb).sum())
    assert s.nnz_a.sum() == a.nnz and s.nnz_b.sum() == b.nnz
    assert s.nnz_b_batch.sum() == b.nnz
    # eq. (1): flops >= sum_k nnz(D^(k)) >= nnz(C)
    assert s.flops >= s.sum_layer_nnz >= s.nnz_c
    assert int(s.unmerged.sum()) >= s.sum_layer_nnz


@pytest.mark.parametrize("mask", [None, "mask", "complement"])
def test_grid_symbolic_in_column_ranges_equals_one_pass(monkeypatch, mask):
    """The plan's pass runs over ranges of A's rows in threads (one per core, at
    least PARALLEL_FLOPS each): every count equals the single pass's."""
    import daskhpc.spgemm._symbolic as sym

    a = random_matrix(300, 200, 0.05, 3)
    b = random_matrix(200, 250, 0.05, 4)
    m = None if mask is None else random_matrix(300, 250, 0.1, 5)
    comp = mask == "complement"
    one = grid_symbolic(a, b, Grid(2, 2), 3, m, comp)
    monkeypatch.setattr(sym, "PARALLEL_FLOPS", 50)
    monkeypatch.setattr(sym.os, "sched_getaffinity", lambda pid: set(range(5)), raising=False)
    calls = []
    real = sym._grid_pass
    monkeypatch.setattr(sym, "_grid_pass", lambda *x: calls.append(x[-2:]) or real(*x))
    many = grid_symbolic(a, b, Grid(2, 2), 3, m, comp)
    assert len(calls) == 5 and calls[0][0] == 0 and calls[-1][1] == a.shape[0]
    assert all(x[1] == y[0] for x, y in zip(calls, calls[1:]))      # ranges tile A's rows
    for k in ("unmerged", "layer", "final", "flops"):
        np.testing.assert_array_equal(getattr(many, k), getattr(one, k))


def test_layout_covers_every_column_once():
    lay = Layout(Grid(3, 2), (10, 11, 29), nbatches=4)
    seen = np.concatenate([lay.batch_columns(t, j, k) for t in range(4) for j in range(3)
                           for k in range(2)])
    np.testing.assert_array_equal(np.sort(seen), np.arange(29))
    assert lay.inner_bounds[0] == 0 and lay.inner_bounds[-1] == 11


def test_batch_count_is_line_12_and_lower_bound_eq_2():
    a = random_matrix(200, 200, 0.05, 3)
    s = grid_symbolic(a, a, Grid(2, 2))
    r, mem = 24, 2_000_000
    free = mem / s.grid.p - r * (s.nnz_a.max() + s.nnz_b.max())
    assert batch_count(s, mem, r) == max(1, math.ceil(r * s.max_unmerged / free))
    assert 1 <= batch_lower_bound(s, mem, r) <= batch_count(s, mem, r)


def test_budget_below_inputs_names_what_is_needed():
    a = random_matrix(200, 200, 0.05, 3)
    s = grid_symbolic(a, a, Grid(2, 1))
    with pytest.raises(InputError, match="input blocks alone need"):
        batch_count(s, 1000)


def test_grid_parsing_errors():
    assert str(Grid.parse("4x4x2")) == "4x4x2"
    for bad in ("2x3x1", "axb", "0x0x1"):
        with pytest.raises(InputError):
            Grid.parse(bad)
    with pytest.raises(InputError, match="square"):
        Grid.for_workers(3, 1)
    assert Grid.for_workers(8, 2) == Grid(2, 2)


@pytest.mark.parametrize("n, grid", [(1, "1x1x1"), (2, "2x2x1"), (3, "1x1x3"), (4, "2x2x1"),
                                     (6, "1x1x6"), (8, "4x4x1"), (9, "3x3x1"), (12, "2x2x3"),
                                     (16, "4x4x1"), (18, "6x6x1"), (32, "8x8x1")])
def test_default_grid_fits_any_worker_count(n, grid):
    # 2 or 8 workers failed with "do not form a square q x q x 1 grid"
    g = Grid.for_workers(n)
    assert str(g) == grid
    if g.p == 2 * n:
        # one layer, two cells a worker, where no square of workers makes one layer
        assert g.l == 1 and math.isqrt(n) ** 2 != n
    else:
        # one cell per worker, the largest square layer that uses every worker
        assert g.p == n and all(n % (q * q) for q in range(g.q + 1, n + 1))


def test_plan_reproduces_table_vi_trends_on_cora():
    """More layers: less broadcast, more fiber. More batches: A broadcast b times."""
    a = cora().adjacency
    p = 64
    by_l = {l: plan(a, a, grid=f"{math.isqrt(p // l)}x{math.isqrt(p // l)}x{l}", batches=1)
            for l in (1, 4, 16)}
    a_vol = [by_l[l]["steps"]["a_bcast"]["tot_vol"] for l in (1, 4, 16)]
    b_vol = [by_l[l]["steps"]["b_bcast"]["tot_vol"] for l in (1, 4, 16)]
    fiber = [by_l[l]["steps"]["fiber"]["tot_vol"] for l in (1, 4, 16)]
    assert a_vol[0] > a_vol[1] > a_vol[2]
    assert b_vol[0] > b_vol[1] > b_vol[2]
    assert fiber[0] == 0 < fiber[1] < fiber[2]
    one = plan(a, a, grid="4x4x4", batches=1)["steps"]
    for nb in (2, 5):
        more = plan(a, a, grid="4x4x4", batches=nb)["steps"]
        assert more["a_bcast"]["tot_vol"] == nb * one["a_bcast"]["tot_vol"]
        assert more["b_bcast"]["tot_vol"] == one["b_bcast"]["tot_vol"]
        assert more["a_bcast"]["phases"] == nb * one["a_bcast"]["phases"]
        assert more["fiber"]["tot_vol"] == one["fiber"]["tot_vol"]


def test_plan_for_thousands_of_cells_and_memory():
    a = cora().adjacency
    out = plan(a, a, grid="32x32x4", memory_per_worker="2MB")
    assert out["p"] == 4096 and out["batches"] >= 1
    assert out["estimate_s"]["total"] > 0
    assert set(out["table2"]) == {"a_bcast", "b_bcast", "fiber"}


def test_plan_rejects_bad_inputs():
    with pytest.raises(InputError, match="dimension mismatch"):
        plan(sp.eye(3, format="csr"), sp.eye(4, format="csr"))
    with pytest.raises(InputError, match="empty"):
        plan(sp.csr_array((3, 3)))
