"""The estimators that take ``client=`` clone (scikit-learn's ``clone``, which
cross-validation and grid search call for every fit) with the same client, and on a
2-worker cluster ``cross_val_score`` and ``GridSearchCV`` score them as without one."""

from __future__ import annotations

import numpy as np
import pytest

import daskhpc.linear as lin
from daskhpc import datasets

sklearn = pytest.importorskip("sklearn")


@pytest.fixture(scope="module")
def a9a_rows():
    """1,200 a9a rows: a fold trains in milliseconds, the cluster's steps dominate."""
    d = datasets.libsvm()
    return d.matrix[:1200], d.labels[:1200]


def test_clone_keeps_the_client_and_copies_the_rest(client2):
    from sklearn.base import clone

    from daskhpc.ssgd import MatrixFactorization

    weights = {1.0: 2.0, -1.0: 1.0}
    for est in (lin.SGDClassifier(client=client2, alpha=1e-3, class_weight=weights),
                lin.LogisticRegression(client=client2, C=2.0, class_weight=weights),
                MatrixFactorization(client=client2, n_factors=4)):
        copy = clone(est)
        assert copy is not est and copy.client is client2
        assert copy.get_params() == est.get_params()
    fitted = lin.SGDClassifier(class_weight=weights).fit(*_toy()).set_params(client=client2)
    copy = clone(fitted)
    assert not hasattr(copy, "coef_")                       # unfitted, as clone promises
    assert copy.class_weight == weights and copy.class_weight is not weights


def _toy():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 3))
    return X, np.where(X[:, 0] > 0, 1.0, -1.0)


@pytest.mark.parametrize("make", [lin.SGDClassifier, lin.LogisticRegression],
                         ids=["sgd", "logistic"])
def test_cross_val_score_and_grid_search_on_a_cluster_score_as_in_process(client2, a9a_rows,
                                                                         make):
    from sklearn.model_selection import GridSearchCV, cross_val_score

    X, y = a9a_rows
    # n_parts=2 in process: the cluster's parts (one per worker), so the same batches; the
    # cluster's model is the plain serial one up to the order of the gradient sums (1e-12)
    on = cross_val_score(make(client=client2), X, y, cv=2)
    off = cross_val_score(make(n_parts=2), X, y, cv=2)
    assert on.tolist() == off.tolist() and on.min() > 0.75
    grid = {"alpha": [1e-4, 1e-2]} if make is lin.SGDClassifier else {"C": [0.01, 1.0]}
    g_on = GridSearchCV(make(client=client2), grid, cv=2).fit(X, y)
    g_off = GridSearchCV(make(n_parts=2), grid, cv=2).fit(X, y)
    assert g_on.cv_results_["mean_test_score"].tolist() == \
        g_off.cv_results_["mean_test_score"].tolist()
    assert g_on.best_params_ == g_off.best_params_
    assert g_on.best_estimator_.client is client2
    assert np.allclose(g_on.best_estimator_.coef_, g_off.best_estimator_.coef_, rtol=1e-10,
                       atol=1e-12)
