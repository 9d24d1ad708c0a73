"""Data-parallel linear classifiers and Top-k SGD over the sparse allreduce.

Logistic regression and linear SVMs (Renggli 2017, section 2.2) trained by mini-batch
SGD (Algorithm 1): each of P parts owns rows of X, computes its batch gradient, the
parts' gradients are summed with :mod:`daskhpc.allreduce` (sparse: the union of the
batch rows' features), and every part applies the same update to its copy of the
model. Top-k SGD (Algorithm 2) and approximate Top-k (section 2.4.1) enforce sparsity
when it is not natural. Three or more labels train one-vs-rest (the K gradients
allreduced together). ``SGDClassifier`` and ``LogisticRegression`` (scikit-learn
estimators) are imported when named, so ``import daskhpc.linear`` does not load sklearn.

Examples
--------
>>> from daskhpc import datasets
>>> import daskhpc.linear as lin
>>> r = lin.fit_local(datasets.libsvm(), nparts=4, batch=256, epochs=1,
...                   test=datasets.libsvm("test"))
>>> r.history[0]["test_accuracy"] > 0.8
True

References
----------
C. Renggli, "Efficient Sparse AllReduce For Scalable Machine Learning", Master's thesis,
ETH Zurich, 2017.
"""

from ._api import fit, fit_local, plan, serial_fit
from ._result import LinearResult
from ._topk import approx_probabilities, topk_approx, topk_exact

__all__ = ["fit", "fit_local", "serial_fit", "plan", "LinearResult", "topk_exact", "topk_approx",
           "approx_probabilities"]

#: The scikit-learn estimators, loaded on first use (not in ``__all__``: a star import
#: must not need scikit-learn).
ESTIMATORS = ("SGDClassifier", "LogisticRegression")


def __getattr__(name):
    if name in ESTIMATORS:
        try:
            from . import _estimator
        except ImportError as e:
            raise ImportError(f"daskhpc.linear.{name} needs scikit-learn ({e}); install it "
                              "with pip install 'daskhpc[sklearn]'") from e
        return getattr(_estimator, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *ESTIMATORS])
