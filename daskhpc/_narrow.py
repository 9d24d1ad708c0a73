"""The narrowest exact storage for ids and values: what the readers, the part data and
the routed pieces of every workflow hold (12 bytes a rating, 16 a tensor nonzero, not
twice that). Computations widen to float64 first, so results do not depend on it.

Examples
--------
>>> import numpy as np
>>> index_dtype(10), narrow_values(np.array([3.5, 4.0])).dtype
(<class 'numpy.int32'>, dtype('float32'))
"""

from __future__ import annotations

import numpy as np

__all__ = ["index_dtype", "narrow_values", "hash_wide"]


def index_dtype(n: int) -> type:
    """int32 when it holds the indices ``0..n-1``, else int64."""
    return np.int32 if n < 2**31 else np.int64


def narrow_values(v) -> np.ndarray:
    """``v`` as float32 when that keeps every value exactly (half-star ratings do), else
    as it is (a non-float array too).

    Examples
    --------
    >>> narrow_values(np.array([1.0, 2.5])).dtype, narrow_values(np.array([0.1])).dtype
    (dtype('float32'), dtype('float64'))
    """
    v = np.asarray(v)
    if v.dtype == np.float32 or v.dtype.kind != "f":
        return v
    with np.errstate(over="ignore"):         # beyond float32's range: inf, not equal
        v32 = v.astype(np.float32)
    return v32 if np.array_equal(v32, v) else v


def hash_wide(h, arrays, dtype=None, chunk: int = 1 << 20) -> None:
    """Feed the hash ``h`` (a :mod:`hashlib` object) the arrays' bytes as ``dtype``
    (default: int64 for integers, float64 else), a block of ``chunk`` items at a time:
    narrow arrays give the digests their wide copies gave, without those copies.

    Examples
    --------
    >>> import hashlib
    >>> a, b = hashlib.sha256(), hashlib.sha256()
    >>> hash_wide(a, [np.arange(5, dtype=np.int32)], chunk=2)
    >>> b.update(np.arange(5, dtype=np.int64).tobytes())
    >>> a.hexdigest() == b.hexdigest()
    True
    """
    for a in arrays:
        a = np.asarray(a)
        wide = dtype or (np.int64 if a.dtype.kind in "iu" else np.float64)
        flat = a.reshape(-1) if a.flags.c_contiguous else np.ascontiguousarray(a).reshape(-1)
        for lo in range(0, flat.size, chunk):
            h.update(memoryview(np.ascontiguousarray(flat[lo:lo + chunk], wide)).cast("B"))
