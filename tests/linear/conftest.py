"""Data the linear tests make: a 10-class LIBSVM file (scikit-learn's digits, integer
features 0..16) and a sparse imbalanced binary set (a9a with its positives thinned to
under 5 %), both written deterministically."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp


@pytest.fixture(scope="session")
def digits_svm(tmp_path_factory):
    """``(train, test)`` LIBSVM paths: digits rows 0..1199 and 1200..1796, labels 0..9."""
    datasets = pytest.importorskip("sklearn.datasets")
    X, y = datasets.load_digits(return_X_y=True)
    d = tmp_path_factory.mktemp("digits")
    datasets.dump_svmlight_file(X[:1200], y[:1200], str(d / "train.svm"), zero_based=False)
    datasets.dump_svmlight_file(X[1200:], y[1200:], str(d / "test.svm"), zero_based=False)
    return d / "train.svm", d / "test.svm"


def thin_positives(matrix, labels, seed: int, keep: float = 0.12):
    """Every negative row and a seeded ``keep`` share of the positives: ~3.7 % positive on
    a9a. Returns ``(int32 CSR, labels)`` (scikit-learn takes 32-bit indices only)."""
    rows = np.flatnonzero((labels < 0) | (np.random.default_rng(seed).random(labels.size)
                                         < keep))
    X = sp.csr_matrix(matrix[rows])
    X.indices, X.indptr = X.indices.astype(np.int32), X.indptr.astype(np.int32)
    return X, labels[rows]


@pytest.fixture(scope="session")
def rare_a9a():
    """``(X, y, X_test, y_test)``: a9a / a9a.t with positives thinned (seeds 0 and 1), the
    test set as wide as the training set."""
    from daskhpc import datasets

    X, y = thin_positives(datasets.libsvm().matrix, datasets.libsvm().labels, 0)
    t = datasets.libsvm("test")
    Xt, yt = thin_positives(t.matrix, t.labels, 1)
    Xt = sp.csr_matrix((Xt.data, Xt.indices, Xt.indptr), shape=(Xt.shape[0], X.shape[1]))
    return X, y, Xt, yt
