"""Numba kernels of the local steps: symbolic, multiply, merge, sort (no dask).

CSC throughout (``ptr`` int64, ``idx`` int32, ``val`` float64), Gustavson's column
variant (section II-C): ``C(:, j) = sum_s sum_{i: B_s(i, j) != 0} A_s(:, i) B_s(i, j)``.
Operands are *stacks* (``X_ptr, X_off, X_idx, X_val``; matrix ``s``'s pointers are
``X_ptr[X_off[s]:X_off[s + 1]]``, built by ``_local._stack``), plain arrays because a
``numba.typed.List`` compiles uncached helpers in every process. Outputs go into arrays
the caller sized (``boundscheck=False``); accumulators are dense (``spa_*``) or hash
(``hash_*``, section IV-D) and leave rows unsorted. Why: docs/spgemm.md, "Local kernels".
"""

from __future__ import annotations

import numpy as np
from numba import njit

_EMPTY = np.int32(-1)
_HASH = np.int64(107)  # Nagasaka et al.'s multiplicative hash

_OPTS = {"cache": True, "nogil": True, "boundscheck": False}


@njit(**_OPTS)
def _table_size(n):
    size = 16
    while size < 2 * n:
        size *= 2
    return size


@njit(**_OPTS)
def column_flops(a_ptr, a_off, b_ptr, b_off, b_idx, ncols):
    """Multiplications per output column: ``sum_s sum_{i in B_s(:,j)} nnz(A_s(:, i))``."""
    flops = np.zeros(ncols, np.int64)
    for s in range(a_off.size - 1):
        ao = a_off[s]
        bo = b_off[s]
        for j in range(ncols):
            f = 0
            for q in range(b_ptr[bo + j], b_ptr[bo + j + 1]):
                i = b_idx[q]
                f += a_ptr[ao + i + 1] - a_ptr[ao + i]
            flops[j] += f
    return flops


@njit(**_OPTS)
def column_bounds(flops, nrows):
    """``min(flops_j, nrows)`` per column and their sum: the output bound."""
    bound = np.empty(flops.size, np.int64)
    total = 0
    for j in range(flops.size):
        bound[j] = min(flops[j], nrows)
        total += bound[j]
    return bound, total


@njit(**_OPTS)
def merge_bounds(ptr, off, ncols, nrows):
    """Per column ``min(sum of the parts' nonzeros, nrows)`` and their sum."""
    nnz = np.zeros(ncols, np.int64)
    for m in range(off.size - 1):
        po = off[m]
        for j in range(ncols):
            nnz[j] += ptr[po + j + 1] - ptr[po + j]
    return column_bounds(nnz, nrows)


@njit(inline="always", **_OPTS)
def _symbolic_body(a_ptr, a_off, a_idx, b_ptr, b_off, b_idx, ncols, mark, masked, m_ptr,
                   m_idx, allow, inside):  # pragma: no cover - numba
    """Nonzeros per column; with ``masked`` only rows in (``inside``) or not in the mask."""
    counts = np.zeros(ncols, np.int64)
    for j in range(ncols):
        if masked:
            _stamp(m_ptr, m_idx, allow, j)
        c = 0
        for s in range(a_off.size - 1):
            ao = a_off[s]
            bo = b_off[s]
            for q in range(b_ptr[bo + j], b_ptr[bo + j + 1]):
                i = b_idx[q]
                for t in range(a_ptr[ao + i], a_ptr[ao + i + 1]):
                    r = a_idx[t]
                    if mark[r] != j and (not masked or (allow[r] == j) == inside):
                        mark[r] = j
                        c += 1
        counts[j] = c
    return counts


@njit(**_OPTS)
def symbolic_dense(a_ptr, a_off, a_idx, b_ptr, b_off, b_idx, nrows, ncols):
    """LocalSymbolic (Algorithm 3 line 8) with a dense marker per row."""
    return _symbolic_body(a_ptr, a_off, a_idx, b_ptr, b_off, b_idx, ncols,
                          np.full(nrows, -1, np.int32), False, a_ptr, a_idx, a_ptr, False)


@njit(**_OPTS)
def symbolic_hash(a_ptr, a_off, a_idx, b_ptr, b_off, b_idx, bound):
    """:func:`symbolic_dense` with a hash table per column (sized from ``bound``)."""
    ncols = bound.size
    counts = np.zeros(ncols, np.int64)
    maxb = 0
    for j in range(ncols):
        maxb = max(maxb, bound[j])
    keys = np.full(_table_size(maxb), _EMPTY, np.int32)
    for j in range(ncols):
        if bound[j] == 0:
            continue
        size = _table_size(bound[j])
        mask = size - 1
        keys[:size] = _EMPTY
        c = 0
        for s in range(a_off.size - 1):
            ao = a_off[s]
            bo = b_off[s]
            for q in range(b_ptr[bo + j], b_ptr[bo + j + 1]):
                i = b_idx[q]
                for t in range(a_ptr[ao + i], a_ptr[ao + i + 1]):
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


# Semirings and masks (docs/spgemm.md): an entry exists iff the symbolic product has it;
# a mask column is stamped into ``allow`` once per column, tested before each product.

PLUS_TIMES, MIN_PLUS, MAX_PLUS, MAX_TIMES, OR_AND, PLUS_PAIR = 0, 1, 2, 3, 4, 5
#: the semirings by code (``SEMIRINGS.index(name)`` is the code the kernels take)
SEMIRINGS = ("plus_times", "min_plus", "max_plus", "max_times", "or_and", "plus_pair")


@njit(inline="always", **_OPTS)
def _mul(sr, x, y):  # pragma: no cover - numba
    if sr == PLUS_TIMES or sr == MAX_TIMES:
        return x * y
    if sr == MIN_PLUS or sr == MAX_PLUS:
        return x + y
    if sr == OR_AND:
        return 1.0 if (x != 0.0 and y != 0.0) else 0.0
    return 1.0                                   # plus_pair


@njit(inline="always", **_OPTS)
def _add(sr, x, y):  # pragma: no cover - numba
    if sr == PLUS_TIMES or sr == PLUS_PAIR:
        return x + y
    if sr == MIN_PLUS:
        return x if x <= y else y
    return x if x >= y else y                    # max_plus, max_times, or_and (max of 0/1)


@njit(inline="always", **_OPTS)
def _stamp(m_ptr, m_idx, allow, j):  # pragma: no cover - numba
    for t in range(m_ptr[j], m_ptr[j + 1]):
        allow[m_idx[t]] = j


@njit(inline="always", **_OPTS)
def _spa_body(sr, mmode, a_ptr, a_off, a_idx, a_val, b_ptr, b_off, b_idx, b_val, p_ptr,
              p_off, p_idx, p_val, m_ptr, m_idx, allow, where, c_ptr, c_idx, c_val):
    """:func:`spa_multiply` over semiring ``sr``; ``mmode`` 1 (2): rows in (not in) the mask."""
    ncols = c_ptr.size - 1
    inside = mmode == 1
    c_ptr[0] = 0
    pos = 0
    for j in range(ncols):
        start = pos
        if mmode != 0:
            _stamp(m_ptr, m_idx, allow, j)
        for m in range(p_off.size - 1):        # pieces already masked by their makers
            po = p_off[m]
            for t in range(p_ptr[po + j], p_ptr[po + j + 1]):
                r = p_idx[t]
                p = where[r]
                if p >= start:
                    c_val[p] = _add(sr, c_val[p], p_val[t])
                else:
                    where[r] = pos
                    c_idx[pos] = r
                    c_val[pos] = p_val[t]
                    pos += 1
        for s in range(a_off.size - 1):
            ao = a_off[s]
            bo = b_off[s]
            for q in range(b_ptr[bo + j], b_ptr[bo + j + 1]):
                i = b_idx[q]
                bv = b_val[q]
                for t in range(a_ptr[ao + i], a_ptr[ao + i + 1]):
                    r = a_idx[t]
                    if mmode != 0 and (allow[r] == j) != inside:
                        continue
                    v = _mul(sr, a_val[t], bv)
                    p = where[r]
                    if p >= start:
                        c_val[p] = _add(sr, c_val[p], v)
                    else:
                        where[r] = pos
                        c_idx[pos] = r
                        c_val[pos] = v
                        pos += 1
        c_ptr[j + 1] = pos
    return pos


@njit(inline="always", **_OPTS)
def _hash_acc(sr, keys, slot, mask, r, v, c_idx, c_val, pos):  # pragma: no cover - numba
    """Add v to row r of the linear-probing table (section IV-D); returns the next position."""
    h = (r * _HASH) & mask
    while True:
        k = keys[h]
        if k == r:
            c_val[slot[h]] = _add(sr, c_val[slot[h]], v)
            return pos
        if k == _EMPTY:
            keys[h] = r
            slot[h] = pos
            c_idx[pos] = r
            c_val[pos] = v
            return pos + 1
        h = (h + 1) & mask


@njit(inline="always", **_OPTS)
def _hash_body(sr, mmode, a_ptr, a_off, a_idx, a_val, b_ptr, b_off, b_idx, b_val, p_ptr,
               p_off, p_idx, p_val, m_ptr, m_idx, allow, bound, c_ptr, c_idx, c_val):
    """:func:`hash_multiply` over semiring ``sr`` with a mask (see :func:`_spa_body`)."""
    ncols = c_ptr.size - 1
    inside = mmode == 1
    maxb = 0
    for j in range(ncols):
        maxb = max(maxb, bound[j])
    keys = np.full(_table_size(maxb), _EMPTY, np.int32)
    slot = np.empty(_table_size(maxb), np.int64)
    c_ptr[0] = 0
    pos = 0
    for j in range(ncols):
        if bound[j] == 0:
            c_ptr[j + 1] = pos
            continue
        if mmode != 0:
            _stamp(m_ptr, m_idx, allow, j)
        size = _table_size(bound[j])
        mask = size - 1
        keys[:size] = _EMPTY
        for m in range(p_off.size - 1):
            po = p_off[m]
            for t in range(p_ptr[po + j], p_ptr[po + j + 1]):
                pos = _hash_acc(sr, keys, slot, mask, p_idx[t], p_val[t], c_idx, c_val, pos)
        for s in range(a_off.size - 1):
            ao = a_off[s]
            bo = b_off[s]
            for q in range(b_ptr[bo + j], b_ptr[bo + j + 1]):
                i = b_idx[q]
                bv = b_val[q]
                for t in range(a_ptr[ao + i], a_ptr[ao + i + 1]):
                    r = a_idx[t]
                    if mmode != 0 and (allow[r] == j) != inside:
                        continue
                    pos = _hash_acc(sr, keys, slot, mask, r, _mul(sr, a_val[t], bv), c_idx,
                                    c_val, pos)
        c_ptr[j + 1] = pos
    return pos


@njit(**_OPTS)
def spa_multiply(a_ptr, a_off, a_idx, a_val, b_ptr, b_off, b_idx, b_val, p_ptr, p_off,
                 p_idx, p_val, where, c_ptr, c_idx, c_val):
    """``sum_m P_m + sum_s A_s · B_s`` in one pass, dense accumulator.

    ``P_m``: pieces of the output's shape (the fused Merge-Fiber). ``where``: one entry per
    row, all < 0 (int32 halves its cache footprint below 2**31 entries). Returns the nnz."""
    # mmode 0: the mask's three arrays (c_ptr, c_idx, c_ptr here) are never read
    return _spa_body(PLUS_TIMES, 0, a_ptr, a_off, a_idx, a_val, b_ptr, b_off, b_idx, b_val,
                     p_ptr, p_off, p_idx, p_val, c_ptr, c_idx, c_ptr, where, c_ptr, c_idx, c_val)


@njit(**_OPTS)
def hash_multiply(a_ptr, a_off, a_idx, a_val, b_ptr, b_off, b_idx, b_val, p_ptr, p_off,
                  p_idx, p_val, bound, c_ptr, c_idx, c_val):
    """:func:`spa_multiply` with a hash table per column, sized by ``bound[j]`` (§IV-D)."""
    return _hash_body(PLUS_TIMES, 0, a_ptr, a_off, a_idx, a_val, b_ptr, b_off, b_idx, b_val,
                      p_ptr, p_off, p_idx, p_val, c_ptr, c_idx, c_ptr, bound, c_ptr, c_idx, c_val)


# One kernel per semiring and accumulator: ``hashed`` and ``sr`` are closure constants
# (in numba's cache key), so the other branches fold away at compile time.

def _semiring_kernel(hashed, sr):
    @njit(**_OPTS)
    def kernel(mmode, a_ptr, a_off, a_idx, a_val, b_ptr, b_off, b_idx, b_val, p_ptr, p_off,
               p_idx, p_val, m_ptr, m_idx, allow, acc, c_ptr, c_idx, c_val):
        # ``acc``: the tables' ``bound`` (hash) or ``where`` (dense)
        if hashed == 1:
            return _hash_body(sr, mmode, a_ptr, a_off, a_idx, a_val, b_ptr, b_off, b_idx,
                              b_val, p_ptr, p_off, p_idx, p_val, m_ptr, m_idx, allow, acc,
                              c_ptr, c_idx, c_val)
        return _spa_body(sr, mmode, a_ptr, a_off, a_idx, a_val, b_ptr, b_off, b_idx, b_val,
                         p_ptr, p_off, p_idx, p_val, m_ptr, m_idx, allow, acc, c_ptr, c_idx,
                         c_val)
    return kernel


def spa_semiring(sr, mmode, *args):
    """:func:`spa_multiply` over semiring ``sr``, mask mode ``mmode`` (mask arrays before
    ``where``)."""
    return _SPA_KERNELS[sr](mmode, *args)


def hash_semiring(sr, mmode, *args):
    """:func:`spa_semiring` with a hash table per column (``bound`` instead of ``where``)."""
    return _HASH_KERNELS[sr](mmode, *args)


_SPA_KERNELS = tuple(_semiring_kernel(0, sr) for sr in range(len(SEMIRINGS)))
_HASH_KERNELS = tuple(_semiring_kernel(1, sr) for sr in range(len(SEMIRINGS)))


@njit(**_OPTS)
def symbolic_masked(a_ptr, a_off, a_idx, b_ptr, b_off, b_idx, nrows, ncols, m_ptr, m_idx, mmode):
    """:func:`symbolic_dense` on the rows in (``mmode`` 1) or not in (2) the mask's column."""
    return _symbolic_body(a_ptr, a_off, a_idx, b_ptr, b_off, b_idx, ncols,
                          np.full(nrows, -1, np.int64), True, m_ptr, m_idx,
                          np.full(nrows, -1, np.int64), mmode == 1)


# A merge is a product without stages (an empty A and B stack): the pieces alone.

@njit(inline="always", **_OPTS)
def spa_merge_semiring(sr, ptr, off, idx, val, where, c_ptr, c_idx, c_val):
    """Semiring sum of same-shape matrices, dense accumulator (Merge-Layer/-Fiber)."""
    none = off[:1]
    return _spa_body(sr, 0, ptr, none, idx, val, ptr, none, idx, val, ptr, off, idx, val,
                     ptr, idx, ptr, where, c_ptr, c_idx, c_val)


@njit(inline="always", **_OPTS)
def hash_merge_semiring(sr, ptr, off, idx, val, bound, c_ptr, c_idx, c_val):
    """Semiring sum of same-shape matrices, hash accumulator (section IV-D)."""
    none = off[:1]
    return _hash_body(sr, 0, ptr, none, idx, val, ptr, none, idx, val, ptr, off, idx, val,
                      ptr, idx, ptr, bound, c_ptr, c_idx, c_val)


@njit(**_OPTS)
def spa_merge(ptr, off, idx, val, where, c_ptr, c_idx, c_val):
    """Sum of same-shape matrices, dense accumulator (Merge-Layer/-Fiber)."""
    return spa_merge_semiring(PLUS_TIMES, ptr, off, idx, val, where, c_ptr, c_idx, c_val)


@njit(**_OPTS)
def hash_merge(ptr, off, idx, val, bound, c_ptr, c_idx, c_val):
    """Sum of same-shape matrices, hash accumulator (section IV-D)."""
    return hash_merge_semiring(PLUS_TIMES, ptr, off, idx, val, bound, c_ptr, c_idx, c_val)


# Our own stable merge sort, not ``np.argsort`` (each argsort kind costs numba 2-4 s
# of compile). ``by_value``: value descending (NaN last), ties by row; else by row.

@njit(inline="always", **_OPTS)
def _before(r1, v1, r2, v2, by_value):  # pragma: no cover - numba
    """Whether entry (r1, v1) sorts strictly before (r2, v2)."""
    if by_value:
        nan1 = v1 != v1
        if nan1 != (v2 != v2):
            return not nan1
        if not nan1 and v1 != v2:
            return v1 > v2
    return r1 < r2


@njit(**_OPTS)
def _insertion_sort(idx, val, lo, hi, by_value):
    for a in range(lo + 1, hi):
        r = idx[a]
        v = val[a]
        b = a - 1
        while b >= lo and _before(r, v, idx[b], val[b], by_value):
            idx[b + 1] = idx[b]
            val[b + 1] = val[b]
            b -= 1
        idx[b + 1] = r
        val[b + 1] = v


@njit(**_OPTS)
def _sort_range(idx, val, lo, hi, tmp_idx, tmp_val, by_value):
    """Stable sort of ``lo:hi``: insertion-sorted runs of 32, then bottom-up merges."""
    w = 32
    for a in range(lo, hi, w):
        _insertion_sort(idx, val, a, min(a + w, hi), by_value)
    while lo + w < hi:
        for a in range(lo, hi, 2 * w):
            mid = min(a + w, hi)
            end = min(a + 2 * w, hi)
            if mid >= end:
                continue
            x, y, o = a, mid, 0
            while x < mid and y < end:
                if _before(idx[y], val[y], idx[x], val[x], by_value):
                    tmp_idx[o] = idx[y]
                    tmp_val[o] = val[y]
                    y += 1
                else:
                    tmp_idx[o] = idx[x]
                    tmp_val[o] = val[x]
                    x += 1
                o += 1
            while x < mid:
                tmp_idx[o] = idx[x]
                tmp_val[o] = val[x]
                x += 1
                o += 1
            for t in range(o):          # the rest of the right run is in place
                idx[a + t] = tmp_idx[t]
                val[a + t] = tmp_val[t]
        w *= 2


# Element loops: a slice assignment compiles numba's shape-mismatch message (~3 s).
@njit(**_OPTS)
def _copy(idx, val, src, out_idx, out_val, dst, n):
    for t in range(n):
        out_idx[dst + t] = idx[src + t]
        out_val[dst + t] = val[src + t]


@njit(**_OPTS)
def _longest(ptr):
    n = 0
    for j in range(ptr.size - 1):
        n = max(n, ptr[j + 1] - ptr[j])
    return n


@njit(**_OPTS)
def sort_columns(ptr, idx, val):
    """Sort rows ascending within every column, in place."""
    n = _longest(ptr)
    tmp_idx = np.empty(n, idx.dtype)
    tmp_val = np.empty(n, val.dtype)
    for j in range(ptr.size - 1):
        _sort_range(idx, val, ptr[j], ptr[j + 1], tmp_idx, tmp_val, False)


@njit(**_OPTS)
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
        _copy(idx, val, ptr[j], out_idx, out_val, out_ptr[c], n)
    return out_ptr, out_idx, out_val


@njit(**_OPTS)
def topk_columns(ptr, idx, val, k):
    """The ``k`` largest values of every column, largest first (ties: smaller row, NaN last)."""
    n = ptr.size - 1
    out_ptr = np.zeros(n + 1, np.int64)
    for j in range(n):
        out_ptr[j + 1] = out_ptr[j] + min(k, ptr[j + 1] - ptr[j])
    out_idx = np.empty(out_ptr[-1], np.int32)
    out_val = np.empty(out_ptr[-1], np.float64)
    m = _longest(ptr)
    col_idx = np.empty(m, np.int32)
    col_val = np.empty(m, np.float64)
    tmp_idx = np.empty(m, np.int32)
    tmp_val = np.empty(m, np.float64)
    for j in range(n):
        lo = ptr[j]
        hi = ptr[j + 1]
        o = out_ptr[j]
        if hi - lo <= k:
            _copy(idx, val, lo, out_idx, out_val, o, hi - lo)
            continue
        # order by (-value, row): deterministic whatever the hash order was
        _copy(idx, val, lo, col_idx, col_val, 0, hi - lo)
        _sort_range(col_idx, col_val, 0, hi - lo, tmp_idx, tmp_val, True)
        _copy(col_idx, col_val, 0, out_idx, out_val, o, k)
    return out_ptr, out_idx, out_val


@njit(**_OPTS)
def chunk_split(ptr, idx, val, row_label, row_ids, col_order, col_label, col_ids, nlabels,
                drop=True):
    """A kept block's entries grouped by chunk of C (``keep="workers"``).

    ``label = row_label[row] + col_label[col]``; columns in ``col_order``; exact zeros
    dropped with ``drop``. Returns ``starts`` and the rows, columns and values."""
    starts = np.zeros(nlabels + 1, np.int64)
    for jj in range(col_order.size):
        j = col_order[jj]
        cl = col_label[j]
        for e in range(ptr[j], ptr[j + 1]):
            if val[e] != 0.0 or not drop:
                starts[row_label[idx[e]] + cl + 1] += 1
    for u in range(nlabels):
        starts[u + 1] += starts[u]
    fill = starts[:-1].copy()
    n = starts[-1]
    rows = np.empty(n, np.int64)
    cols = np.empty(n, np.int64)
    vals = np.empty(n, np.float64)
    for jj in range(col_order.size):
        j = col_order[jj]
        cl = col_label[j]
        c = col_ids[j]
        for e in range(ptr[j], ptr[j + 1]):
            if val[e] != 0.0 or not drop:
                u = row_label[idx[e]] + cl
                o = fill[u]
                rows[o] = row_ids[idx[e]]
                cols[o] = c
                vals[o] = val[e]
                fill[u] = o + 1
    return starts, rows, cols, vals


def _warm_up_plan() -> None:
    """The plan's kernel (the grid symbolic pass, in the client)."""
    import scipy.sparse as sp

    from ._grid import Grid
    from ._symbolic import grid_symbolic

    a = sp.random(8, 8, density=0.5, random_state=0, format="csr")
    grid_symbolic(a, a, Grid(2, 1))


#: What ``plan`` and a run compile, for daskhpc.runtime.prepare_kernels.
WARMUP_PLAN = (_warm_up_plan,)
WARMUP = (_warm_up_plan, "daskhpc.spgemm._memory:warm_up")
