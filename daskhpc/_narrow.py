"""The narrowest exact storage for ids and values (12 bytes a rating, 16 a tensor nonzero,
not twice that); computations widen to float64 first, so results do not depend on it."""

from __future__ import annotations

import numpy as np


def index_dtype(n: int) -> type:
    """int32 when it holds the indices ``0..n-1``, else int64."""
    return np.int32 if n < 2**31 else np.int64


def counts(labels, n: int, chunk: int = 1 << 20) -> np.ndarray:
    """``np.bincount(labels, minlength=n)[:n]`` without numpy's int64 copy of ``labels``."""
    out = np.zeros(n, np.int64)
    for lo in range(0, labels.size, chunk):
        out += np.bincount(labels[lo:lo + chunk], minlength=n)[:n]
    return out


def narrow_values(v) -> np.ndarray:
    """``v`` as float32 when that keeps every value exactly (half-star ratings do), else as it
    is (a non-float array too)."""
    v = np.asarray(v)
    if v.dtype == np.float32 or v.dtype.kind != "f":
        return v
    with np.errstate(over="ignore"):         # beyond float32's range: inf, not equal
        v32 = v.astype(np.float32)
    return v32 if np.array_equal(v32, v) else v


def hash_wide(h, arrays, dtype=None, chunk: int = 1 << 20) -> None:
    """Feed the hash ``h`` the arrays' bytes as ``dtype`` (default int64 for integers, float64
    else), ``chunk`` items at a time: narrow arrays give the digests their wide copies gave."""
    for a in arrays:
        a = np.asarray(a)
        wide = dtype or (np.int64 if a.dtype.kind in "iu" else np.float64)
        flat = a.reshape(-1) if a.flags.c_contiguous else np.ascontiguousarray(a).reshape(-1)
        for lo in range(0, flat.size, chunk):
            h.update(memoryview(np.ascontiguousarray(flat[lo:lo + chunk], wide)).cast("B"))
