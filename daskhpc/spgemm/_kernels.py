"""Numba kernels of the local steps: symbolic, hash multiply, hash merge, sort.

All matrices are CSC (``ptr`` int64, ``idx`` int32, ``val`` float64), so a
column of the output is formed from whole columns of the inputs (Gustavson's
column variant, section II-C)::

    C(:, j) = sum over i with B(i, j) != 0 of  A(:, i) * B(i, j)

Hash accumulators follow section IV-D: one open-addressing table (linear
probing) per output column, sized to the next power of two above twice the
column's entry count, reused across columns. Multiply and merge leave the rows
of a column in table order ("unsorted-hash"); only :func:`sort_columns` sorts,
and the driver calls it where the final output needs it.

Every kernel is two-pass, like scipy's: a symbolic pass sizes each output
column, the numeric pass writes into exactly sized arrays.

No dask here.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["symbolic", "symbolic_dense", "multiply", "merge_symbolic", "merge_numeric", "sort_columns",
           "select_columns", "topk_columns", "column_flops"]

_EMPTY = np.int32(-1)
_HASH = np.int64(107)  # Nagasaka et al.'s multiplicative hash


@njit(cache=True, nogil=True)
def _table_size(n):
    size = 16
    while size < 2 * n:
        size *= 2
    return size


@njit(cache=True, nogil=True)
def column_flops(a_ptr, b_ptr, b_idx):
    """Multiplications per output column: ``sum_{i in B(:,j)} nnz(A(:, i))``."""
    n = b_ptr.size - 1
    flops = np.zeros(n, np.int64)
    for j in range(n):
        f = 0
        for q in range(b_ptr[j], b_ptr[j + 1]):
            i = b_idx[q]
            f += a_ptr[i + 1] - a_ptr[i]
        flops[j] = f
    return flops


@njit(cache=True, nogil=True)
def symbolic(a_ptr, a_idx, b_ptr, b_idx, flops):
    """LocalSymbolic (Algorithm 3 line 8): nonzeros of each column of A·B.

    ``flops`` is :func:`column_flops` of the same operands; it sizes the hash
    table of each column. Returns int64 counts, one per column of B.
    """
    n = b_ptr.size - 1
    counts = np.zeros(n, np.int64)
    maxf = 0
    for j in range(n):
        if flops[j] > maxf:
            maxf = flops[j]
    keys = np.full(_table_size(maxf), _EMPTY, np.int32)
    for j in range(n):
        if flops[j] == 0:
            continue
        size = _table_size(flops[j])
        mask = size - 1
        keys[:size] = _EMPTY
        c = 0
        for q in range(b_ptr[j], b_ptr[j + 1]):
            i = b_idx[q]
            for t in range(a_ptr[i], a_ptr[i + 1]):
                r = a_idx[t]
                h = (r * _HASH) & mask
                while True:
                    k = keys[h]
                    if k == r:
                        break
                    if k == _EMPTY:
                        keys[h] = r
                        c += 1
                        break
                    h = (h + 1) & mask
        counts[j] = c
    return counts


@njit(cache=True, nogil=True)
def symbolic_dense(a_ptr, a_idx, b_ptr, b_idx, nrows):
    """:func:`symbolic` with a dense marker per row instead of a hash table.

    Same result; faster while the marker (4 bytes per row of A) stays in cache,
    which is why :func:`daskhpc.spgemm._local.local_symbolic` picks it for
    blocks of up to ``DENSE_SYMBOLIC_ROWS`` rows.
    """
    n = b_ptr.size - 1
    counts = np.zeros(n, np.int64)
    mark = np.full(nrows, -1, np.int32)
    for j in range(n):
        c = 0
        for q in range(b_ptr[j], b_ptr[j + 1]):
            i = b_idx[q]
            for t in range(a_ptr[i], a_ptr[i + 1]):
                r = a_idx[t]
                if mark[r] != j:
                    mark[r] = j
                    c += 1
        counts[j] = c
    return counts


@njit(cache=True, nogil=True)
def multiply(a_ptr, a_idx, a_val, b_ptr, b_idx, b_val, c_ptr):
    """Numeric unsorted-hash Local-Multiply (section IV-D).

    ``c_ptr`` is the cumulative sum of :func:`symbolic`'s counts. Returns the
    output rows (int32) and values; rows within a column are in hash order.
    """
    n = b_ptr.size - 1
    nnz = c_ptr[n]
    c_idx = np.empty(nnz, np.int32)
    c_val = np.empty(nnz, np.float64)
    maxc = 0
    for j in range(n):
        if c_ptr[j + 1] - c_ptr[j] > maxc:
            maxc = c_ptr[j + 1] - c_ptr[j]
    keys = np.full(_table_size(maxc), _EMPTY, np.int32)
    slot = np.empty(_table_size(maxc), np.int64)
    for j in range(n):
        start = c_ptr[j]
        cnt = c_ptr[j + 1] - start
        if cnt == 0:
            continue
        size = _table_size(cnt)
        mask = size - 1
        keys[:size] = _EMPTY
        pos = start
        for q in range(b_ptr[j], b_ptr[j + 1]):
            i = b_idx[q]
            bv = b_val[q]
            for t in range(a_ptr[i], a_ptr[i + 1]):
                r = a_idx[t]
                h = (r * _HASH) & mask
                while True:
                    k = keys[h]
                    if k == r:
                        c_val[slot[h]] += a_val[t] * bv
                        break
                    if k == _EMPTY:
                        keys[h] = r
                        slot[h] = pos
                        c_idx[pos] = r
                        c_val[pos] = a_val[t] * bv
                        pos += 1
                        break
                    h = (h + 1) & mask
    return c_idx, c_val


@njit(cache=True, nogil=True)
def merge_symbolic(ptrs, idxs, ncols):
    """Nonzeros per column of the sum of several same-shape matrices (hash merge)."""
    counts = np.zeros(ncols, np.int64)
    total = np.zeros(ncols, np.int64)
    for m in range(len(ptrs)):
        p = ptrs[m]
        for j in range(ncols):
            total[j] += p[j + 1] - p[j]
    maxt = 0
    for j in range(ncols):
        if total[j] > maxt:
            maxt = total[j]
    keys = np.full(_table_size(maxt), _EMPTY, np.int32)
    for j in range(ncols):
        if total[j] == 0:
            continue
        size = _table_size(total[j])
        mask = size - 1
        keys[:size] = _EMPTY
        c = 0
        for m in range(len(ptrs)):
            p = ptrs[m]
            ix = idxs[m]
            for t in range(p[j], p[j + 1]):
                r = ix[t]
                h = (r * _HASH) & mask
                while True:
                    k = keys[h]
                    if k == r:
                        break
                    if k == _EMPTY:
                        keys[h] = r
                        c += 1
                        break
                    h = (h + 1) & mask
        counts[j] = c
    return counts


@njit(cache=True, nogil=True)
def merge_numeric(ptrs, idxs, vals, c_ptr):
    """Unsorted-hash merge (Merge-Layer / Merge-Fiber, section IV-D)."""
    ncols = c_ptr.size - 1
    nnz = c_ptr[ncols]
    c_idx = np.empty(nnz, np.int32)
    c_val = np.empty(nnz, np.float64)
    maxc = 0
    for j in range(ncols):
        if c_ptr[j + 1] - c_ptr[j] > maxc:
            maxc = c_ptr[j + 1] - c_ptr[j]
    keys = np.full(_table_size(maxc), _EMPTY, np.int32)
    slot = np.empty(_table_size(maxc), np.int64)
    for j in range(ncols):
        cnt = c_ptr[j + 1] - c_ptr[j]
        if cnt == 0:
            continue
        size = _table_size(cnt)
        mask = size - 1
        keys[:size] = _EMPTY
        pos = c_ptr[j]
        for m in range(len(ptrs)):
            p = ptrs[m]
            ix = idxs[m]
            vx = vals[m]
            for t in range(p[j], p[j + 1]):
                r = ix[t]
                h = (r * _HASH) & mask
                while True:
                    k = keys[h]
                    if k == r:
                        c_val[slot[h]] += vx[t]
                        break
                    if k == _EMPTY:
                        keys[h] = r
                        slot[h] = pos
                        c_idx[pos] = r
                        c_val[pos] = vx[t]
                        pos += 1
                        break
                    h = (h + 1) & mask
    return c_idx, c_val


@njit(cache=True, nogil=True)
def _insertion_sort(idx, val, lo, hi):
    for a in range(lo + 1, hi):
        r = idx[a]
        v = val[a]
        b = a - 1
        while b >= lo and idx[b] > r:
            idx[b + 1] = idx[b]
            val[b + 1] = val[b]
            b -= 1
        idx[b + 1] = r
        val[b + 1] = v


@njit(cache=True, nogil=True)
def sort_columns(ptr, idx, val):
    """Sort rows ascending within every column, in place."""
    for j in range(ptr.size - 1):
        lo = ptr[j]
        hi = ptr[j + 1]
        if hi - lo <= 32:
            _insertion_sort(idx, val, lo, hi)
        else:
            order = np.argsort(idx[lo:hi], kind="quicksort")
            idx[lo:hi] = idx[lo:hi][order]
            val[lo:hi] = val[lo:hi][order]


@njit(cache=True, nogil=True)
def select_columns(ptr, idx, val, cols):
    """Columns ``cols`` (in that order) of a CSC matrix."""
    out_ptr = np.zeros(cols.size + 1, np.int64)
    for c in range(cols.size):
        j = cols[c]
        out_ptr[c + 1] = out_ptr[c] + ptr[j + 1] - ptr[j]
    out_idx = np.empty(out_ptr[-1], np.int32)
    out_val = np.empty(out_ptr[-1], np.float64)
    for c in range(cols.size):
        j = cols[c]
        n = ptr[j + 1] - ptr[j]
        out_idx[out_ptr[c]:out_ptr[c] + n] = idx[ptr[j]:ptr[j + 1]]
        out_val[out_ptr[c]:out_ptr[c] + n] = val[ptr[j]:ptr[j + 1]]
    return out_ptr, out_idx, out_val


@njit(cache=True, nogil=True)
def topk_columns(ptr, idx, val, k):
    """Keep the ``k`` largest values of every column (ties: smaller row first)."""
    n = ptr.size - 1
    out_ptr = np.zeros(n + 1, np.int64)
    for j in range(n):
        out_ptr[j + 1] = out_ptr[j] + min(k, ptr[j + 1] - ptr[j])
    out_idx = np.empty(out_ptr[-1], np.int32)
    out_val = np.empty(out_ptr[-1], np.float64)
    for j in range(n):
        lo = ptr[j]
        hi = ptr[j + 1]
        o = out_ptr[j]
        if hi - lo <= k:
            out_idx[o:o + hi - lo] = idx[lo:hi]
            out_val[o:o + hi - lo] = val[lo:hi]
            continue
        # order by (-value, row): deterministic whatever the hash order was
        rows = idx[lo:hi]
        order = np.argsort(rows, kind="mergesort")
        vs = -val[lo:hi][order]
        keep = order[np.argsort(vs, kind="mergesort")[:k]]
        out_idx[o:o + k] = rows[keep]
        out_val[o:o + k] = val[lo:hi][keep]
    return out_ptr, out_idx, out_val


@njit(cache=True, nogil=True)
def stages_symbolic(a_ptrs, a_idxs, b_ptrs, b_idxs, nrows, ncols):
    """Nonzeros per column of ``sum_s A_s · B_s`` (dense marker over all stages)."""
    counts = np.zeros(ncols, np.int64)
    mark = np.full(nrows, -1, np.int32)
    for j in range(ncols):
        c = 0
        for s in range(len(a_ptrs)):
            a_ptr = a_ptrs[s]
            a_idx = a_idxs[s]
            b_ptr = b_ptrs[s]
            b_idx = b_idxs[s]
            for q in range(b_ptr[j], b_ptr[j + 1]):
                i = b_idx[q]
                for t in range(a_ptr[i], a_ptr[i + 1]):
                    r = a_idx[t]
                    if mark[r] != j:
                        mark[r] = j
                        c += 1
        counts[j] = c
    return counts


@njit(cache=True, nogil=True)
def stages_multiply(a_ptrs, a_idxs, a_vals, b_ptrs, b_idxs, b_vals, c_ptr):
    """``sum_s A_s · B_s`` with one hash table per output column across all stages.

    The fused alternative to Local-Multiply per stage + Merge-Layer: the same
    unsorted-hash accumulator, fed by every stage's columns in turn, so no
    partial product is stored or merged.
    """
    n = c_ptr.size - 1
    c_idx = np.empty(c_ptr[n], np.int32)
    c_val = np.empty(c_ptr[n], np.float64)
    maxc = 0
    for j in range(n):
        if c_ptr[j + 1] - c_ptr[j] > maxc:
            maxc = c_ptr[j + 1] - c_ptr[j]
    keys = np.full(_table_size(maxc), _EMPTY, np.int32)
    slot = np.empty(_table_size(maxc), np.int64)
    for j in range(n):
        cnt = c_ptr[j + 1] - c_ptr[j]
        if cnt == 0:
            continue
        size = _table_size(cnt)
        mask = size - 1
        keys[:size] = _EMPTY
        pos = c_ptr[j]
        for s in range(len(a_ptrs)):
            a_ptr = a_ptrs[s]
            a_idx = a_idxs[s]
            a_val = a_vals[s]
            b_ptr = b_ptrs[s]
            b_idx = b_idxs[s]
            b_val = b_vals[s]
            for q in range(b_ptr[j], b_ptr[j + 1]):
                i = b_idx[q]
                bv = b_val[q]
                for t in range(a_ptr[i], a_ptr[i + 1]):
                    r = a_idx[t]
                    h = (r * _HASH) & mask
                    while True:
                        k = keys[h]
                        if k == r:
                            c_val[slot[h]] += a_val[t] * bv
                            break
                        if k == _EMPTY:
                            keys[h] = r
                            slot[h] = pos
                            c_idx[pos] = r
                            c_val[pos] = a_val[t] * bv
                            pos += 1
                            break
                        h = (h + 1) & mask
    return c_idx, c_val
