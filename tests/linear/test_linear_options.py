"""Penalties (L1 by the cumulative penalty, elastic net), class weights and
step-size schedules, the same on every part as in the serial reference."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

import daskhpc.linear as lin
from daskhpc import datasets
from daskhpc.errors import InputError
from daskhpc.linear._setup import parse_class_weight, prepare
from daskhpc.linear._update import CAP, batch_steps, bottou_t0, curvature, eta, rows_before

A9A = dict(nparts=4, batch=64, epochs=2)
_RUNS: dict = {}


def _a9a(**kw):
    key = tuple(sorted(kw.items()))
    if key not in _RUNS:
        _RUNS[key] = lin.fit_local(datasets.libsvm(), test=datasets.libsvm("test"),
                                   **{**A9A, **kw})
    return _RUNS[key]


def test_l1_gives_sparser_weights_than_l2_at_the_same_accuracy():
    l2, l1, en = _a9a(), _a9a(penalty="l1"), _a9a(penalty="elasticnet", l1_ratio=0.5)
    zeros = [int(np.sum(r.coef_ == 0)) for r in (l2, l1, en)]
    assert zeros[0] == 0 and zeros[1] > 20 and zeros[1] >= zeros[2] > 0, zeros
    acc = [r.history[-1]["test_accuracy"] for r in (l2, l1, en)]
    assert abs(acc[1] - acc[0]) <= 0.005 and abs(acc[2] - acc[0]) <= 0.005, acc
    assert l1.intercept_ != 0.0                     # the intercept is never penalised
    # the reported objective adds alpha |w|_1 for L1
    pen = 1e-4 * float(np.abs(l1.coef_).sum())
    h = l1.history[-1]
    assert h["train_loss"] == pytest.approx(l1.report()["quality"]["train_loss"])
    assert h["train_loss"] > pen > 0


def test_l1_serial_reference_agrees():
    r = _a9a(penalty="l1")
    s = lin.serial_fit(datasets.libsvm(), penalty="l1", **A9A)
    assert np.max(np.abs(r.w - s.w)) <= 1e-12 * np.max(np.abs(s.w))
    assert np.array_equal(r.coef_ == 0, s.coef_ == 0)


def test_l1_checkpoint_keeps_the_cumulative_penalty(client2, tmp_path):
    kw = dict(nparts=2, batch=512, penalty="elasticnet", l1_ratio=0.7)
    a = lin.fit(datasets.libsvm(), client=client2, epochs=1, checkpoint=tmp_path / "ck", **kw)
    b = lin.fit(datasets.libsvm(), client=client2, epochs=2, checkpoint=tmp_path / "ck",
                resume=True, **kw)
    want = lin.fit_local(datasets.libsvm(), epochs=2, **kw)
    assert b.report()["recovery"]["resumed_from"] == 1 and a.history[0]["epoch"] == 0
    assert np.array_equal(b.w, want.w)              # q and u came back from the checkpoint


def test_class_weight_raises_the_minority_recall(rare_a9a):
    X, y, Xt, yt = rare_a9a
    X, y = X[:8000], y[:8000]
    assert 0 < np.mean(y > 0) < 0.05
    recall = {}
    for cw in (None, "balanced", {1.0: 5.0}):
        r = lin.serial_fit(X, y, nparts=4, batch=32, epochs=3, class_weight=cw)
        recall[str(cw)] = float(np.mean(r.predict(Xt)[yt > 0] > 0))
    assert recall["balanced"] > recall["None"] + 0.3, recall
    assert recall["{1.0: 5.0}"] > recall["None"] + 0.1, recall


def test_class_weight_runs_equal_serial_and_on_the_cluster(client2, rare_a9a):
    X, y, _, _ = rare_a9a
    kw = dict(nparts=2, batch=256, epochs=1, class_weight="balanced", loss="hinge")
    r = lin.fit(X[:6000], y[:6000], client=client2, **kw)
    assert np.array_equal(r.w, lin.fit_local(X[:6000], y[:6000], **kw).w)
    s = lin.serial_fit(X[:6000], y[:6000], **kw)
    assert np.max(np.abs(r.w - s.w)) <= 1e-12 * np.max(np.abs(s.w))


def test_schedules():
    assert bottou_t0("log", 1e-4) == pytest.approx(1000.0)
    assert eta("optimal", 0.5, 0.5, 1e-4, 1000.0, 9000) == pytest.approx(1.0)
    assert eta("invscaling", 0.5, 0.5, 1e-4, 0.0, 3) == 0.25
    # a step of n rows: n per-sample steps at t, at most the cap; the L2 shrink of as
    # many per-sample steps
    a, b = batch_steps("optimal", 0.5, 0.5, 1e-4, 1000.0, 1e-4, np.array([0, 99000]),
                       np.array([64, 64]), 30.0)
    assert a.tolist() == pytest.approx([30.0, 64 * 0.1])
    assert b.tolist() == pytest.approx([1 - (1 - 1e-3) ** 3, 1 - (1 - 1e-5) ** 64])
    # the cap: CAP / L, L the logistic curvature bound lambda_max(X^T X / M) / 4
    X = sp.csr_array(np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 2.0]]))
    lam = np.linalg.eigvalsh((X.T @ X).toarray() / 3).max()
    L = curvature(X)
    assert L == float(f"{lam / 4:.3g}") and CAP == 6.0             # 3 significant digits
    # t counts the rows of every part's batches before the step (short parts run dry)
    assert rows_before([5, 3], 2, 3).tolist() == [0, 4, 7, 8]
    X = np.random.default_rng(0).standard_normal((60, 4))
    y = X[:, 0] > 0
    kw = dict(nparts=3, batch=4, epochs=2)
    const = lin.fit_local(X, y, learning_rate="constant", lr=0.1, **kw)
    # invscaling with power 0 is the constant step
    assert np.array_equal(const.w, lin.fit_local(X, y, learning_rate="invscaling", lr=0.1,
                                                 power_t=0.0, **kw).w)
    opt = lin.fit_local(X, y, **kw)                 # the default schedule
    assert opt.report()["learning_rate"] == "optimal"
    assert not np.array_equal(opt.w, const.w)


@pytest.mark.parametrize("kwargs,match", [
    (dict(penalty="l3"), "--penalty"),
    (dict(l1_ratio=1.5), "--l1-ratio"),
    (dict(learning_rate="adaptive"), "--learning-rate"),
    (dict(learning_rate="legacy"), "--learning-rate"),
    (dict(reg=0.0), "optimal needs --reg > 0"),
    (dict(class_weight="heavy"), "--class-weight"),
    (dict(class_weight={7: 2.0}), "label 7 is not among"),
    (dict(class_weight={1: -1.0}), "must be a number >= 0"),
    (dict(batch=0), "--batch must be a positive integer or 'auto', got 0"),
    (dict(batch="big"), "--batch must be a positive integer or 'auto', got 'big'"),
    (dict(batch=2.5), "--batch must be a positive integer or 'auto'"),
    (dict(tol=-1.0), "--tol must be at least 0, not -1.0"),
    (dict(n_iter_no_change=0), "--n-iter-no-change must be at least 1, not 0"),
])
def test_bad_options_are_input_errors(kwargs, match):
    X = np.random.default_rng(0).random((30, 5))
    with pytest.raises(InputError, match=match):
        prepare(X, np.array([0, 1] * 15), 2, **kwargs)


def test_auto_batch_follows_the_cost_model_and_the_step_cap():
    """--batch auto (the default): one part keeps B = 8; with more parts B is the least of
    the rows per part / 256 and the batch whose rows cost the modelled allreduce."""
    X, y = datasets.libsvm().matrix, datasets.libsvm().labels
    one = prepare(X, y, 1)
    assert one.options.batch == 8 and one.batch_auto["batch"] == 8
    m = max(r.size for r in prepare(X, y, 2, batch=8).rows)
    s = prepare(X, y, 2, alpha=1e-3, beta=1e-9)         # a cluster's cost: the cap binds
    assert s.options.batch == -(-m // 256) == s.batch_auto["steps_cap"]
    assert s.batch_auto["cost_batch"] > s.options.batch
    assert s.T == -(-m // s.options.batch) and s.T <= 256
    # an allreduce of 20 microseconds pays for a few dozen rows: the cost binds
    cheap = prepare(X, y, 2, alpha=2e-5, beta=1e-12)
    row_s = cheap.data.X.nnz / cheap.data.X.shape[0] * 45e-9     # the intercept included
    assert row_s == pytest.approx(cheap.batch_auto["row_s"])
    expect = max(8, int(np.ceil(cheap.batch_auto["allreduce_s"] / row_s)))
    assert 8 < cheap.options.batch == expect < s.options.batch
    # a stated batch is used as given, and nothing is chosen
    assert prepare(X, y, 2, batch=8).batch_auto is None
    rep = lin.plan(X, y, 2, epochs=1, alpha=1e-3, beta=1e-9)
    assert rep["options"]["batch"] == rep["batch_auto"]["batch"] == s.options.batch


def _sklearn_rule(losses, tol, n):
    """Epochs scikit-learn's SGD runs on these training losses (its no-improvement count,
    written out): the first epoch after which the count reaches n."""
    best, count = np.inf, 0
    for e, loss in enumerate(losses):
        count = count + 1 if loss > best - tol else 0
        best = min(best, loss)
        if count >= n:
            return e + 1
    return len(losses)


def test_tol_stops_where_scikit_learns_rule_does(client2):
    d = datasets.libsvm()
    X, y = d.matrix[:6000], d.labels[:6000]
    kw = dict(nparts=2, epochs=40, tol=1e-2, n_iter_no_change=2)
    loc = lin.fit_local(X, y, check_serial=True, **kw)
    n = len(loc.history)
    full = lin.fit_local(X, y, nparts=2, epochs=n + 3)      # no tol: every epoch runs
    assert len(full.history) == n + 3 and "stopped" not in full.report()
    losses = [h["train_loss"] for h in full.history]
    assert 2 <= n < 40 and _sklearn_rule(losses, 1e-2, 2) == n
    assert [h["train_loss"] for h in loc.history] == losses[:n]
    assert loc.report()["stopped"]["early"] and loc.report()["stopped"]["epochs"] == n
    assert loc.report()["serial_check"]["max_rel_diff"] <= 1e-12
    assert len(lin.serial_fit(X, y, **kw).history) == n
    run = lin.fit(X, y, client=client2, progress=False, check_serial=True, **kw)
    assert len(run.history) == n and np.array_equal(run.w, loc.w)
    rep = run.report()
    assert rep["stopped"]["early"] and rep["serial_check"]["within_tolerance"]
    assert rep["measured"]["inter_worker_messages"] == rep["measured"]["planned_messages"]
    # the estimator's n_iter_ counts the epochs that ran
    sk = pytest.importorskip("sklearn")
    del sk
    from daskhpc.linear import SGDClassifier

    clf = SGDClassifier(max_iter=40, tol=1e-2, n_iter_no_change=2, n_parts=2).fit(X, y)
    assert clf.n_iter_ == n


def test_tol_flags_parse():
    from daskhpc.testing import workflow_call

    _, call, _ = workflow_call("plan", "linear", [datasets.path("libsvm"), "--tol", "0.01",
                                                  "--n-iter-no-change", "3"])
    assert call.options.tol == 0.01 and call.options.n_iter_no_change == 3
    _, call, _ = workflow_call("plan", "linear", [datasets.path("libsvm")])
    assert call.options.tol is None and call.options.n_iter_no_change == 5


def test_class_weight_flag_parses():
    assert parse_class_weight("balanced") == "balanced"
    assert parse_class_weight("1:2,-1:0.5") == {1.0: 2.0, -1.0: 0.5}
    assert parse_class_weight("cat:2") == {"cat": 2.0}
    with pytest.raises(InputError, match="--class-weight"):
        parse_class_weight("1=2")


@pytest.mark.slow
def test_new_flags_through_the_console_script(tmp_path):
    exe = os.path.join(os.path.dirname(sys.executable), "daskhpc")
    done = subprocess.run([exe, "run", "linear", datasets.path("libsvm"), "--penalty", "l4",
                           "--workers", "2"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "--penalty" in done.stderr and "dashboard:" not in \
        done.stderr
    done = subprocess.run([exe, "run", "linear", datasets.path("libsvm"), "--workers", "2",
                           "--batch", "512", "--epochs", "1", "--penalty", "l1",
                           "--class-weight", "balanced", "--learning-rate", "invscaling",
                           "--lr", "2", "--json", str(tmp_path / "r.json")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    import json

    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["options"]["penalty"] == "l1" and rep["options"]["class_weight"] == "balanced"
    assert rep["learning_rate"] == "invscaling"
