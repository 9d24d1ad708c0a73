"""numba kernels of the stream format: merge-sum and union of two sorted index streams.

Listing 4.3's two-pointer walk (section 4.1.3, case 1.a). Explicit zeros are kept, so a
call's communication depends on the index sets only. No fastmath: every sum is
evaluated as written, whatever the alignment or the process.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def merge_sum(i1, v1, i2, v2):
    """Union of two sorted unique index streams, values summed where both have one."""
    n1, n2 = i1.size, i2.size
    oi = np.empty(n1 + n2, np.uint32)
    ov = np.empty(n1 + n2, v1.dtype)
    a = b = n = 0
    # Listing 4.3, lines 39-57: the sparse branch of the two-pointer walk
    while a < n1 and b < n2:
        x, y = i1[a], i2[b]
        if x < y:
            oi[n] = x
            ov[n] = v1[a]
            a += 1
        elif y < x:
            oi[n] = y
            ov[n] = v2[b]
            b += 1
        else:
            oi[n] = x
            ov[n] = v1[a] + v2[b]
            a += 1
            b += 1
        n += 1
    while a < n1:
        oi[n] = i1[a]
        ov[n] = v1[a]
        a += 1
        n += 1
    while b < n2:
        oi[n] = i2[b]
        ov[n] = v2[b]
        b += 1
        n += 1
    return oi[:n].copy(), ov[:n].copy()


@numba.njit(cache=True, nogil=True)
def merge_union(i1, i2):
    """Union of two sorted unique index streams (the index-only walk of the plan)."""
    n1, n2 = i1.size, i2.size
    oi = np.empty(n1 + n2, np.uint32)
    a = b = n = 0
    while a < n1 and b < n2:
        x, y = i1[a], i2[b]
        if x < y:
            oi[n] = x
            a += 1
        elif y < x:
            oi[n] = y
            b += 1
        else:
            oi[n] = x
            a += 1
            b += 1
        n += 1
    while a < n1:
        oi[n] = i1[a]
        a += 1
        n += 1
    while b < n2:
        oi[n] = i2[b]
        b += 1
        n += 1
    return oi[:n].copy()


def _warm_up_plan() -> None:
    """``plan``'s kernel: the union of index streams."""
    i = np.array([1], np.uint32)
    merge_union(i, i)


#: What ``plan`` and a run compile, for daskhpc.runtime.prepare_kernels.
WARMUP_PLAN = (_warm_up_plan,)
WARMUP = ("daskhpc.allreduce._job:warm_up",)
