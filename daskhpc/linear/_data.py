"""Training and test data for the linear classifiers: LIBSVM files or arrays, their labels.

Two labels: ``y`` is +-1 (the larger +1); more: ``y`` indexes the sorted ``classes``. A
narrower test set is padded (LIBSVM omits trailing features), a wider one refused
unless ``n_features`` covers it; the intercept is a last constant-1 column.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numba
import numpy as np
import scipy.sparse as sp

from daskhpc.errors import InputError
from daskhpc.io import read


@dataclass(eq=False)
class LinearData:
    X: sp.csr_array               # M x (F + intercept), float64
    y: np.ndarray                 # +-1 (binary) or class indices (multiclass)
    X_test: sp.csr_array | None
    y_test: np.ndarray | None
    classes: np.ndarray           # sorted original labels (binary: of -1 and +1)
    n_features: int               # F (without the intercept column)
    fit_intercept: bool
    source: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)

    @property
    def nclasses(self) -> int:
        """K, the models trained: 1 for a binary problem, else one per class."""
        return 1 if self.classes.size == 2 else int(self.classes.size)


_READ: dict = {}        # the last files read: the CLI's check reads them before the cluster


def _read(x, what, zero_based="auto"):
    """(matrix, labels, source, zero_based) of a path, a SparseInput or an array."""
    if isinstance(x, (str, bytes)) or hasattr(x, "__fspath__"):
        st = os.stat(x)
        key = (os.path.realpath(x), st.st_mtime_ns, st.st_size, zero_based)
        if key not in _READ:
            _READ.clear() if len(_READ) >= 2 else None
            _READ[key] = read(x, format="libsvm", zero_based=zero_based)
        s = _READ[key]
        return s.matrix, s.labels, {"path": str(x)}, s.meta.get("zero_based", "auto")
    if hasattr(x, "matrix") and hasattr(x, "labels"):          # a SparseInput
        return (x.matrix, x.labels, {"path": getattr(x, "path", what)},
                (getattr(x, "meta", None) or {}).get("zero_based", "auto"))
    return x, None, {}, "auto"


def check_width(width: int, train_width: int, test, n_features: int | None) -> None:
    """Refuse a test set wider than the model (one line naming it and both widths)."""
    if width <= (train_width if n_features is None else n_features):
        return
    if n_features is not None:
        raise InputError(f"{test}: {width:,} features, beyond --n-features {n_features:,}")
    raise InputError(
        f"{test}: {width:,} features, the training data {train_width:,}: a test set may "
        f"leave trailing features out, not add any (another feature set?); "
        f"--n-features {width} states a width for both")


def features(X, width: int | None, what: str, notes: list) -> sp.csr_array:
    """X as float64 CSR, finite, padded to ``width`` columns (never narrowed)."""
    if sp.issparse(X):
        X = sp.csr_array(X, dtype=np.float64)
    else:
        a = np.asarray(X)
        if a.ndim != 2 or a.dtype.kind not in "biuf":
            raise InputError(f"{what}: expected a 2-D numeric matrix, got shape {a.shape}")
        X = sp.csr_array(a.astype(np.float64))
    if not np.all(np.isfinite(X.data)):
        raise InputError(f"{what}: NaN or infinite feature values")
    X.sum_duplicates()
    if width is not None and X.shape[1] != width:
        if X.shape[1] > width:
            raise InputError(f"{what}: {X.shape[1]:,} features, more than the {width:,} "
                             "stated")
        X = sp.csr_array((X.data, X.indices, X.indptr), shape=(X.shape[0], width))
    return X


def labels(y, n: int, what: str, classes=None):
    y = np.asarray(y).ravel()
    if y.shape != (n,):
        raise InputError(f"{what}: {y.size} labels for {n} rows")
    if classes is None:
        classes = np.unique(y)
        if classes.size < 2:
            raise InputError(f"{what}: classification needs at least two label values, "
                             f"got {classes.size}: {classes.tolist()}")
    bad = ~np.isin(y, classes)
    if bad.any():
        known = (f"neither {classes[0]!r} nor {classes[1]!r}" if classes.size == 2 else
                 f"not among the training labels {classes[:10].tolist()}")
        raise InputError(f"{what}: label {y[bad][0]!r} is {known}")
    if classes.size == 2:
        return np.where(y == classes[1], 1.0, -1.0), classes
    return np.searchsorted(classes, y).astype(np.int64), classes


def _with_intercept(X):
    """X with a last column of ones, as ``sp.hstack([X, ones])`` gives it, in one pass."""
    n, F = X.shape
    nnz = X.nnz + n
    # the index type hstack gives: indptr's, at least int32, wider if needed
    dt = np.result_type(X.indptr.dtype, np.int32)
    if max(nnz, F + 1) > np.iinfo(np.int32).max:
        dt = np.int64
    indptr = X.indptr.astype(dt) + np.arange(n + 1, dtype=dt)
    indices = np.empty(nnz, dt)
    data = np.empty(nnz, np.result_type(X.data.dtype, np.float64))
    _append_column(X.indptr, X.indices, X.data, F, indices, data)
    return sp.csr_array((data, indices, indptr), shape=(n, F + 1))


@numba.njit(cache=True, nogil=True)
def _append_column(indptr, indices, data, F, out_indices, out_data):
    """Each row's entries, then a 1 in column F, into ``out_*`` (sequential copies)."""
    k = 0
    for i in range(indptr.size - 1):
        for q in range(indptr[i], indptr[i + 1]):
            out_indices[k] = indices[q]
            out_data[k] = data[q]
            k += 1
        out_indices[k] = F
        out_data[k] = 1.0
        k += 1


def load(X, y=None, test=None, *, fit_intercept: bool = True,
         n_features: int | None = None) -> LinearData:
    """Training (``X``, ``y`` or a LIBSVM path) and test data; ``n_features``: both's width."""
    if isinstance(X, LinearData) and y is None and test is None \
            and X.fit_intercept == fit_intercept:
        return X                          # loaded and checked already (the CLI's check)
    notes: list = []
    X, y_file, src, zero_based = _read(X, "X")
    y = y_file if y is None else y
    if y is None:
        raise InputError("give labels y (or a LIBSVM file, which carries them)")
    X = features(X, None, "X", notes)
    if X.shape[0] == 0:
        raise InputError("X has no rows")
    name = src.get("path", "X")
    if n_features is not None:
        if X.shape[1] > n_features:
            raise InputError(f"{name}: {X.shape[1]:,} features, beyond --n-features "
                             f"{n_features:,}")
        X = features(X, n_features, name, notes)
    yy, classes = labels(y, X.shape[0], "y")
    F = X.shape[1]
    Xt = yt = None
    if test is not None:
        if isinstance(test, tuple):
            Xt, yt, tsrc = test[0], test[1], {}
        else:       # the training file's index base: a guess per file could shift one
            Xt, yt, tsrc, _ = _read(test, "test", zero_based)
        tname = tsrc.get("path", "the test set")
        check_width(int(Xt.shape[1]), F, tname, n_features)
        Xt = features(Xt, F, tname, notes)
        yt, _ = labels(yt, Xt.shape[0], "test labels", classes)
        src["test"] = tsrc.get("path", "arrays")
    if fit_intercept:
        X = _with_intercept(X)
        Xt = _with_intercept(Xt) if Xt is not None else None
    src.update(shape=[int(X.shape[0]), F], nnz=int(X.nnz - (X.shape[0] if fit_intercept else 0)))
    return LinearData(X, yy, Xt, yt, classes, F, fit_intercept, src, notes)
