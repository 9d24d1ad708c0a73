"""scikit-learn estimators over the data-parallel linear classifiers (imports scikit-learn)."""

from __future__ import annotations

import copy

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import check_random_state
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from daskhpc.errors import InputError

from ._api import fit, serial_fit

_LOSSES = {"log_loss": "log", "hinge": "hinge"}


def _has_proba(est) -> bool:
    return est._loss() == "log"


class _LinearClassifier(ClassifierMixin, BaseEstimator):
    """What both estimators share: fit through ``daskhpc.linear``, sklearn's prediction."""

    def _loss(self) -> str:
        return _LOSSES.get(self.loss, self.loss)

    def _options(self, n_samples: int) -> dict:          # the subclasses' mapping
        raise NotImplementedError

    def _seed(self) -> int:
        # None is seed 0 (our runs are reproducible by default); an instance draws one
        if self.random_state is None:
            return 0
        if isinstance(self.random_state, (int, np.integer)):
            return int(self.random_state)
        return int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))

    def fit(self, X, y):
        """Train on ``X`` and labels ``y`` (two values: binary; more: one-vs-rest). Returns self."""
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64,
                             order="C")
        check_classification_targets(y)
        if np.unique(y).size < 2:
            raise ValueError("this solver needs samples of at least 2 classes in the data, "
                             f"but the data contain only one class: {np.unique(y)[0]!r}")
        options = self._options(X.shape[0])
        n_parts = self.n_parts
        try:
            if self.client is None:
                res = serial_fit(X, y, nparts=min(n_parts or 4, X.shape[0]), **options)
            else:
                if n_parts is None:
                    from daskhpc.runtime import worker_addresses

                    n_parts = len(worker_addresses(self.client))
                res = fit(X, y, nparts=min(n_parts, X.shape[0]), client=self.client,
                          progress=False, **options)
        except InputError as e:          # sklearn's convention for bad parameters/data
            raise ValueError(str(e)) from e
        W = np.atleast_2d(res.w)
        self.result_ = res
        self.classes_ = res.classes_
        self.coef_ = W[:, :-1].copy() if self.fit_intercept else W.copy()
        self.intercept_ = W[:, -1].copy() if self.fit_intercept else np.zeros(W.shape[0])
        self.n_iter_ = len(res.history)          # fewer than max_iter when tol stopped it
        return self

    def decision_function(self, X):
        """Signed distances: ``(n_samples,)`` binary, ``(n_samples, n_classes)`` multiclass."""
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=False)
        d = np.asarray(X @ self.coef_.T) + self.intercept_
        return d.ravel() if d.shape[1] == 1 else d

    def predict(self, X):
        """The class of each row."""
        d = self.decision_function(X)
        if d.ndim == 1:
            return self.classes_[(d > 0).astype(int)]
        return self.classes_[np.argmax(d, axis=1)]

    @available_if(_has_proba)
    def predict_proba(self, X):
        """Probabilities per class (log loss only): sigmoids, one-vs-rest normalised to sum 1."""
        d = self.decision_function(X)
        p = 1.0 / (1.0 + np.exp(-np.clip(d, -500, 500)))
        if p.ndim == 1:
            return np.column_stack([1.0 - p, p])
        return p / p.sum(axis=1, keepdims=True)

    @available_if(_has_proba)
    def predict_log_proba(self, X):
        """``log(predict_proba(X))``."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def __sklearn_clone__(self):
        """scikit-learn's ``clone`` sharing ``client`` (a live connection cannot be deep-copied)."""
        shallow = copy.copy(self)
        shallow.client = None
        new = super(_LinearClassifier, shallow).__sklearn_clone__()
        new.client = self.client
        return new

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


class SGDClassifier(_LinearClassifier):
    """Linear classifier (logistic regression or linear SVM) trained by data-parallel
    mini-batch SGD whose gradients are summed by the sparse allreduce.

    ``client=None`` trains in this process (:func:`~daskhpc.linear.serial_fit`, the same
    batches and steps); a Dask ``client`` with :func:`~daskhpc.linear.fit` on it.

    Parameters
    ----------
    client : distributed.Client, optional
        Train on this cluster; None: in this process, no cluster.
    loss, penalty : {"log_loss", "hinge"}, {"l2", "l1", "elasticnet"}
    alpha, l1_ratio : float
        Regularisation strength (``reg``; also sets the ``optimal`` schedule); the L1 share
        of ``elasticnet``.
    fit_intercept : bool
    learning_rate : {"optimal", "constant", "invscaling"}
        scikit-learn's per-sample schedule; a step of n rows takes n per-sample steps
        (capped, docs/linear.md).
    eta0, power_t : float
        The per-sample step size of ``constant``/``invscaling`` and invscaling's exponent.
    max_iter, tol, n_iter_no_change : int, float or None, int
        At most ``max_iter`` epochs, fewer by scikit-learn's stop rule (``tol``; None, the
        default here: every epoch runs). ``n_iter_`` says how many ran.
    batch_size : int or "auto"
        Rows per part and iteration (B); auto: ``--batch auto`` (docs/linear.md).
    class_weight, random_state : None, "balanced" or dict; int, RandomState or None
        Weights of the rows' losses per label; seed of the row shares and batches (None: 0).
    n_parts : int, optional
        P, data-parallel parts (default: the client's workers, 4 without a client).
    allreduce : str
        The sparse allreduce algorithm ("auto" or a name of ``daskhpc.allreduce``).

    Examples
    --------
    >>> import numpy as np
    >>> from daskhpc.linear import SGDClassifier
    >>> X = np.random.default_rng(0).standard_normal((200, 3))
    >>> clf = SGDClassifier(random_state=0).fit(X, X[:, 0] > 0)
    >>> clf.coef_.shape, clf.score(X, X[:, 0] > 0) > 0.9
    ((1, 3), True)
    """

    def __init__(self, client=None, loss="log_loss", penalty="l2", alpha=1e-4, l1_ratio=0.15,
                 fit_intercept=True, learning_rate="optimal", eta0=0.5, power_t=0.5,
                 max_iter=5, tol=None, n_iter_no_change=5, batch_size="auto",
                 class_weight=None, random_state=None, n_parts=None, allreduce="auto"):
        self.client = client
        self.loss = loss
        self.penalty = penalty
        self.alpha = alpha
        self.l1_ratio = l1_ratio
        self.fit_intercept = fit_intercept
        self.learning_rate = learning_rate
        self.eta0 = eta0
        self.power_t = power_t
        self.max_iter = max_iter
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.batch_size = batch_size
        self.class_weight = class_weight
        self.random_state = random_state
        self.n_parts = n_parts
        self.allreduce = allreduce

    def _options(self, n_samples: int) -> dict:
        if self.loss not in _LOSSES:
            raise ValueError(f"loss must be one of {sorted(_LOSSES)}, got {self.loss!r}")
        return dict(loss=self._loss(), penalty=self.penalty, reg=float(self.alpha),
                    l1_ratio=float(self.l1_ratio), fit_intercept=bool(self.fit_intercept),
                    learning_rate=self.learning_rate, lr=float(self.eta0),
                    power_t=float(self.power_t), epochs=int(self.max_iter),
                    tol=None if self.tol is None else float(self.tol),
                    n_iter_no_change=int(self.n_iter_no_change),
                    batch=self.batch_size, class_weight=self.class_weight,
                    seed=self._seed(), allreduce=self.allreduce)


class LogisticRegression(_LinearClassifier):
    """Logistic regression as scikit-learn's (``C``: the inverse regularisation strength),
    trained by our data-parallel SGD for a fixed number of epochs.

    scikit-learn minimises ``C sum_i loss_i + r(w)``; we minimise the mean loss plus
    ``alpha r(w)``, the same optimum with ``alpha = 1 / (C n_samples)``.

    Parameters
    ----------
    C : float
        Inverse of the regularisation strength (> 0).
    penalty : {"l2", "l1", "elasticnet"}
    l1_ratio : float or None
        The L1 share of ``elasticnet`` (None: 0.5).
    max_iter : int
        Epochs of SGD (the solver: ours, fixed).
    client, fit_intercept, batch_size, class_weight, random_state, n_parts, allreduce
        As :class:`SGDClassifier`.
    """

    def __init__(self, C=1.0, penalty="l2", l1_ratio=None, fit_intercept=True, max_iter=10,
                 client=None, batch_size="auto", class_weight=None, random_state=None,
                 n_parts=None, allreduce="auto"):
        self.C = C
        self.penalty = penalty
        self.l1_ratio = l1_ratio
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.client = client
        self.batch_size = batch_size
        self.class_weight = class_weight
        self.random_state = random_state
        self.n_parts = n_parts
        self.allreduce = allreduce

    loss = "log_loss"

    def _options(self, n_samples: int) -> dict:
        if not (isinstance(self.C, (int, float, np.integer, np.floating)) and
                0 < self.C < np.inf):
            raise ValueError(f"C must be a positive finite number, got {self.C!r}")
        return dict(loss="log", penalty=self.penalty, reg=1.0 / (float(self.C) * n_samples),
                    l1_ratio=0.5 if self.l1_ratio is None else float(self.l1_ratio),
                    fit_intercept=bool(self.fit_intercept), learning_rate="optimal",
                    epochs=int(self.max_iter), batch=self.batch_size,
                    class_weight=self.class_weight, seed=self._seed(),
                    allreduce=self.allreduce)
