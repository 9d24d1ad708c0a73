"""Symbolic3D without a cluster: per-cell nonzeros for any grid, and the batch count b.

:func:`grid_symbolic` runs LocalSymbolic for every cell and stage in one numba pass by
rows of A (permutations as index maps). :func:`batch_count` is Algorithm 3 line 12,
``b = ceil(r maxnnzC / (M/p - r (maxnnzA + maxnnzB)))``; :func:`batch_lower_bound` is
equation (2). No dask here.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numba import njit

from daskhpc._narrow import index_dtype
from daskhpc.errors import InputError
from daskhpc.spgemm._grid import Grid, Layout

#: r of Algorithm 3: bytes per stored nonzero, 12 (int32 row, float64 value) twice, as
#: a step that makes a new block keeps its input alive while it writes.
BYTES_PER_UNMERGED = 24

#: The share of a cell's budget kept back for working memory the model does not count
#: (docs/spgemm.md, "Working headroom").
WORKING_HEADROOM = 0.2


@dataclass
class GridSymbolic:
    """What LocalSymbolic found on every cell, arrays indexed ``[t, i, j, k, ...]``.

    ``unmerged`` (Algorithm 3 line 8, per batch), ``layer`` (Merge-Layer output to layer
    k2), ``final`` (C blocks), ``flops_cell``; ``nnz_a``, ``nnz_b`` (q, q, l) and
    ``nnz_b_batch`` (Algorithm 4 line 4)."""

    grid: Grid
    layout: Layout
    unmerged: np.ndarray
    layer: np.ndarray
    final: np.ndarray
    flops_cell: np.ndarray
    nnz_a: np.ndarray
    nnz_b: np.ndarray
    nnz_b_batch: np.ndarray

    @property
    def nbatches(self) -> int:
        return self.layout.b

    @property
    def flops(self) -> int:
        return int(self.flops_cell.sum())

    @property
    def nnz_c(self) -> int:
        return int(self.final.sum())

    @property
    def max_unmerged(self) -> int:
        """maxnnzC of Algorithm 3 line 9 (over all batches together)."""
        return int(self.unmerged.sum(axis=0).max())

    @property
    def sum_layer_nnz(self) -> int:
        """``sum_k nnz(D^(k))``: the tighter fiber bound of section IV-C."""
        return int(self.layer.sum())


@njit(cache=True, nogil=True)
def _grid_pass(a_ptr, a_idx, b_ptr, b_idx, row_block, slice_of, col_block, col_batch,
               col_layer, q, l, nb, n, m_ptr, m_idx, mmode, r0, r1):
    """The counts of A's rows ``r0 .. r1 - 1`` (row ranges are independent and add up)."""
    ql = q * l
    size = nb * q * ql
    unmerged = np.zeros(size, np.int64)      # flat [t, i, j, k]
    layer = np.zeros(size * l, np.int64)     # flat [t, i, j, k, k2]
    final = np.zeros(size, np.int64)         # flat [t, i, j, k2]
    flops = np.zeros(size, np.int64)
    # a column's place in the flat arrays less the row's part (i * q * l + k)
    at = np.empty(n, np.int64)
    for c in range(n):
        at[c] = (col_batch[c] * q * q + col_block[c]) * l
    # per column: stamp of (row, inner slice), then row (one cache line for both)
    mark = np.full(2 * n, -1, np.int64)
    mark_d = np.full(n * l if l > 1 else 0, -1, np.int64)  # row, a column per layer
    allow = np.full(n if mmode else 0, -1, np.int64)   # columns of the mask's row r
    inside = mmode == 1
    # A's row grouped by inner slice (a counting sort): one stamp per (row, slice)
    width = 0
    for r in range(r0, r1):
        width = max(width, a_ptr[r + 1] - a_ptr[r])
    order = np.empty(width, np.int64)
    starts = np.zeros(ql + 1, np.int64)
    for r in range(r0, r1):
        if a_ptr[r + 1] == a_ptr[r]:
            continue
        i = row_block[r]
        if mmode != 0:
            for e in range(m_ptr[r], m_ptr[r + 1]):
                allow[m_idx[e]] = r
        starts[:] = 0
        for e in range(a_ptr[r], a_ptr[r + 1]):
            starts[slice_of[a_idx[e]] + 1] += 1
        for u in range(ql):
            starts[u + 1] += starts[u]
        for e in range(a_ptr[r], a_ptr[r + 1]):
            u = slice_of[a_idx[e]]
            order[starts[u]] = e
            starts[u] += 1
        for e_ in range(a_ptr[r + 1] - a_ptr[r]):
            kin = a_idx[order[e_]]
            u = slice_of[kin]
            k = u % l
            base = i * ql + k
            stamp = r * ql + u
            for eb in range(b_ptr[kin], b_ptr[kin + 1]):
                c = b_idx[eb]
                x = at[c] + base
                flops[x] += 1
                if mmode != 0 and (allow[c] == r) != inside:
                    continue                        # C<M>: the entry is never formed
                if mark[2 * c] != stamp:
                    mark[2 * c] = stamp
                    unmerged[x] += 1
                    # (one layer: a column's layer mark is its row mark, layer = final)
                    if l > 1 and mark_d[k * n + c] != r:
                        mark_d[k * n + c] = r
                        layer[x * l + col_layer[c]] += 1
                    if mark[2 * c + 1] != r:
                        mark[2 * c + 1] = r
                        final[x - k + col_layer[c]] += 1
    shape = (nb, q, q, l)
    unmerged, final, flops = unmerged.reshape(shape), final.reshape(shape), flops.reshape(shape)
    layer = layer.reshape((nb, q, q, l, l))
    if l == 1:
        layer[:, :, :, 0, 0] = final[:, :, :, 0]
    return unmerged, layer, final, flops


#: Flops below which the pass runs in the calling thread alone.
PARALLEL_FLOPS = 2_000_000


@njit(cache=True, nogil=True)
def _flops_before(a_ptr, a_idx, b_ptr):
    """Flops of A's rows before row r (m + 1 entries), no temporary of nnz(A) entries."""
    m = a_ptr.size - 1
    out = np.zeros(m + 1, np.int64)
    for r in range(m):
        f = 0
        for e in range(a_ptr[r], a_ptr[r + 1]):
            f += b_ptr[a_idx[e] + 1] - b_ptr[a_idx[e]]
        out[r + 1] = out[r] + f
    return out


def _passes(csr: list, rest: tuple):
    """:func:`_grid_pass` over row ranges of about equal flops in threads, summed."""
    from concurrent.futures import ThreadPoolExecutor

    a_ptr, a_idx, b_ptr, _ = csr
    m = a_ptr.size - 1
    cum = _flops_before(a_ptr, a_idx, b_ptr)      # flops before row r
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
        (os.cpu_count() or 1)
    parts = max(1, min(cores, 8, int(cum[-1] // PARALLEL_FLOPS)))
    cuts = np.searchsorted(cum, np.linspace(0, cum[-1], parts + 1)[1:-1]).tolist()
    bounds = list(zip([0, *cuts], [*cuts, m]))
    if parts == 1:
        return _grid_pass(*csr, *rest, 0, m)
    with ThreadPoolExecutor(parts) as ex:
        outs = list(ex.map(lambda r: _grid_pass(*csr, *rest, *r), bounds))
    return tuple(sum(o[i] for o in outs) for i in range(4))


@njit(cache=True, nogil=True)
def _label_counts(ptr, idx, major, minor, n_major, n_minor):
    """Nonzeros of a compressed matrix per (label of its major, label of its minor index)."""
    out = np.zeros((n_major, n_minor), np.int64)
    for c in range(ptr.size - 1):
        lc = major[c]
        for e in range(ptr[c], ptr[c + 1]):
            out[lc, minor[idx[e]]] += 1
    return out


@njit(cache=True, nogil=True)
def _cell_csc(ptr, idx, val, rows, col_new, lo, hi):
    """CSC of ``M[rows]``'s columns whose new places are ``lo .. hi - 1``, no permuted copy."""
    w = hi - lo
    out_ptr = np.zeros(w + 1, np.int64)
    for r in rows:
        for e in range(ptr[r], ptr[r + 1]):
            c = col_new[idx[e]] - lo
            if 0 <= c < w:
                out_ptr[c + 1] += 1
    for c in range(w):
        out_ptr[c + 1] += out_ptr[c]
    pos = out_ptr[:-1].copy()
    out_idx = np.empty(out_ptr[w], np.int32)
    out_val = np.empty(out_ptr[w], np.float64)
    for r2 in range(rows.size):
        r = rows[r2]
        for e in range(ptr[r], ptr[r + 1]):
            c = col_new[idx[e]] - lo
            if 0 <= c < w:
                out_idx[pos[c]] = r2
                out_val[pos[c]] = val[e]
                pos[c] += 1
    return out_ptr, out_idx, out_val


def cell_block(m, rows: np.ndarray, col_new: np.ndarray, lo: int, hi: int):
    """The :class:`CscBlock` a cut of the permuted canonical CSR ``m`` gives (no copy)."""
    from ._block import CscBlock

    ptr, idx, val = _cell_csc(m.indptr, m.indices, m.data, np.asarray(rows, np.int64),
                              col_new, int(lo), int(hi))
    return CscBlock(ptr, idx, val, (int(rows.size), int(hi - lo)), True)


def grid_symbolic(a, b, grid: Grid, nbatches: int = 1, mask=None,
                  complement: bool = False, perms=None) -> GridSymbolic:
    """Symbolic3D (Algorithm 3, lines 2-8) for every cell, computed in one process.

    Parameters
    ----------
    a, b : scipy sparse
        A (m x kk) and B (kk x n), as given (CSR is read without a copy).
    grid : Grid
    nbatches : int
        b; the per-batch counts use the block-cyclic split of Fig. 1(i).
    mask : scipy sparse, optional
        C<M>: only the entries in its pattern (not in it, with ``complement``) are
        counted; flops count every product.
    perms : (pr, pk, pc), optional
        The run's row, inner and column permutations, read through index maps.

    Returns
    -------
    GridSymbolic

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> a = sp.random(60, 60, density=0.1, random_state=1, format="csr")
    >>> s = grid_symbolic(a, a, Grid(2, 1))
    >>> batch_count(s, memory_total=4 * 200_000, r=24)
    1
    """
    lay = Layout(grid, (a.shape[0], a.shape[1], b.shape[1]), nbatches)
    ar, br = _csr(a), _csr(b)
    new = [None] * 3 if perms is None else [inverse(p) for p in perms]
    col_block, col_batch, col_layer = (_mapped(x, new[2]) for x in lay.column_maps())
    in_s, in_k = lay.inner_slice_of()
    slice_of = _mapped(in_s * grid.l + in_k, new[1])
    row_block = _mapped(lay.row_block_of(), new[0])
    # one index type for all (int32 where it fits: no int64 copy of the indices)
    it = index_dtype(max(ar.nnz, br.nnz, *ar.shape, *br.shape,
                         *(() if mask is None else (mask.nnz, *mask.shape))))
    csr = [np.asarray(x, it) for x in (ar.indptr, ar.indices, br.indptr, br.indices)]
    if mask is None:
        mm = (np.zeros(1, it), np.zeros(0, it), 0)
    else:
        mr = _csr(mask)
        mm = (np.asarray(mr.indptr, it), np.asarray(mr.indices, it), 2 if complement else 1)
    unmerged, layer, final, flops = _passes(
        csr, (row_block, slice_of, col_block, col_batch, col_layer, grid.q, grid.l, lay.b,
              max(b.shape[1], 1), *mm))
    del csr
    q, l, nb = grid.q, grid.l, lay.b
    # A: per row block, per inner slice; B: per inner slice, per (batch, column block)
    na = _label_counts(ar.indptr, ar.indices, row_block, slice_of, q, q * l)
    nbb = _label_counts(br.indptr, br.indices, slice_of, col_batch * q + col_block, q * l,
                        nb * q)
    nnz_a = np.ascontiguousarray(na.reshape(q, q, l))                           # [i, s, k]
    nnz_b_batch = np.ascontiguousarray(nbb.reshape(q, l, nb, q).transpose(2, 0, 3, 1))
    return GridSymbolic(grid, lay, unmerged, layer, final, flops, nnz_a,
                        nnz_b_batch.sum(axis=0), nnz_b_batch)               # [t, s, j, k]


def cell_input_nnz(a, b, lay: Layout, perms=None) -> tuple[np.ndarray, np.ndarray]:
    """Nonzeros of the A and B block of every cell, shape (q, q, l) each."""
    q, l = lay.grid.q, lay.grid.l
    ar, br = _csr(a), _csr(b)
    new = [None] * 3 if perms is None else [inverse(p) for p in perms]
    in_s, in_k = lay.inner_slice_of()
    slice_of = _mapped(in_s * l + in_k, new[1])
    col_block = _mapped(np.repeat(np.arange(q), np.diff(lay.col_bounds)), new[2])
    na = _label_counts(ar.indptr, ar.indices, _mapped(lay.row_block_of(), new[0]), slice_of,
                       q, q * l)
    nb = _label_counts(br.indptr, br.indices, slice_of, col_block, q * l, q)
    return (np.ascontiguousarray(na.reshape(q, q, l)),                    # [i, s, k]
            np.ascontiguousarray(nb.reshape(q, l, q).transpose(0, 2, 1)))   # [s, j, k]


def inverse(perm) -> np.ndarray:
    """The new place of every old index of a permutation."""
    perm = np.asarray(perm)
    inv = np.empty(perm.size, np.int64)
    inv[perm] = np.arange(perm.size)
    return inv


def _mapped(by_new: np.ndarray, new) -> np.ndarray:
    """A per-new-index map read per old index (``new``: the new place of each)."""
    out = by_new if new is None else by_new[new]
    return np.ascontiguousarray(out, np.int64)


def batch_count(sym: GridSymbolic, memory_total: float, r: float = BYTES_PER_UNMERGED) -> int:
    """Algorithm 3, line 12 for total memory ``M`` bytes (``M/p`` per cell)."""
    return batches_for(sym.max_unmerged, int(sym.nnz_a.max()), int(sym.nnz_b.max()),
                       memory_total / sym.grid.p, r, str(sym.grid))


def batches_for(max_c: int, max_a: int, max_b: int, mem_per_cell: float,
                r: float = BYTES_PER_UNMERGED, grid: str = "",
                of_budget: float | None = None) -> int:
    """Algorithm 3, line 12, at least 1; InputError when the input blocks alone do not fit."""
    free = mem_per_cell - r * (max_a + max_b)
    if free <= 0:
        need = r * (max_a + max_b)
        of = "" if of_budget is None else \
            f" (the model's share of {_fmt(of_budget)}: the rest is working memory)"
        raise InputError(
            f"memory budget {_fmt(mem_per_cell)} per grid cell{of} is below what the input "
            f"blocks alone need{' on a ' + grid + ' grid' if grid else ''}: "
            f"{_fmt(need)} per cell ({r} bytes x (maxnnzA {max_a:,} + maxnnzB {max_b:,})); "
            f"give more memory per worker, more workers or a finer grid")
    return max(1, math.ceil(r * max_c / free))


def planning_memory(mem_per_cell: float, headroom: float = WORKING_HEADROOM) -> float:
    """The part of a cell's budget given to Algorithm 3 (less :data:`WORKING_HEADROOM`)."""
    return float(mem_per_cell) * (1.0 - float(headroom))


def planned_batches(max_c: int, max_a: int, max_b: int, mem_per_cell: float,
                    r: float = BYTES_PER_UNMERGED, grid: str = "",
                    headroom: float = WORKING_HEADROOM) -> int:
    """The b a run uses: :func:`batches_for` on :func:`planning_memory` of the budget.

    email-Enron A·A on 1x1x2 with 40 MB a worker: Algorithm 3 alone gives 16 batches
    (peak 1.13x the budget); the planner gives 21."""
    return batches_for(max_c, max_a, max_b, planning_memory(mem_per_cell, headroom), r, grid,
                       of_budget=mem_per_cell if headroom else None)


def batch_lower_bound(sym: GridSymbolic, memory_total: float,
                      r: float = BYTES_PER_UNMERGED) -> int:
    """Equation (2): ``ceil(mem(C) / (M - r (nnz(A) + nnz(B))))`` with the grid's D."""
    free = memory_total - r * (int(sym.nnz_a.sum()) + int(sym.nnz_b.sum()))
    if free <= 0:
        return 0
    return max(1, math.ceil(r * sym.sum_layer_nnz / free))


def _csr(m) -> sp.csr_array:
    c = sp.csr_array(m)
    c.sum_duplicates()   # canonical: no repeated entry (it would count its flops twice)
    return c


def _fmt(nbytes: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= size:
            return f"{nbytes / size:.1f} {unit}"
    return f"{nbytes:.0f} B"
