"""The plain serial reference: the dense sum of the vectors, rank by rank."""

from __future__ import annotations

import numpy as np

from ._setup import as_vectors


def serial_allreduce(vectors, N: int | None = None) -> np.ndarray:
    """``sum_i v_i`` as a dense array, summed in rank order.

    Integer sums equal every algorithm's bit for bit; float sums differ by reassociation
    only, within ``(P - 1) u sum_i |v_i|``.

    Examples
    --------
    >>> import numpy as np
    >>> serial_allreduce([np.array([1.0, 0.0]), (np.array([1]), np.array([2.0]))]).tolist()
    [1.0, 2.0]
    """
    N, dtype, pairs = as_vectors(vectors, N)
    total = np.zeros(N, dtype)
    for idx, val in pairs:
        dense = np.zeros(N, dtype)
        dense[idx] = val
        total = total + dense
    return total
