"""Top-k selection for Top-k SGD (Renggli 2017, Algorithm 2 and section 2.4.1)."""

from __future__ import annotations

import numpy as np


def topk_exact(g: np.ndarray, k: int) -> np.ndarray:
    """Ascending indices of the ``min(k, N)`` largest ``|g|`` (Algorithm 2, line 9).

    Ties are broken by the lowest index, so exactly ``min(k, N)`` are selected.

    Examples
    --------
    >>> import numpy as np
    >>> topk_exact(np.array([1.0, 1.0, 1.0]), 2).tolist()
    [0, 1]
    """
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
    """Selection probability of every index (section 2.4.1); they sum to min(k, N).

    ``k |v_i| / ||v||_1`` if ``||v||_inf <= ||v||_1 / k``, else ``k (|v_i| + eps) /
    (||v||_1 + N eps)`` with the smallest ``eps`` that keeps every ``p_i <= 1`` (Theorem
    2.1); an all-zero vector gets ``k / N``.

    Examples
    --------
    >>> import numpy as np
    >>> p = approx_probabilities(np.array([4.0, 1.0, 0.0, 0.0]), 2)
    >>> float(p.sum()), float(p.max())
    (2.0, 1.0)
    """
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
    """Ascending indices, each drawn independently with its probability: k in expectation."""
    p = approx_probabilities(g, k)
    return np.flatnonzero(rng.random(g.size) < p)
