"""Top-k selection, kernels, the epoch plan against an independent count, inputs, namespace."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import daskhpc.linear as lin
from daskhpc import datasets
from daskhpc.errors import InputError
from daskhpc.linear._kernels import (
    LOSSES,
    batch_features,
    batch_gradient,
    coefficients,
    losses,
    margins,
)
from daskhpc.linear._setup import permutation, prepare

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "allreduce"))
import allreduce_reference as reference  # noqa: E402  (the thesis's rules, by hand)


def test_exact_topk_takes_k_with_ties_to_the_lowest_index():
    g = np.array([3.0, -1.0, 2.0, -3.0, 1.0, 2.0, 0.0])
    assert lin.topk_exact(g, 1).tolist() == [0]
    assert lin.topk_exact(g, 3).tolist() == [0, 2, 3]          # |2| at 2 and 5: 2 wins
    assert lin.topk_exact(g, 5).tolist() == [0, 1, 2, 3, 5]    # |1| at 1 and 4: 1 wins
    assert lin.topk_exact(g, 10).tolist() == list(range(7))
    rng = np.random.default_rng(0)
    for _ in range(50):
        v = rng.integers(-3, 4, 40).astype(float)
        k = int(rng.integers(1, 40))
        want = sorted(sorted(range(40), key=lambda i: (-abs(v[i]), i))[:k])
        assert lin.topk_exact(v, k).tolist() == want


@pytest.mark.parametrize("case", ["flat", "peaked", "zero"])
def test_approx_topk_selects_k_in_expectation(case):
    rng = np.random.default_rng(1)
    N, k = 500, 12
    v = {"flat": rng.random(N) + 0.5, "zero": np.zeros(N),
         "peaked": np.concatenate([[1e3, -5e2], rng.random(N - 2) * 1e-2])}[case]
    p = lin.approx_probabilities(v, k)
    assert np.all((p >= 0) & (p <= 1)) and p.sum() == pytest.approx(k)   # Theorem 2.1
    if case == "peaked":                # ||v||_inf > ||v||_1 / k: the eps branch
        l1, linf = np.abs(v).sum(), np.abs(v).max()
        eps = (k * linf - l1) / (N - k)
        assert p[0] == pytest.approx(1.0) and p[5] == pytest.approx(
            k * (abs(v[5]) + eps) / (l1 + N * eps))
    draws = np.random.default_rng(2)
    counts = [lin.topk_approx(v, k, draws).size for _ in range(10_000)]
    assert abs(np.mean(counts) / k - 1) < 0.01


def test_kernels_match_the_formulas():
    X = sp.random_array((30, 20), density=0.3, random_state=3, format="csr")
    y = np.where(np.random.default_rng(4).random(30) > 0.5, 1.0, -1.0)
    w = np.random.default_rng(5).standard_normal(20)
    rows = np.array([3, 7, 1, 20])
    m = margins(X.indptr, X.indices, X.data, rows, w)
    assert np.allclose(m, X[rows] @ w)
    for loss, code in LOSSES.items():
        c = coefficients(m, y[rows], code)
        want = -y[rows] / (1 + np.exp(y[rows] * m)) if loss == "log" else \
            np.where(y[rows] * m < 1, -y[rows], 0.0)
        assert np.allclose(c, want)
        idx, val = batch_gradient(X.indptr, X.indices, X.data, rows, c)
        dense = X[rows].T @ c
        assert idx.tolist() == np.unique(X[rows].indices).tolist()   # the structural set
        assert np.allclose(val, dense[idx])
        ll = losses(m, y[rows], code)
        assert np.allclose(ll, np.logaddexp(0, -y[rows] * m) if loss == "log"
                           else np.maximum(0, 1 - y[rows] * m))
    assert np.isfinite(losses(np.array([1e4, -1e4]), np.array([-1.0, 1.0]), 0)).all()


def test_batch_features_are_the_gradients_index_sets():
    # the plans' sets of a whole epoch at once are the sets each step's gradient sends
    X = sp.random_array((57, 40), density=0.15, random_state=6, format="csr")
    X.data[::7] = 0.0                                    # explicit zeros stay in the sets
    rows = np.random.default_rng(7).permutation(57)
    B, T = 5, 14                             # 11 full batches, one of 2 rows, 2 empty
    ptr, idx = batch_features(X.indptr, X.indices, rows, B, T, X.shape[1])
    assert ptr.size == T + 1 and idx.dtype == np.uint32
    for i in range(T):
        r = rows[i * B:(i + 1) * B]
        want, _ = batch_gradient(X.indptr, X.indices, X.data, r, np.ones(r.size))
        assert np.array_equal(idx[ptr[i]:ptr[i + 1]], want), i
    assert ptr[-1] == ptr[-2] == ptr[-3]                 # past the rows: empty


def test_epoch_plan_equals_an_independent_count():
    tr = datasets.libsvm()
    s = prepare(tr, nparts=4, batch=8, epochs=1, allreduce="ssar_rec_dbl")
    X = s.data.X
    for i in (0, 1, 500, s.T - 1):
        algo, plan, _ = s.calls(0)[i]
        # the batch rows' feature sets, from scipy, then the thesis's Rec_Dbl by hand
        sets = [np.unique(X[s.rows[p][permutation(0, 0, p, s.rows[p].size)[8 * i:8 * i + 8]]]
                          .indices) for p in range(4)]
        want = reference.simulate("ssar_rec_dbl", sets, s.N)
        got = sorted(zip(plan.phase.tolist(), plan.src.tolist(), plan.dst.tolist(),
                         plan.volume.tolist(), [bool(d) for d in plan.meta["dense"]]))
        assert got == want
    rep = lin.plan(tr, nparts=4, batch=8, epochs=1, allreduce="ssar_rec_dbl")
    assert rep["plan"]["steps_per_epoch"] == 2 * s.T + 1
    assert rep["plan"]["messages_per_epoch"] == 8 * s.T


def test_an_epochs_prediction_counts_its_gradients_allreduces_and_evaluation():
    from daskhpc.linear._plan import GRADIENT_FLOPS, epoch_seconds

    tr = datasets.libsvm()
    s = prepare(tr, nparts=4, batch=8, epochs=1, allreduce="dense_rec_dbl", alpha=0.0,
                beta=0.0, floor=1.0)
    s.cost = s.cost.replace(flop_s=1.0)
    row_nnz = np.diff(s.data.X.indptr)
    part = np.array([row_nnz[r].sum() for r in s.rows], dtype=float)
    batch = (part * 8 / np.array([r.size for r in s.rows])).max()
    test = [np.diff(s.data.X_test.indptr)[r].sum() for r in s.test_rows] \
        if s.data.X_test is not None else [0] * 4
    # per call: its 2 rounds, a floor each, and the busiest batch's gradient; then the
    # evaluation (2 flops an entry of the busiest part) and its reported step's floor
    want = s.T * (2.0 + GRADIENT_FLOPS * batch) + 2.0 * max(part + test) + 1.0
    assert epoch_seconds(s, s.calls(0)) == pytest.approx(want)


def test_sent_bytes_equal_the_plan_without_topk():
    tr = datasets.libsvm()
    r = lin.fit_local(tr, nparts=4, batch=256, epochs=2)
    for h in r.history:
        assert h["sent_bytes"] == h["planned_sent_bytes"]


def test_a9a_test_width_is_padded(tmp_path):
    d = datasets.libsvm("test")
    narrow = sp.csr_array(d.matrix[:, :122])
    s = prepare(datasets.libsvm(), nparts=2, test=(narrow, d.labels))
    assert s.data.X_test.shape == (d.matrix.shape[0], 124)          # + intercept
    wide = sp.csr_array(sp.hstack([d.matrix, sp.csr_array(np.ones((d.matrix.shape[0], 2)))]))
    with pytest.raises(InputError, match="125 features, the training data 123"):
        prepare(datasets.libsvm(), nparts=2, test=(wide, d.labels))   # refused
    s = prepare(datasets.libsvm(), nparts=2, test=(wide, d.labels), n_features=125)
    assert s.data.X.shape[1] == s.data.X_test.shape[1] == 126 and not s.data.notes


@pytest.mark.parametrize("kwargs,match", [
    (dict(y=np.zeros(30)), "at least two label"),
    (dict(y=np.ones(7)), "labels for"),
    (dict(loss="squared"), "--loss"),
    (dict(topk=0), "--topk"),
    (dict(topk="approx"), "--k"),
    (dict(allreduce="fast"), "--allreduce"),
    (dict(lr=-1.0), "--lr"),
    (dict(nparts=31), "--parts"),
])
def test_bad_input_is_an_input_error(kwargs, match):
    X = np.random.default_rng(0).random((30, 5))
    kwargs.setdefault("y", np.array([0, 1] * 15))
    kwargs.setdefault("nparts", 2)
    with pytest.raises(InputError, match=match):
        prepare(X, **kwargs)


def test_namespace_and_no_dask():
    assert set(lin.__all__) == {"fit", "fit_local", "serial_fit", "plan", "LinearResult",
                                "topk_exact", "topk_approx", "approx_probabilities"}
    code = ("import sys, numpy as np, daskhpc.linear as lin\n"
            "X = np.random.default_rng(0).random((40, 6)); y = X[:, 0] > 0.5\n"
            "lin.fit_local(X, y, nparts=3, batch=4, epochs=1, alpha=1e-3, beta=1e-9)\n"
            "bad = [m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')]\n"
            "assert not bad, bad\n"
            "lin.plan(X, y, nparts=3, batch=4)\n"           # auto: reads dask.config only
            "assert 'distributed' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True)
