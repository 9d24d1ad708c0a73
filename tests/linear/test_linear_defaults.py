"""The default options (no --loss, --lr, --reg, --parts; 5 epochs) reach scikit-learn's
SGDClassifier(loss="log_loss") test accuracy within 0.003 (max_iter=5,
tol=None, the mean over seeds 0-2, measured in the same test) on a9a and on a sparse
imbalanced binary set (a9a with its positives thinned to ~3.7 %)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import daskhpc.linear as lin

TOL = 0.003


def sklearn_accuracy(X, y, Xt, yt, epochs=5):
    sklm = pytest.importorskip("sklearn.linear_model")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                 # ConvergenceWarning at max_iter
        return float(np.mean([sklm.SGDClassifier(loss="log_loss", max_iter=epochs, tol=None,
                                                 random_state=s).fit(X, y).score(Xt, yt)
                              for s in range(3)]))


def test_default_run_on_an_imbalanced_set_matches_sklearn(rare_a9a):
    X, y, Xt, yt = rare_a9a
    X, y = X[:4000], y[:4000]                  # quick: a sixth of the set
    ours = lin.fit_local(X, y, test=(Xt, yt))  # every option at its default
    assert ours.report()["options"]["learning_rate"] == "optimal"
    assert len(ours.history) == 5
    assert ours.history[-1]["test_accuracy"] >= sklearn_accuracy(X, y, Xt, yt) - TOL


def _console_defaults(train, test):
    exe = os.path.join(os.path.dirname(sys.executable), "daskhpc")
    done = subprocess.run([exe, "run", "linear", str(train), "--test", str(test),
                           "--workers", "2", "--json", "-"], capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.slow
def test_default_console_run_on_a9a_matches_sklearn(shared_data):
    from sklearn.datasets import load_svmlight_file

    train, test = shared_data / "libsvm" / "a9a", shared_data / "libsvm" / "a9a.t"
    rep = _console_defaults(train, test)
    assert rep["parts"] == 2 and len(rep["timing"]["per_iteration_s"]) == 5
    X, y = load_svmlight_file(str(train), n_features=123)
    Xt, yt = load_svmlight_file(str(test), n_features=123)
    sk = sklearn_accuracy(*(_int32(a) if i % 2 == 0 else a
                            for i, a in enumerate((X, y, Xt, yt))))
    assert rep["quality"]["test_accuracy"] >= sk - TOL, (rep["quality"], sk)


@pytest.mark.slow
def test_default_console_run_on_the_imbalanced_set_matches_sklearn(rare_a9a, tmp_path):
    from sklearn.datasets import dump_svmlight_file

    X, y, Xt, yt = rare_a9a
    dump_svmlight_file(X, y, str(tmp_path / "train.svm"), zero_based=False)
    dump_svmlight_file(Xt, yt, str(tmp_path / "test.svm"), zero_based=False)
    rep = _console_defaults(tmp_path / "train.svm", tmp_path / "test.svm")
    sk = sklearn_accuracy(X, y, Xt, yt)
    assert rep["quality"]["test_accuracy"] >= sk - TOL, (rep["quality"], sk)


def _int32(A):
    import scipy.sparse as sp

    A = sp.csr_matrix(A)
    A.indices, A.indptr = A.indices.astype(np.int32), A.indptr.astype(np.int32)
    return A
