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


@pytest.fixture(scope="session")
def rare_binary():
    """``(X, y)``: 50,000 rows, 300 features, 3 % positives (:func:`make_rare_binary`)."""
    return make_rare_binary()


@pytest.fixture(scope="session")
def wide_sparse():
    """``(X, y)``: 22,000 x 4,700 sparse counts (:func:`make_wide_sparse`)."""
    return make_wide_sparse()


def make_rare_binary(seed: int = 0, rows: int = 50_000, features: int = 300,
                     positives: float = 0.03):
    """``(X, y)``: an imbalanced binary set with binary sparse features (each feature on
    in 0.2 % - 25 % of the rows, log-uniformly), labels drawn from a logistic model on 30 %
    of the features whose intercept makes ``positives`` of the rows positive. int32 CSR."""
    rng = np.random.default_rng(seed)
    freq = np.exp(rng.uniform(np.log(0.002), np.log(0.25), features))
    X = sp.csr_matrix((rng.random((rows, features)) < freq).astype(np.float64))
    w = 2.0 * rng.standard_normal(features) * (rng.random(features) < 0.3)
    m = X @ w
    p = 1.0 / (1.0 + np.exp(-2.0 * (m - np.quantile(m, 1.0 - positives))))
    X.indices, X.indptr = X.indices.astype(np.int32), X.indptr.astype(np.int32)
    return X, np.where(rng.random(rows) < p, 1.0, -1.0)


def make_wide_sparse(seed: int = 0, rows: int = 22_000, features: int = 4_700,
                     per_row: int = 40):
    """``(X, y)``: text-like counts (``per_row`` Poisson draws per row over Zipf-distributed
    features), balanced labels of a linear model on 20 % of the features plus noise."""
    rng = np.random.default_rng(seed)
    freq = 1.0 / np.arange(1, features + 1) ** 0.9
    nnz = rng.poisson(per_row, rows) + 1
    r = np.repeat(np.arange(rows), nnz)
    c = rng.choice(features, size=r.size, p=freq / freq.sum())
    X = sp.csr_matrix((np.ones(r.size), (r, c)), shape=(rows, features))
    X.sum_duplicates()
    w = 1.5 * rng.standard_normal(features) * (rng.random(features) < 0.2)
    m = X @ w + 0.5 * rng.standard_normal(rows)
    X.indices, X.indptr = X.indices.astype(np.int32), X.indptr.astype(np.int32)
    return X, np.where(m > np.median(m), 1.0, -1.0)
