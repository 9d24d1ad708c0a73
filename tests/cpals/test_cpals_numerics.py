"""Numerics of the serial reference: MTTKRP and fit against dense definitions, monotone
fit, the singular cases a Cholesky solve fails on, no NaN on real data for any seed."""

from __future__ import annotations

import numpy as np
import pytest

from daskhpc.cpals import as_tensor, mttkrp, serial_fit
from daskhpc.cpals._kernels import mttkrp_into, slices
from daskhpc.cpals._rows import init_rows
from daskhpc.cpals._serial import run_serial


def dense_mttkrp(D, U, n):
    """X_(n) (KR of the other factors) by einsum over the dense tensor."""
    letters = "abcdefg"[:D.ndim]
    ops = [f"{letters[m]}r" for m in range(D.ndim) if m != n]
    spec = letters + "," + ",".join(ops) + "->" + letters[n] + "r"
    return np.einsum(spec, D, *[U[m] for m in range(D.ndim) if m != n])


def dense_fit(D, lam, U):
    letters = "abcdefg"[:D.ndim]
    spec = ",".join(f"{c}r" for c in letters) + ",r->" + letters
    model = np.einsum(spec, *U, lam)
    return 1.0 - np.linalg.norm(D - model) / np.linalg.norm(D)


def test_mttkrp_equals_dense_einsum_on_nations(tensor):
    X = tensor("nations")
    D = X.to_dense()
    rng = np.random.default_rng(0)
    U = [rng.random((n, 7)) for n in X.shape]
    for n in range(3):
        got, want = mttkrp(X.coords, X.vals, U, n), dense_mttkrp(D, U, n)
        assert np.abs(got - want).max() <= 1e-12 * np.abs(want).max()


@pytest.mark.parametrize("fibers", [False, True])
def test_mttkrp_order_4_both_kernels(fibers):
    """The generic (order != 3) kernels, with and without fiber reuse."""
    rng = np.random.default_rng(1)
    D = rng.random((4, 5, 3, 6)) * (rng.random((4, 5, 3, 6)) < 0.3)
    X = as_tensor(D)
    U = [rng.random((n, 5)) for n in D.shape]
    for n in range(4):
        s = slices(X.coords, X.vals, n, X.shape, fibers=fibers)
        out = np.empty((X.shape[n], 5))
        mttkrp_into(s, U, out)
        want = dense_mttkrp(D, U, n)
        assert np.abs(out - want).max() <= 1e-12 * np.abs(want).max()


@pytest.mark.parametrize("order", [3, 4])
@pytest.mark.parametrize("row_first_max", [0, 4096])
@pytest.mark.parametrize("long_mode", [False, True])
def test_slices_are_the_stable_sort_by_row_then_outer_mode(order, row_first_max, long_mode,
                                                           monkeypatch):
    """Both groupings (two global counting sorts; row by row, counting or merge sort)
    against numpy's lexsort: nonzeros by (row, shortest other mode), storage order among
    equals; ``select`` equals slicing the copies; fibers decided from the number of
    (row, outer) groups. ``long_mode``: the outer mode longer than 4 x a row's nonzeros
    (the row by row merge sort)."""
    from daskhpc.cpals import _kernels

    monkeypatch.setattr(_kernels, "ROW_FIRST_MAX", row_first_max)
    rng = np.random.default_rng(order)
    shape = tuple(int(x) for x in rng.integers(2, 9, order))
    if long_mode:
        shape = tuple(n * 60 for n in shape)
    nnz = 300
    coords = np.stack([rng.integers(0, n, nnz) for n in shape])
    vals = rng.random(nnz)
    sel = np.flatnonzero(rng.random(nnz) < 0.6)
    for n in range(order):
        for c, v, pick in ((coords, vals, None), (coords[:, sel], vals[sel], sel)):
            s = slices(coords, vals, n, shape, select=pick)
            outer = s.modes[0]
            assert shape[outer] == min(shape[m] for m in range(order) if m != n)
            o = np.lexsort((np.arange(v.size), c[outer], c[n]))
            assert s.ptr.tolist() == np.concatenate(
                [[0], np.cumsum(np.bincount(c[n], minlength=shape[n]))]).tolist()
            assert np.array_equal(s.idx, c[list(s.modes)][:, o])
            assert np.array_equal(s.val, v[o])
            keys = c[n][o] * shape[outer] + c[outer][o]
            groups = np.unique(keys).size
            assert s.fibers == (v.size >= 3.0 * groups)


def test_fiber_and_plain_kernels_agree_on_mlsmall(tensor):
    X = tensor("mlsmall")
    U = [init_rows(3, m, np.arange(n), 8) for m, n in enumerate(X.shape)]
    for n in range(3):
        a, b = (np.empty((X.shape[n], 8)) for _ in range(2))
        mttkrp_into(slices(X.coords, X.vals, n, X.shape, fibers=False), U, a)
        mttkrp_into(slices(X.coords, X.vals, n, X.shape, fibers=True), U, b)
        assert np.abs(a - b).max() <= 1e-12 * np.abs(a).max()


def test_initial_rows_depend_only_on_seed_mode_row():
    a = init_rows(5, 2, np.arange(100), 4)
    assert np.array_equal(a[[7, 93, 7]], init_rows(5, 2, np.array([7, 93, 7]), 4))
    assert not np.array_equal(a, init_rows(6, 2, np.arange(100), 4))
    assert not np.array_equal(a, init_rows(5, 1, np.arange(100), 4))
    assert 0.0 <= a.min() and a.max() < 1.0 and abs(a.mean() - 0.5) < 0.05


@pytest.mark.parametrize("name", ["nations", "umls"])
def test_fit_equals_the_dense_fit_and_never_decreases(tensor, name):
    X = tensor(name)
    out = run_serial(X, 10, 15, 0.0, 0)
    fits = [h["fit"] for h in out["history"]]
    assert abs(fits[-1] - dense_fit(X.to_dense(), out["lam"], out["factors"])) <= 1e-10
    assert all(b >= a - 1e-12 for a, b in zip(fits, fits[1:]))
    assert fits[-1] > fits[0] > 0.0


def test_stop_rule_stops_when_the_fit_settles(tensor):
    X = tensor("nations")
    short = serial_fit(X, 5, iters=200, tol=1e-4)
    fits = short.fit
    assert len(fits) < 200
    assert abs(fits[-1] - fits[-2]) < 1e-4 and all(abs(b - a) >= 1e-4 for a, b in
                                                   zip(fits[:-2], fits[1:-1]))


def test_single_nonzero_at_rank_3_is_exact():
    """H = *_m U_m^T U_m is rank 1 after two modes: Cholesky fails, the pseudo-inverse
    gives the exact fit."""
    res = serial_fit(([[1], [2], [0]], [3.5], (3, 3, 3)), 3, iters=10, tol=0)
    assert all(np.isfinite(f).all() for f in res.factors) and np.isfinite(res.weights).all()
    assert res.fit[-1] >= 1 - 1e-7
    assert abs(res.reconstruct([[1], [2], [0]])[0] - 3.5) < 1e-6


def test_exact_rank_2_at_rank_4_is_exact():
    rng = np.random.default_rng(7)
    A, B, C = rng.random((6, 2)), rng.random((5, 2)), rng.random((7, 2))
    D = np.einsum("ir,jr,kr->ijk", A, B, C)
    res = serial_fit(D, 4, iters=200, tol=0)
    assert all(np.isfinite(f).all() for f in res.factors) and np.isfinite(res.weights).all()
    assert res.fit[-1] >= 1 - 1e-7
    assert abs(res.fit[-1] - dense_fit(D, res.weights, res.factors)) <= 1e-7


@pytest.mark.parametrize("name", ["umls", "mlsmall"])
@pytest.mark.parametrize("rank", [10, 16])
def test_no_nan_on_real_tensors_for_seeds_0_to_9(tensor, name, rank):
    X = tensor(name)
    for seed in range(10):
        out = run_serial(X, rank, 5, 0.0, seed)
        assert all(np.isfinite(U).all() for U in out["factors"])
        assert np.isfinite(out["lam"]).all()
        assert all(np.isfinite(h["fit"]) for h in out["history"])
