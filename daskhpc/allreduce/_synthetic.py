"""The thesis's synthetic inputs (section 5.1)."""

from __future__ import annotations

import numpy as np


def uniform_vectors(N: int, nparts: int, density: float, *, seed: int = 0,
                    dtype="float64") -> list[tuple[np.ndarray, np.ndarray]]:
    """Per rank ``(idx, val)``: ``round(density N)`` sorted uniform indices and values.

    Indices are drawn without replacement per rank, so P(j in H_i) = k / N exactly;
    values standard normal (floats) or integers in [-1000, 1000]; seeded per rank.

    Examples
    --------
    >>> vs = uniform_vectors(1000, 3, 0.01, seed=0)
    >>> [v[0].size for v in vs], vs[0][0].dtype.name
    ([10, 10, 10], 'uint32')
    """
    N, P = int(N), int(nparts)
    k = int(round(float(density) * N))
    dt = np.dtype(dtype)
    out = []
    for child in np.random.SeedSequence(int(seed)).spawn(P):
        rng = np.random.default_rng(child)
        idx = np.sort(rng.choice(N, size=k, replace=False)).astype(np.uint32)
        val = (rng.standard_normal(k) if dt.kind == "f" else
               rng.integers(-1000, 1001, size=k)).astype(dt)
        out.append((idx, val))
    return out
