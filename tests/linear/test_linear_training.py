"""Training on a9a (P = 4): sparse vs dense allreduce, sklearn, Top-k, the serial reference."""

from __future__ import annotations

import numpy as np
import pytest

import daskhpc.linear as lin
from daskhpc import datasets


@pytest.fixture(scope="module")
def a9a():
    return datasets.libsvm(), datasets.libsvm("test")


_RUNS: dict = {}


def _fit(a9a, **kw):
    """fit_local on a9a, P = 4, B = 8 (runs shared by the tests of this module)."""
    tr, te = a9a
    kw.setdefault("epochs", 1)
    key = tuple(sorted(kw.items()))
    if key not in _RUNS:
        _RUNS[key] = lin.fit_local(tr, nparts=4, batch=8, test=te, **kw)
    return _RUNS[key]


def _rel(a, b):
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


@pytest.mark.parametrize("loss", ["log", "hinge"])
def test_sparse_allreduce_training_equals_dense(a9a, loss):
    dense = _fit(a9a, loss=loss, allreduce="dense_rabenseifner")
    Xt = a9a[1].matrix
    for algo in ("ssar_rec_dbl", "ssar_split_allgather"):
        sparse = _fit(a9a, loss=loss, allreduce=algo)
        assert _rel(sparse.w, dense.w) <= 1e-12, algo
        assert np.array_equal(sparse.predict(Xt), dense.predict(Xt)), algo
        # the sparse streams carry the union of the batch rows' features: fewer items
        assert sparse.history[-1]["items"] < dense.history[-1]["items"]


@pytest.mark.parametrize("loss,sk_loss", [("log", "log_loss"), ("hinge", "hinge")])
def test_test_accuracy_at_least_sklearn_sgdclassifier(a9a, loss, sk_loss):
    sklm = pytest.importorskip("sklearn.linear_model")
    import warnings

    import scipy.sparse as sp

    tr, te = a9a
    epochs = 5
    ours = _fit(a9a, loss=loss, epochs=epochs).history[-1]["test_accuracy"]

    def csr32(A):
        A = sp.csr_matrix(A)
        A.indices, A.indptr = A.indices.astype(np.int32), A.indptr.astype(np.int32)
        return A

    X, Xt = csr32(tr.matrix), csr32(te.matrix)
    accs = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")            # ConvergenceWarning at max_iter
        for seed in range(3):
            clf = sklm.SGDClassifier(loss=sk_loss, max_iter=epochs, tol=None,
                                     random_state=seed).fit(X, tr.labels)
            accs.append(clf.score(Xt, te.labels))
    assert ours >= np.mean(accs), (ours, accs)


@pytest.mark.slow             # CI budget (20 min on 2 cores): default run keeps a lighter test of the same path
def test_topk_with_error_feedback_close_to_dense(a9a):
    dense = _fit(a9a, loss="log", epochs=5).history[-1]["test_accuracy"]
    ef = _fit(a9a, epochs=5, topk=12)
    noef = _fit(a9a, epochs=5, topk=12, error_feedback=False)
    assert abs(ef.history[-1]["test_accuracy"] - dense) <= 0.005
    # reported beside it: the no-feedback variant runs, sends k items per part and call
    assert noef.report()["error_feedback"] is False
    assert 0.5 < noef.history[-1]["test_accuracy"] < 1.0
    calls = ef.report()["steps"]["iterations_per_epoch"]
    first_stage_items = 4 * 12 * calls          # each part sends exactly k items first
    assert ef.history[-1]["items"] >= first_stage_items


def test_k_at_least_features_equals_dense_exactly(a9a):
    N = a9a[0].matrix.shape[1] + 1                 # 123 features + intercept
    dense = _fit(a9a, allreduce="ssar_rec_dbl")
    for k in (N, N + 10):
        top = _fit(a9a, allreduce="ssar_rec_dbl", topk=k)
        assert np.array_equal(top.w, dense.w)


def test_run_local_close_to_plain_serial_sgd(a9a):
    tr, te = a9a
    for loss in ("log", "hinge"):
        r = lin.fit_local(tr, nparts=4, batch=8, epochs=1, loss=loss, check_serial=True)
        assert r.report()["serial_check"]["max_rel_diff"] <= 1e-12
    s = lin.serial_fit(tr, nparts=4, batch=8, epochs=1, test=te)
    r = lin.fit_local(tr, nparts=4, batch=8, epochs=1, test=te)
    assert abs(s.history[0]["test_accuracy"] - r.history[0]["test_accuracy"]) < 1e-4


def test_result_predicts_like_its_history(a9a):
    tr, te = a9a
    r = _fit(a9a, allreduce="ssar_rec_dbl")
    assert r.score(te.matrix, te.labels) == pytest.approx(r.history[-1]["test_accuracy"])
    d = r.decision_function(te.matrix)
    assert np.array_equal(r.predict(te.matrix), np.where(d > 0, 1.0, -1.0))
    assert repr(r).startswith("LinearResult(parts=4, loss=log")
