"""A test file whose feature width does not match the training file's,
through the real console script. LIBSVM files state only their largest feature index: a
narrower test file is padded (trailing features absent), a wider one is refused before the
cluster starts (exit 2, one line naming the test file and both widths) unless
``--n-features`` states a width that covers both."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from daskhpc.errors import InputError
from daskhpc.linear._data import load

EXE = os.path.join(os.path.dirname(sys.executable), "daskhpc")


def daskhpc(*argv, timeout=300):
    done = subprocess.run([EXE, *map(str, argv)], capture_output=True, text=True,
                          timeout=timeout)
    return done.returncode, done.stdout, done.stderr


def libsvm(path, rows: int, width: int, seed: int):
    """``rows`` lines of 1-based features up to ``width`` (the last row has feature
    ``width``), labels +-1 by the sign of feature 1 minus feature 2."""
    rng = np.random.default_rng(seed)
    lines = []
    for r in range(rows):
        idx = sorted(set(rng.integers(1, width + 1, 5).tolist()) | {1, 2} |
                     ({width} if r == rows - 1 else set()))
        val = rng.random(len(idx))
        label = 1 if val[0] > val[1] else -1
        lines.append(f"{label} " + " ".join(f"{i}:{v:.4f}" for i, v in zip(idx, val)))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_wider_test_file_is_refused_before_the_cluster(tmp_path):
    train = libsvm(tmp_path / "train.svm", 60, 300, 0)
    test = libsvm(tmp_path / "test.svm", 30, 4714, 1)
    code, out, err = daskhpc("run", "linear", train, "--test", test, "--workers", "2",
                             "--parts", "2", "--epochs", "1")
    assert code == 2 and "dashboard:" not in err, err
    assert err.strip().splitlines() == [
        f"daskhpc: error: {test}: 4,714 features, the training data 300: a test set may "
        "leave trailing features out, not add any (another feature set?); --n-features "
        "4714 states a width for both"]
    code, _, err = daskhpc("plan", "linear", train, "--test", test, "--n-features", "1000",
                           "--parts", "2")
    assert code == 2 and err.strip().splitlines() == [
        f"daskhpc: error: {test}: 4,714 features, beyond --n-features 1,000"]


@pytest.mark.slow             # CI budget (20 min on 2 cores): default run keeps a lighter test of the same path
def test_narrower_test_file_and_n_features_run(tmp_path):
    train = libsvm(tmp_path / "train.svm", 60, 300, 0)
    narrow = libsvm(tmp_path / "narrow.svm", 30, 120, 1)       # trailing features absent
    wide = libsvm(tmp_path / "wide.svm", 30, 4714, 2)
    code, out, err = daskhpc("plan", "linear", train, "--test", narrow, "--parts", "2",
                             "--json", "-")
    assert code == 0, err
    assert json.loads(out)["input"]["shape"] == [60, 300]
    code, out, err = daskhpc("run", "linear", train, "--test", wide, "--n-features", "4714",
                             "--workers", "2", "--parts", "2", "--epochs", "1", "--json", "-")
    assert code == 0, err
    rep = json.loads(out)
    assert rep["input"]["shape"] == [60, 4714] and "test_accuracy" in rep["quality"]


def test_load_widths_in_python(tmp_path):
    train = libsvm(tmp_path / "train.svm", 20, 30, 0)
    test = libsvm(tmp_path / "test.svm", 10, 40, 1)
    with pytest.raises(InputError, match="40 features, the training data 30"):
        load(train, test=test)
    d = load(train, test=test, n_features=40)
    assert d.n_features == 40 and d.X.shape[1] == d.X_test.shape[1] == 41   # + intercept
    with pytest.raises(InputError, match="30 features, beyond --n-features 20"):
        load(train, n_features=20)
    # 0-based training file: the test file is read 0-based too, even without index 0
    zero = tmp_path / "zero.svm"
    zero.write_text("1 0:1 2:1\n-1 1:1\n")
    only = tmp_path / "only.svm"
    only.write_text("1 2:1\n")
    d = load(zero, test=only, fit_intercept=False)
    assert d.X_test.toarray().tolist() == [[0.0, 0.0, 1.0]]


@pytest.mark.parametrize("index", [np.int32, np.int64])
def test_the_intercept_column_is_hstacks(index):
    # built in one pass: the same arrays, dtypes and order as sp.hstack([X, ones])
    from daskhpc.linear._data import _with_intercept

    for X in (sp.csr_array(sp.random(60, 9, density=0.3, format="csr", random_state=3)),
              sp.csr_array((0, 4)), sp.csr_array(np.zeros((3, 2))),
              sp.csr_array(np.array([[0.0, 2.0, 1.0], [0.0, 0.0, 0.0], [5.0, 0.0, 0.0]]))):
        X.indices, X.indptr = X.indices.astype(index), X.indptr.astype(index)
        X.indices[:] = X.indices[::-1] if X.nnz else X.indices      # any order is kept
        want = sp.csr_array(sp.hstack([X, sp.csr_array(np.ones((X.shape[0], 1)))],
                                      format="csr"))
        got = _with_intercept(X)
        assert got.shape == want.shape and got.dtype == want.dtype
        for a in ("indptr", "indices", "data"):
            assert getattr(got, a).dtype == getattr(want, a).dtype
            assert np.array_equal(getattr(got, a), getattr(want, a))
