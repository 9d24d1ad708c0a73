"""CP-ALS options: L2 regularisation (``reg``), nonnegative factors (projected
ALS) and the initial factors (``init``: random, svd, given), on 2 workers against both
serial references, against dense definitions and tensorly, and through the console script."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import daskhpc as dh
from daskhpc import datasets
from daskhpc.comm import run_local
from daskhpc.cpals import as_tensor, assemble, prepare, program, serial_fit, statics
from daskhpc.cpals._init import svd_factors
from daskhpc.cpals._program import fingerprint, row
from daskhpc.cpals._rows import init_rows
from daskhpc.errors import InputError

EXE = os.path.join(os.path.dirname(sys.executable), "daskhpc")


def small_tensor(seed=1, shape=(9, 8, 7), nnz=150):
    """A small sparse tensor and its dense array."""
    rng = np.random.default_rng(seed)
    D = np.zeros(shape)
    D.flat[rng.choice(D.size, nnz, replace=False)] = rng.random(nnz)
    nz = np.nonzero(D)
    return as_tensor((np.array(nz), D[nz], shape)), D


def dense_fit(D, lam, factors):
    model = np.einsum("ir,jr,kr,r->ijk", *factors, lam)
    return 1.0 - np.linalg.norm(D - model) / np.linalg.norm(D)


@pytest.mark.parametrize("grain,partition", [("fine", "hp"), ("coarse", "block")])
@pytest.mark.parametrize("opts", [dict(reg=0.1), dict(nonnegative=True, reg=0.1, init="svd")],
                         ids=["reg", "nonneg-reg-svd"])
def test_options_on_two_workers_equal_both_references(client2, grain, partition, opts):
    res = dh.cpals.fit(datasets.path("tensor"), 8, 4, client=client2, grain=grain,
                       partition=partition, iters=6, tol=0, check_serial=True, **opts)
    check = res.report()["serial_check"]
    assert check["identical"] is True and check["max_abs_diff"] == 0.0
    plain = check["plain_serial"]
    assert plain["within_tolerance"] and plain["max_rel_diff"] < 1e-9
    rep = res.report()
    assert rep["reg"] == 0.1 and rep["init"] == opts.get("init", "random")
    assert rep["nonnegative"] is opts.get("nonnegative", False)
    if opts.get("nonnegative"):
        assert min(float(F.min()) for F in res.factors) >= 0.0
    else:                                       # the unconstrained run has negative entries
        assert min(float(F.min()) for F in res.factors) < 0.0


@pytest.mark.parametrize("grain,partition", [("fine", "random"), ("coarse", "block")])
def test_given_factors_reach_the_parts(grain, partition):
    """Given factors: every part starts from its rows of them (partition-aware reference
    equals the plain serial one started from the same matrices, not from the seeded ones)."""
    X, _ = small_tensor()
    rng = np.random.default_rng(7)
    F0 = [rng.random((n, 3)) for n in X.shape]
    s = prepare(X, 3, grain=grain, partition=partition, rank=3, iters=4, tol=0, init=F0,
                nonnegative=True)
    finals, reports = run_local(program(s), statics(s))
    lam, factors = assemble(s, finals)
    ser = serial_fit(X, 3, iters=4, tol=0, init=F0, nonnegative=True)
    for a, b in zip(factors, ser.factors):
        assert np.abs(a - b).max() <= 1e-12 * np.abs(b).max()
    seeded = serial_fit(X, 3, iters=4, tol=0, nonnegative=True)
    assert abs(ser.fit[-1] - seeded.fit[-1]) > 1e-6
    assert [row(s, u, r)["fit"] for u, r in enumerate(reports)] == pytest.approx(ser.fit,
                                                                                  abs=1e-12)


@pytest.mark.parametrize("opts", [dict(nonnegative=True), dict(nonnegative=True, reg=0.5),
                                  dict(reg=1.0, init="svd")])
def test_reported_fit_is_the_dense_fit(opts):
    """The fit from Grams and the inner product stays right for clipped and regularised
    factors: it equals ``1 - ||X - model|| / ||X||`` of the returned model."""
    X, D = small_tensor()
    res = serial_fit(X, 4, iters=7, tol=0, **opts)
    assert res.fit[-1] == pytest.approx(dense_fit(D, res.weights, res.factors), abs=1e-12)
    if opts.get("nonnegative"):
        assert all(float(F.min()) >= 0.0 for F in res.factors)


def test_regularised_solve_is_the_normal_equations():
    """One mode-0 update from given factors: ``M (H + reg I)^{-1}`` by a dense solve."""
    X, D = small_tensor()
    rng = np.random.default_rng(3)
    F0 = [rng.random((n, 2)) for n in X.shape]
    reg = 0.3
    M = np.einsum("ijk,jr,kr->ir", D, F0[1], F0[2])
    H = (F0[1].T @ F0[1]) * (F0[2].T @ F0[2]) + reg * np.eye(2)
    U0 = np.linalg.solve(H, M.T).T
    res = serial_fit(X, 2, iters=1, tol=0, reg=reg, init=F0)
    # after one iteration mode 0 is normalised by column 2-norms into lambda; the
    # normalised columns of the dense solution are the same direction
    got = res.factors[0]
    want = U0 / np.linalg.norm(U0, axis=0)
    assert np.abs(got - want).max() < 1e-12


def test_svd_init_fits_better_after_one_iteration():
    X = datasets.path("tensor")
    svd = serial_fit(X, 10, iters=1, tol=0, init="svd").fit[-1]
    rnd = serial_fit(X, 10, iters=1, tol=0, init="random").fit[-1]
    assert svd > rnd + 0.01


def test_svd_factors_are_the_leading_singular_vectors():
    X, D = small_tensor()
    F = svd_factors(X, 3, seed=0)
    for n, U in enumerate(F):
        unf = np.moveaxis(D, n, 0).reshape(D.shape[n], -1)
        Q = np.linalg.svd(unf, full_matrices=False)[0][:, :3]
        assert np.abs(np.abs(Q.T @ U) - np.eye(3)).max() < 1e-10
    # I_n < R: the missing columns are the seeded random ones; nonnegative: |U|
    F = svd_factors(X, 10, seed=0, nonnegative=True)
    assert F[2].shape == (7, 10) and float(F[2].min()) >= 0.0
    assert np.array_equal(F[2][:, 7:], np.abs(init_rows(0, 2, np.arange(7), 10)[:, 7:]))


def test_svd_factors_by_arpack_span_the_same_space(monkeypatch):
    """Above ``DENSE_GRAM_ROWS`` rows the leading eigenvectors come from ARPACK: the same
    vectors (up to rounding) as the dense eigendecomposition."""
    from daskhpc.cpals import _init

    X, _ = small_tensor()
    dense = svd_factors(X, 3, seed=0)
    monkeypatch.setattr(_init, "DENSE_GRAM_ROWS", 0)
    arpack = svd_factors(X, 3, seed=0)
    for a, b in zip(arpack, dense):
        assert np.abs(a - b).max() < 1e-8


def test_tensorly_parafac_agrees(request):
    """tensorly's ``parafac`` from the same initial factors: equal fits without
    regularisation; with ``l2_reg`` the same penalty on factors scaled as each library
    keeps them (ours normalised into lambda, tensorly's not), within 1e-3 after 10
    iterations."""
    tl = pytest.importorskip("tensorly")
    from tensorly.decomposition import parafac

    X, D = small_tensor()
    F0 = svd_factors(X, 3, seed=0)
    for reg, iters, tol in ((0.0, 5, 1e-9), (0.1, 10, 1e-3), (1.0, 10, 1e-3)):
        ours = serial_fit(X, 3, iters=iters, tol=0, reg=reg, init=F0).fit[-1]
        cp = parafac(tl.tensor(D), 3, n_iter_max=iters, init=(np.ones(3), [f.copy() for f in F0]),
                     l2_reg=reg, tol=0)
        theirs = 1.0 - np.linalg.norm(D - tl.cp_to_tensor(cp)) / np.linalg.norm(D)
        assert abs(ours - theirs) < tol, (reg, ours, theirs)


def test_bad_options_are_one_line_input_errors():
    X, _ = small_tensor()
    with pytest.raises(InputError, match="--reg must be at least 0, not -1.0"):
        prepare(X, 2, reg=-1.0)
    with pytest.raises(InputError, match="unknown --init 'pca'"):
        prepare(X, 2, init="pca")
    with pytest.raises(InputError, match=r"init: factor 1 has shape \(3, 2\)"):
        prepare(X, 2, rank=2, init=[np.ones((9, 2)), np.ones((3, 2)), np.ones((7, 2))])


def test_fingerprint_covers_the_options():
    X, _ = small_tensor()
    base = fingerprint(prepare(X, 2, partition="random"))
    for opts in (dict(reg=0.1), dict(nonnegative=True), dict(init="svd")):
        fp = fingerprint(prepare(X, 2, partition="random", **opts))
        assert fp != base and {k: v for k, v in fp.items() if k not in opts} == \
            {k: v for k, v in base.items() if k not in opts}


@pytest.mark.slow                     # CI budget: the 2-worker API tests cover the options
@pytest.mark.timeout(900)             # a cluster's start and stop through the script, loaded
def test_console_script_nonnegative_reg_svd_check_serial(tmp_path):
    out = tmp_path / "r.json"
    done = subprocess.run([EXE, "run", "cpals", datasets.path("tensor"), "--parts", "2",
                           "--workers", "2", "--rank", "6", "--iters", "3", "--tol", "0",
                           "--grain", "coarse", "--partition", "block", "--nonnegative",
                           "--reg", "0.1", "--init", "svd", "--check-serial", "--json",
                           str(out)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    rep = json.loads(out.read_text())
    assert (rep["reg"], rep["nonnegative"], rep["init"]) == (0.1, True, "svd")
    assert rep["serial_check"]["identical"] is True
    assert rep["serial_check"]["plain_serial"]["within_tolerance"] is True
    assert "within 1e-09" in done.stdout
    bad = subprocess.run([EXE, "run", "cpals", datasets.path("tensor"), "--parts", "2",
                          "--reg", "-1"], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        "daskhpc: error: --reg must be at least 0, not -1.0"]


def test_a_run_stopped_by_tol_says_so(client2):
    """The tol rule ends the run early: the report and the summary say at which iteration
    of how many, and by how much the fit last changed; tol=0 says nothing."""
    from daskhpc import _workflows

    res = dh.cpals.fit(datasets.path("tensor"), 10, 2, client=client2, iters=20, tol=1e-3)
    rep = res.report()
    q = rep["quality"]
    assert q["converged"] is True and q["iterations"] < 20
    assert q["fit_change"] == abs(q["fit"][-1] - q["fit"][-2]) < 1e-3
    summary = _workflows.load("cpals").summary(rep)
    assert (f"  stopped    converged at iteration {q['iterations']} of 20: the fit changed "
            f"by {q['fit_change']:.2g} < --tol 0.001") in summary.splitlines()
    ser = serial_fit(datasets.path("tensor"), 10, iters=20, tol=1e-3).report()["quality"]
    assert ser["iterations"] == q["iterations"] and ser["converged"] is True
    short = serial_fit(datasets.path("tensor"), 10, iters=3, tol=1e-3).report()
    assert short["quality"]["converged"] is False
    assert "ran all 3 iterations: the fit still changed by" in \
        _workflows.load("cpals").summary(short)
    full = serial_fit(datasets.path("tensor"), 10, iters=3, tol=0).report()
    assert "converged" not in full["quality"]
    assert "stopped" not in _workflows.load("cpals").summary(full)
