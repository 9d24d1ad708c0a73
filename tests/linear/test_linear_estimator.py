"""Scikit-learn estimators over daskhpc.linear (SGDClassifier, LogisticRegression):
sklearn stays optional (``import daskhpc.linear`` does not load it), the conventions hold
(check_estimator: every check passes but the one listed in EXCLUDED), and with a client the
cluster trains the same model as fit_local."""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest

import daskhpc.linear as lin

pytest.importorskip("sklearn")


def test_import_does_not_load_sklearn():
    code = ("import sys, daskhpc.linear as lin\n"
            "assert not [m for m in sys.modules if m.split('.')[0] == 'sklearn']\n"
            "assert 'SGDClassifier' in dir(lin)\n"
            "lin.SGDClassifier\n"
            "assert 'sklearn' in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def _data(n=300, classes=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 5))
    y = np.argmax(X[:, :classes], axis=1) if classes > 2 else (X[:, 0] + X[:, 1] > 0)
    return X, y


def test_sgdclassifier_conventions_binary_and_multiclass():
    from sklearn.base import clone

    clf = lin.SGDClassifier(alpha=1e-3, max_iter=3, random_state=1)
    assert clf.get_params()["alpha"] == 1e-3 and clone(clf).get_params() == clf.get_params()
    X, y = _data()
    clf.fit(X, y)
    assert clf.coef_.shape == (1, 5) and clf.intercept_.shape == (1,)
    assert clf.n_features_in_ == 5 and clf.classes_.tolist() == [False, True]
    assert clf.score(X, y) > 0.9 and clf.decision_function(X).shape == (300,)
    assert np.allclose(clf.predict_proba(X).sum(axis=1), 1.0)
    # the same training as the function API (no client: the plain serial reference)
    r = lin.serial_fit(X, y, nparts=4, batch=8, epochs=3, reg=1e-3, seed=1)
    assert np.array_equal(clf.coef_[0], r.coef_) and clf.intercept_[0] == r.intercept_
    X3, y3 = _data(classes=3)
    m = clf.set_params(loss="hinge").fit(X3, y3)
    assert m.coef_.shape == (3, 5) and m.decision_function(X3).shape == (300, 3)
    assert m.score(X3, y3) > 0.8 and not hasattr(m, "predict_proba")


def test_logistic_regression_maps_c_to_alpha():
    X, y = _data()
    m = lin.LogisticRegression(C=2.0, max_iter=2).fit(X, y)
    assert m.result_.report()["options"]["reg"] == pytest.approx(1 / (2.0 * 300))
    assert m.score(X, y) > 0.9 and m.predict_proba(X).shape == (300, 2)


@pytest.mark.slow             # CI budget (20 min on 2 cores): default run keeps a lighter test of the same path
def test_estimator_on_a_cluster_equals_fit_local(client2):
    X, y = _data(classes=3)
    m = lin.SGDClassifier(client=client2, max_iter=2, batch_size=16).fit(X, y)
    r = lin.fit_local(X, y, nparts=2, batch=16, epochs=2)
    assert np.array_equal(m.coef_, r.coef_) and np.array_equal(m.intercept_, r.intercept_)


#: Checks that fail for a variant, and why (docs/linear.md lists them too).
EXCLUDED = {
    # class weights {0: 1000, 1 and 2: 1e-4} (a ratio of 1e7) on unscaled blobs (std 20)
    # for 1000 epochs: hinge + L1 predicts class 0 for 86 % of the 3-class test rows, the
    # check wants > 87 % (hinge + L2: 90 %, log + L1: 92 %)
    "sgd-hinge-l1": {"check_class_weight_classifiers"},
}


@pytest.mark.slow        # ~20 s per estimator (every check fits several times)
@pytest.mark.parametrize("make", [lambda: lin.SGDClassifier(),
                                  lambda: lin.SGDClassifier(loss="hinge", penalty="l1"),
                                  lambda: lin.LogisticRegression()],
                         ids=["sgd-log", "sgd-hinge-l1", "logistic"])
def test_check_estimator(make, request):
    from sklearn.utils.estimator_checks import check_estimator

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")       # SkipTestWarning: array API (SCIPY_ARRAY_API)
        results = check_estimator(make(), on_fail=None)
    excluded = EXCLUDED.get(request.node.callspec.id, set())
    failed = [(r["check_name"], repr(r["exception"])) for r in results
              if r["status"] == "failed" and r["check_name"] not in excluded]
    assert len(results) > 40 and not failed, failed
