"""Top-k selection for Top-k SGD (Renggli 2017, Algorithm 2 and section 2.4.1).

* :func:`topk_exact` - the k largest ``|g|``; ties are broken by the lowest index, so
  exactly ``min(k, N)`` indices are selected (Algorithm 2, line 9, leaves ties open);
* :func:`approx_probabilities` - the ``p_i`` of section 2.4.1: ``k |v_i| / ||v||_1`` if
  ``||v||_inf <= ||v||_1 / k``, else ``k (|v_i| + eps) / (||v||_1 + N eps)`` with the
  smallest admissible ``eps = (k ||v||_inf - ||v||_1) / (N - k)``, so that every
  ``p_i <= 1`` and ``sum_i p_i = k`` (Theorem 2.1). An all-zero vector gets ``k / N``
  everywhere (the limit eps -> infinity);
* :func:`topk_approx` - every index drawn independently with its ``p_i``, seeded.

Examples
--------
>>> import numpy as np
>>> topk_exact(np.array([0.5, -2.0, 2.0, 1.0]), 2).tolist()
[1, 2]
>>> topk_exact(np.array([1.0, 1.0, 1.0]), 2).tolist()
[0, 1]
>>> p = approx_probabilities(np.array([4.0, 1.0, 0.0, 0.0]), 2)
>>> float(p.sum()), float(p.max())
(2.0, 1.0)
"""

from __future__ import annotations

import numpy as np

__all__ = ["topk_exact", "approx_probabilities", "topk_approx"]


def topk_exact(g: np.ndarray, k: int) -> np.ndarray:
    """Ascending indices of the ``min(k, N)`` largest ``|g|`` (ties: lowest index)."""
    N = g.size
    if k >= N:
        return np.arange(N, dtype=np.int64)
    if k <= 0:
        return np.zeros(0, np.int64)
    a = np.abs(g)
    t = np.partition(a, N - k)[N - k]             # the k-th largest magnitude
    above = np.flatnonzero(a > t)
    ties = np.flatnonzero(a == t)[: k - above.size]
    return np.sort(np.concatenate([above, ties]))


def approx_probabilities(v: np.ndarray, k: float) -> np.ndarray:
    """Selection probability of every index (section 2.4.1); they sum to min(k, N)."""
    N = v.size
    if k >= N:
        return np.ones(N)
    a = np.abs(v)
    l1, linf = float(a.sum()), float(a.max(initial=0.0))
    if l1 == 0.0:
        return np.full(N, k / N)
    if linf <= l1 / k:
        p = k * a / l1
    else:
        eps = (k * linf - l1) / (N - k)
        p = k * (a + eps) / (l1 + N * eps)
    return np.minimum(p, 1.0)


def topk_approx(g: np.ndarray, k: float, rng: np.random.Generator) -> np.ndarray:
    """Ascending indices, each drawn with its probability: k selected in expectation."""
    p = approx_probabilities(g, k)
    return np.flatnonzero(rng.random(g.size) < p)
