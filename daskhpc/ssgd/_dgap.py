"""d-gap rows (eq. (7)): which H rows each part must send to which part, once per epoch.

In a ring strata the parts Lambda(j) that update h_j do so in the ring order x, x-1, ...
(mod K): after x updates h_j it sends it to the next of them (the last to the first of
the next epoch); rows with one updater never move. :func:`dgap_successors` runs the
bitwise dynamic programme of Algorithm 2 (``get_shared_cols_efficient``), eq. (10):

    Psi^{x,y} = (B^x AND B^y) XOR (B^x AND B^y AND mask),  mask = OR of B^z, z between x, y

from an empty mask, as eq. (10) and the public code do (the printed Algorithm 2 seeds it
with the first successor's bits). :func:`successors_by_connectivity` is an independent
check from the sorted connectivity sets."""

from __future__ import annotations

import numba
import numpy as np

from daskhpc.arrays import unique_sorted

_DEBRUIJN = 0x03F79D71B4CB0A89


def _ctz_table() -> np.ndarray:
    # Trailing-zero count by de Bruijn multiplication: ((v & -v) * D) >> 58 is unique
    # for each of the 64 one-bit words v.
    table = np.zeros(64, dtype=np.int64)
    for i in range(64):
        table[(((1 << i) * _DEBRUIJN) & (2**64 - 1)) >> 58] = i
    return table


_CTZ = _ctz_table()


def pins_of(rows, cols, row_parts, ncols: int, nparts: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (column, part) pairs: part x updates h_j. Sorted by column, then part."""
    rows, cols, row_parts = np.asarray(rows), np.asarray(cols), np.asarray(row_parts)
    if ncols * nparts > rows.size:
        key = unique_sorted(cols.astype(np.int64) * nparts + row_parts[rows])
        return key // nparts, key % nparts
    # a mark per (column, part), set a chunk of ratings at a time: no 64-bit keys (and
    # their sort) of every rating, 24 bytes a rating
    seen = np.zeros(ncols * nparts, bool)
    for lo in range(0, rows.size, 1 << 20):
        key = cols[lo:lo + (1 << 20)].astype(np.int64) * nparts
        key += row_parts[rows[lo:lo + (1 << 20)]]
        seen[key] = True
    key = np.flatnonzero(seen)
    return key // nparts, key % nparts


@numba.njit(cache=True, nogil=True)
def _fill_bits(pins_col, pins_part, block_of, local_of, woff, nw, bits):
    for t in range(pins_col.size):
        j = pins_col[t]
        b = block_of[j]
        loc = local_of[j]
        w = woff[b] + pins_part[t] * nw[b] + (loc >> 6)
        bits[w] |= np.uint64(1) << np.uint64(loc & 63)


@numba.njit(cache=True, nogil=True)
def _walk(K, nw, woff, bits, count, col_ptr, col_ids, ctz, out_x, out_y, out_j):
    """Algorithm 2 for every block and part; returns the number of triples written."""
    n = 0
    one = np.uint64(1)
    deb = np.uint64(0x03F79D71B4CB0A89)
    for b in range(K):
        words = nw[b]
        if words == 0:
            continue
        mask = np.zeros(words, dtype=np.uint64)
        for x in range(K):
            left = count[b * K + x]           # rows of B^x still without a successor
            if left == 0:
                continue
            bx = woff[b] + x * words
            mask[:] = 0
            for step in range(1, K):          # y runs along Upsilon^{p_x}
                y = (x - step) % K
                by = woff[b] + y * words
                for w in range(words):
                    hit = bits[bx + w] & bits[by + w] & ~mask[w]   # Psi^{x,y}, eq. (10)
                    mask[w] |= bits[by + w]
                    while hit != 0:
                        low = hit & (~hit + one)
                        pos = ctz[np.int64((low * deb) >> np.uint64(58))]
                        out_x[n] = x
                        out_y[n] = y
                        out_j[n] = col_ids[col_ptr[b] + w * 64 + pos]
                        n += 1
                        left -= 1
                        hit ^= low
                if left == 0:                 # every row of x has its successor
                    break
    return n


def dgap_successors(pins_col, pins_part, col_blocks, nparts: int):
    """``(x, y, j)``: part x sends row h_j to part y, the next updater of h_j in the ring order
    (Algorithm 2 over the :func:`pins_of` pairs); rows with one updater do not appear."""
    K = int(nparts)
    pins_col = np.ascontiguousarray(pins_col, np.int64)
    pins_part = np.ascontiguousarray(pins_part, np.int64)
    col_blocks = np.ascontiguousarray(col_blocks, np.int64)
    if K < 2 or pins_col.size == 0:
        empty = np.zeros(0, np.int64)
        return empty, empty.copy(), empty.copy()
    # Columns of each block, in global order: bit b of B_beta^x is the b-th of them.
    order = np.argsort(col_blocks, kind="stable")
    sizes = np.bincount(col_blocks, minlength=K)
    col_ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    local_of = np.empty(col_blocks.size, np.int64)
    local_of[order] = np.arange(col_blocks.size) - col_ptr[col_blocks[order]]
    nw = (sizes + 63) // 64
    woff = np.concatenate([[0], np.cumsum(nw * K)]).astype(np.int64)
    bits = np.zeros(int(woff[-1]), dtype=np.uint64)
    _fill_bits(pins_col, pins_part, col_blocks, local_of, woff, nw, bits)
    # A pin whose column has a single updater finds no successor: only count the others.
    lam = np.bincount(pins_col, minlength=col_blocks.size)
    shared = lam[pins_col] > 1
    count = np.bincount((col_blocks[pins_col] * K + pins_part)[shared], minlength=K * K)
    m = int(shared.sum())
    out = [np.empty(m, np.int64) for _ in range(3)]
    n = _walk(K, nw, woff, bits, count, col_ptr, order.astype(np.int64), _CTZ, *out)
    assert n == m, (n, m)
    return out[0], out[1], out[2]


def successors_by_connectivity(pins_col, pins_part, nparts: int):
    """The same (x, y, j) triples: with Lambda(j) sorted a_0 < ... < a_{l-1}, a_{i-1} follows
    a_i and a_{l-1} follows a_0."""
    pins_col = np.asarray(pins_col, np.int64)
    pins_part = np.asarray(pins_part, np.int64)
    order = np.lexsort((pins_part, pins_col))
    c, p = pins_col[order], pins_part[order]
    if c.size == 0:
        return c, p, c
    first = np.concatenate([[True], c[1:] != c[:-1]])
    start = np.flatnonzero(first)
    lam = np.diff(np.concatenate([start, [c.size]]))
    begin = np.repeat(start, lam)
    last = begin + np.repeat(lam, lam) - 1
    prev = np.where(first, last, np.arange(c.size) - 1)
    keep = np.repeat(lam, lam) > 1
    return p[keep], p[prev][keep], c[keep]
