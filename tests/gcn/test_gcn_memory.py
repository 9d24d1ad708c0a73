"""What the client holds while it sets a run up: counts of bytes, not times."""

import numpy as np
import scipy.sparse as sp

from daskhpc import gcn
from daskhpc.gcn._data import row_normalize
from daskhpc.testing import traced


def _graph(n=3000, f=400, seed=0):
    rng = np.random.default_rng(seed)
    A = sp.random_array((n, n), density=4 / n, format="csr", rng=rng)
    X = rng.random((n, f))
    y = rng.integers(0, 4, n)
    return A, X, y, (np.arange(0, 200), np.arange(200, 400), np.arange(400, 800))


def test_the_parts_features_are_cut_without_densifying_the_whole_matrix():
    A, X, y, split = _graph()
    s = gcn.prepare(A, 8, features=X, labels=y, split=split, partition="rp", epochs=1)
    dense = X.shape[0] * X.shape[1] * s.dtype.itemsize
    with traced() as t:
        parts = gcn.statics(s)
    peak = t.peak
    got = np.concatenate([p["X"] for p in parts])
    order = np.concatenate([p["rows"] for p in parts])
    want = np.asarray(s.graph.X.toarray(), s.dtype)[order]
    assert np.array_equal(got, want)            # the very values the whole matrix gives
    # the parts' features (one whole matrix in all) and one part's CSR slice, not a
    # second whole dense copy
    assert peak < 1.6 * dense, (peak, dense)


def test_row_normalize_copies_unless_told_the_features_are_its_own():
    X = sp.csr_array(np.array([[1.0, 3.0], [0.0, 0.0], [2.0, 2.0]]))
    before = X.data.copy()
    Y = row_normalize(X)
    assert np.array_equal(X.data, before)        # the caller's matrix untouched
    assert np.allclose(Y.toarray(), [[0.25, 0.75], [0, 0], [0.5, 0.5]])
    Z = row_normalize(X, copy=False)
    assert np.shares_memory(Z.data, X.data) and np.array_equal(Z.data, Y.data)


def test_dense_feature_rows_are_normalised_on_the_worker_as_the_csr_path_does():
    from daskhpc.gcn._collect import _normalized_dense
    from daskhpc.gcn._model import features

    rng = np.random.default_rng(3)
    block = (rng.random((300, 602)) * rng.choice([1e-3, 1, 1e3], (300, 602))).astype(np.float32)
    for dtype in (np.dtype(np.float32), np.dtype(np.float64)):
        want = features(row_normalize(sp.csr_array(np.asarray(block, float))), dtype, dense=True)
        got = _normalized_dense(block, dtype)
        assert got.dtype == want.dtype and np.array_equal(got, want)   # the same bits
