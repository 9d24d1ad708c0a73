"""What training returns: the model, sklearn-style prediction, per-epoch history, report."""

from __future__ import annotations

import os

import numpy as np
import scipy.sparse as sp

from daskhpc.errors import InputError
from daskhpc.io import read
from daskhpc.report import WorkflowResult


class LinearResult(WorkflowResult):
    """A trained linear classifier (logistic regression or linear SVM; binary, or
    one-vs-rest multiclass).

    Attributes
    ----------
    w : numpy.ndarray
        The model (features, then the intercept when fitted): ``(N,)`` binary, ``(K, N)``
        with one row per class of ``classes_`` for K > 2 classes.
    coef_, intercept_, classes_
        As sklearn's linear classifiers (binary: ``coef_`` 1-D and ``intercept_`` a float).
    history : list of dict
        Per epoch: train/test loss and accuracy, ``sent_bytes``, ``planned_sent_bytes``
        (without Top-k), ``time_s``; on a cluster also ``planned_bytes`` and
        ``measured_bytes`` between workers.

    Examples
    --------
    >>> import numpy as np
    >>> r = LinearResult(np.array([1.0, -1.0, 0.5]), np.array([0, 1]), fit_intercept=True)
    >>> r.coef_.tolist(), r.intercept_, r.predict(np.array([[1.0, 0.0], [0.0, 2.0]])).tolist()
    ([1.0, -1.0], 0.5, [1, 0])
    """

    workflow = "linear"
    SAVED = ("w", "classes_", "fit_intercept")
    COLUMNS = (("epoch", "epoch", "{:>5d}"), ("train_loss", "train loss", "{:<#.6g}"),
               ("train_accuracy", "train acc", "{:<9.4f}"),
               ("test_accuracy", "test acc", "{:<8.4f}"), ("sent_bytes", "sent B", "{:>10d}"),
               ("time_s", "time ms", "{:>9.1f}"), ("measured_bytes", "measured B", "{:>11d}"))
    PLOT = (("train_accuracy", "test_accuracy"), ("train_loss",))
    TITLE = ("parts", "loss", "topk")

    def __init__(self, w, classes, *, fit_intercept=True, history=None, info=None):
        super().__init__(info, history)
        self.w = np.asarray(w)
        self.classes_ = np.asarray(classes)
        self.fit_intercept = fit_intercept

    @property
    def coef_(self) -> np.ndarray:
        return self.w[..., :-1] if self.fit_intercept else self.w

    @property
    def intercept_(self):
        if self.w.ndim == 2:
            return self.w[:, -1].copy() if self.fit_intercept else np.zeros(self.w.shape[0])
        return float(self.w[-1]) if self.fit_intercept else 0.0

    def decision_function(self, X) -> np.ndarray:
        """``X @ coef_.T + intercept_``; a narrower X is padded with zeros; X may be a LIBSVM
        file."""
        X = self._matrix(X)[0]
        F = self.coef_.shape[-1]
        if X.shape[1] > F:
            raise ValueError(f"X has {X.shape[1]} features, the model {F}")
        return X @ self.coef_[..., :X.shape[1]].T + self.intercept_

    def predict(self, X) -> np.ndarray:
        """Binary: ``classes_[1]`` where the decision function is positive, else
        ``classes_[0]``; multiclass: the class of the largest decision value."""
        d = self.decision_function(X)
        if d.ndim == 2:
            return self.classes_[np.argmax(d, axis=1)]
        return self.classes_[(d > 0).astype(int)]

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities per row (log loss only): sigmoids, one-vs-rest normalised to sum
        1."""
        if self.info.get("loss", "log") != "log":
            raise AttributeError(f"probability estimates need the log loss, not "
                                 f"{self.info.get('loss')!r}")
        p = 1.0 / (1.0 + np.exp(-np.clip(self.decision_function(X), -500, 500)))
        if p.ndim == 2:
            return p / p.sum(axis=1, keepdims=True)
        return np.column_stack([1.0 - p, p])

    def score(self, X, y=None) -> float:
        """Mean accuracy on ``X`` and labels ``y`` (a LIBSVM file brings its own)."""
        X, labels = self._matrix(X)
        y = labels if y is None else y
        if y is None:
            raise ValueError("score needs the labels y (or a LIBSVM file, which has them)")
        return float(np.mean(self.predict(X) == np.asarray(y)))

    @staticmethod
    def _matrix(X):
        """``(matrix, labels or None)`` of ``X``: a LIBSVM path is read."""
        if isinstance(X, (str, os.PathLike)):
            got = read(X, format="libsvm")
            return got.matrix, got.labels
        return (sp.csr_array(X) if sp.issparse(X) else np.asarray(X, np.float64)), None


def predict_file(result: LinearResult, path: str) -> dict:
    """``daskhpc predict DIR DATA.libsvm``: every row's predicted label and the accuracy."""
    X, y = result._matrix(path)
    try:
        pred = result.predict(X)
    except ValueError as e:
        raise InputError(f"{path}: {e}") from None
    cols = {"row": np.arange(1, X.shape[0] + 1), "label": y, "prediction": pred}
    return {"columns": cols, "quality": {"accuracy": float(np.mean(pred == y))}}
