"""Symbolic3D without a cluster: per-cell nonzeros for any grid, and the batch count b.

:func:`grid_symbolic` runs LocalSymbolic for every cell and SUMMA stage of a
``q x q x l`` grid in one pass over the flops (numba), so ``daskhpc plan spgemm``
reproduces Algorithm 3 for thousands of cells on a laptop. It also counts, for the
report, the nonzeros of every Merge-Layer piece that crosses the fiber and of every
final C block.

:func:`batch_count` is Algorithm 3, line 12::

    b = ceil( r * maxnnzC / (M/p - r * (maxnnzA + maxnnzB)) )

and :func:`batch_lower_bound` is equation (2)::

    b >= ceil( mem(C) / (M - r * (nnz(A) + nnz(B))) ),   mem(C) = r * sum_k nnz(D^(k))

No dask here.

Examples
--------
>>> import scipy.sparse as sp
>>> a = sp.random(60, 60, density=0.1, random_state=1, format="csr")
>>> s = grid_symbolic(a, a, Grid(2, 1))
>>> int(s.unmerged.sum()) >= int(s.nnz_c)
True
>>> batch_count(s, memory_total=4 * 200_000, r=24)
1
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numba import njit

from daskhpc.errors import InputError
from daskhpc.spgemm._grid import Grid, Layout

__all__ = ["GridSymbolic", "grid_symbolic", "batch_count", "batches_for", "batch_lower_bound",
           "cell_input_nnz", "planned_batches", "planning_memory", "BYTES_PER_UNMERGED",
           "WORKING_HEADROOM"]

#: r of Algorithm 3: bytes per stored nonzero in the memory model. 12 bytes hold
#: a nonzero (int32 row, float64 value); every step that makes a new block (a
#: merge's output, a received broadcast copy, a fiber piece) keeps its input
#: alive while it writes, so a nonzero can need a second 12 bytes at the peak.
BYTES_PER_UNMERGED = 24

#: The share of a cell's budget that the planner keeps back for working memory the model
#: does not count: the previous batch's blocks until the scheduler lets the worker free
#: them, received message buffers, huge-page rounding of large arrays, the tasks a worker
#: keeps (measured: docs/spgemm.md, "Working headroom"). :func:`planned_batches` applies it.
WORKING_HEADROOM = 0.2


@dataclass
class GridSymbolic:
    """What LocalSymbolic found on every cell (arrays indexed [t, i, j, k, ...]).

    Attributes
    ----------
    unmerged : int64 (b, q, q, l)
        Nonzeros a cell stores after its SUMMA stages, summed over stages (the
        ``nnz[i,j,k]`` of Algorithm 3 line 8, per batch).
    layer : int64 (b, q, q, l, l)
        Nonzeros of the cell's Merge-Layer output D~ going to layer k2.
    final : int64 (b, q, q, l)
        Nonzeros of the final C block of cell (i, j, k) in batch t.
    flops : int64 (b, q, q, l)
    nnz_a, nnz_b : int64 (q, q, l)
        Nonzeros of the A and B block each cell owns.
    nnz_b_batch : int64 (b, q, q, l)
        Nonzeros of each cell's B piece in batch t (Algorithm 4 line 4).
    """

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
    def max_batch_unmerged(self) -> int:
        """Largest per-cell unmerged count of any single batch."""
        return int(self.unmerged.max())

    @property
    def sum_layer_nnz(self) -> int:
        """``sum_k nnz(D^(k))``: the tighter fiber bound of section IV-C."""
        return int(self.layer.sum())


@njit(cache=True, nogil=True)
def _grid_pass(a_ptr, a_idx, b_ptr, b_idx, row_block, in_s, in_k, col_block, col_batch,
               col_layer, q, l, nb, m, m_ptr, m_idx, mmode, c0, c1):
    """The counts of B's columns ``c0 .. c1 - 1`` (every mark is per column: column
    ranges are independent, and their counts add up)."""
    unmerged = np.zeros((nb, q, q, l), np.int64)
    layer = np.zeros((nb, q, q, l, l), np.int64)
    final = np.zeros((nb, q, q, l), np.int64)
    flops = np.zeros((nb, q, q, l), np.int64)
    mark_s = np.full(m, -1, np.int64)       # stamp of (column, stage, layer)
    mark_d = np.full(m * l if l > 1 else 0, -1, np.int64)  # column, a row per layer
    mark_c = np.full(m, -1, np.int64)       # stamp of column
    allow = np.full(m if mmode else 0, -1, np.int64)   # rows of the mask's column c
    inside = mmode == 1
    # one B entry's counts by row block, added to the grid's arrays after its A column
    # (t, j, k and k2 are the same for the whole column: the inner loop indexes 1-D)
    fl = np.zeros(q, np.int64)
    um = np.zeros(q, np.int64)
    ly = np.zeros(q, np.int64)
    fi = np.zeros(q, np.int64)
    for c in range(c0, c1):
        if mmode != 0:
            for e in range(m_ptr[c], m_ptr[c + 1]):
                allow[m_idx[e]] = c
        j = col_block[c]
        t = col_batch[c]
        k2 = col_layer[c]
        for e in range(b_ptr[c], b_ptr[c + 1]):
            r_in = b_idx[e]
            s = in_s[r_in]
            k = in_k[r_in]
            # B's column is sorted, slices (s, k) are contiguous: one stamp each
            stamp = (c * q + s) * l + k
            for t_a in range(a_ptr[r_in], a_ptr[r_in + 1]):
                row = a_idx[t_a]
                i = row_block[row]
                fl[i] += 1
                if mmode != 0 and (allow[row] == c) != inside:
                    continue                        # C<M>: the entry is never formed
                if mark_s[row] != stamp:
                    mark_s[row] = stamp
                    um[i] += 1
                # (one layer: a row's layer mark is its column mark, layer = final)
                if l > 1 and mark_d[k * m + row] != c:
                    mark_d[k * m + row] = c
                    ly[i] += 1
                if mark_c[row] != c:
                    mark_c[row] = c
                    fi[i] += 1
            for i in range(q):
                flops[t, i, j, k] += fl[i]
                unmerged[t, i, j, k] += um[i]
                layer[t, i, j, k, k2] += ly[i]
                final[t, i, j, k2] += fi[i]
                fl[i] = 0
                um[i] = 0
                ly[i] = 0
                fi[i] = 0
    if l == 1:
        layer[:, :, :, 0, 0] = final[:, :, :, 0]
    return unmerged, layer, final, flops


#: Flops below which the pass runs in the calling thread alone.
PARALLEL_FLOPS = 2_000_000


def _passes(csc: list, rest: tuple):
    """:func:`_grid_pass` over ranges of B's columns of about equal flops, one per core
    in threads (the kernel releases the GIL), summed (docs/benchmarks.md, "SpGEMM: the
    plan's pass in threads")."""
    from concurrent.futures import ThreadPoolExecutor

    a_ptr, _, b_ptr, b_idx = csc
    n = b_ptr.size - 1
    # flops of column c: the nonzeros of A's columns that B's column c names
    per = np.diff(a_ptr)[b_idx]
    cum = np.concatenate([[0], np.cumsum(per)])[b_ptr]      # flops before column c
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
        (os.cpu_count() or 1)
    parts = max(1, min(cores, 8, int(cum[-1] // PARALLEL_FLOPS)))
    cuts = np.searchsorted(cum, np.linspace(0, cum[-1], parts + 1)[1:-1]).tolist()
    bounds = list(zip([0, *cuts], [*cuts, n]))
    if parts == 1:
        return _grid_pass(*csc, *rest, 0, n)
    with ThreadPoolExecutor(parts) as ex:
        outs = list(ex.map(lambda r: _grid_pass(*csc, *rest, *r), bounds))
    return tuple(sum(o[i] for o in outs) for i in range(4))


def grid_symbolic(a, b, grid: Grid, nbatches: int = 1, mask=None,
                  complement: bool = False) -> GridSymbolic:
    """Symbolic3D (Algorithm 3, lines 2-8) for every cell, computed in one process.

    Parameters
    ----------
    a, b : scipy sparse
        A (m x kk) and B (kk x n).
    grid : Grid
    nbatches : int
        b; the per-batch counts use the block-cyclic split of Fig. 1(i).
    mask : scipy sparse, optional
        C<M> (permuted like ``a`` and ``b``): only the entries in its pattern (not in
        it, with ``complement``) are counted; flops count every product.

    Returns
    -------
    GridSymbolic
    """
    lay = Layout(grid, (a.shape[0], a.shape[1], b.shape[1]), nbatches)
    ac, bc = _csc(a), _csc(b)
    col_block, col_batch, col_layer = lay.column_maps()
    in_s, in_k = lay.inner_slice_of()
    # int64 indices whatever scipy chose: one compiled specialisation of the pass
    i64 = [np.asarray(x, np.int64) for x in (ac.indptr, ac.indices, bc.indptr, bc.indices)]
    if mask is None:
        mm = (np.zeros(1, np.int64), np.zeros(0, np.int64), 0)
    else:
        mc = _csc(mask)
        mm = (np.asarray(mc.indptr, np.int64), np.asarray(mc.indices, np.int64),
              2 if complement else 1)
    unmerged, layer, final, flops = _passes(
        i64, (lay.row_block_of(), in_s, in_k, col_block, col_batch, col_layer, grid.q,
              grid.l, lay.b, max(a.shape[0], 1), *mm))
    nnz_a, nnz_b = cell_input_nnz(ac, bc, lay)
    bcoo = sp.coo_array(bc)
    nnz_b_batch = np.zeros((lay.b, grid.q, grid.q, grid.l), np.int64)
    np.add.at(nnz_b_batch, (col_batch[bcoo.col], in_s[bcoo.row], col_block[bcoo.col],
                            in_k[bcoo.row]), 1)
    return GridSymbolic(grid, lay, unmerged, layer, final, flops, nnz_a, nnz_b, nnz_b_batch)


def cell_input_nnz(ac, bc, lay: Layout) -> tuple[np.ndarray, np.ndarray]:
    """Nonzeros of the A and B block of every cell, shape (q, q, l) each.

    Cell (i, j, k) owns ``A[rows_i, inner_(j,k)]`` and ``B[inner_(i,k), cols_j]``.
    """
    q, l = lay.grid.q, lay.grid.l
    in_s, in_k = lay.inner_slice_of()
    ac, bc = sp.coo_array(ac), sp.coo_array(bc)
    rb = lay.row_block_of()
    nnz_a = np.zeros((q, q, l), np.int64)
    np.add.at(nnz_a, (rb[ac.row], in_s[ac.col], in_k[ac.col]), 1)
    cb = np.repeat(np.arange(q), np.diff(lay.col_bounds))
    nnz_b = np.zeros((q, q, l), np.int64)
    np.add.at(nnz_b, (in_s[bc.row], cb[bc.col], in_k[bc.row]), 1)
    return nnz_a, nnz_b


def batch_count(sym: GridSymbolic, memory_total: float, r: float = BYTES_PER_UNMERGED) -> int:
    """Algorithm 3, line 12 for total memory ``M`` bytes (``M/p`` per cell)."""
    return batches_for(sym.max_unmerged, int(sym.nnz_a.max()), int(sym.nnz_b.max()),
                       memory_total / sym.grid.p, r, str(sym.grid))


def batches_for(max_c: int, max_a: int, max_b: int, mem_per_cell: float,
                r: float = BYTES_PER_UNMERGED, grid: str = "",
                of_budget: float | None = None) -> int:
    """Algorithm 3, line 12: ``b = ceil(r maxnnzC / (M/p - r (maxnnzA + maxnnzB)))``.

    At least 1. Raises :class:`~daskhpc.errors.InputError` when the input
    blocks alone do not fit, naming the memory they need.
    """
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
    """The part of a cell's budget the planner gives Algorithm 3: the rest
    (:data:`WORKING_HEADROOM`) is for the working memory the model does not count.

    >>> planning_memory(40e6)
    32000000.0
    """
    return float(mem_per_cell) * (1.0 - float(headroom))


def planned_batches(max_c: int, max_a: int, max_b: int, mem_per_cell: float,
                    r: float = BYTES_PER_UNMERGED, grid: str = "",
                    headroom: float = WORKING_HEADROOM) -> int:
    """The b a run uses: Algorithm 3, line 12 (:func:`batches_for`) on
    :func:`planning_memory` of the cell's budget, so that the measured peak, which
    counts everything the process adds, stays within the budget.

    Examples
    --------
    email-Enron A·A on 1x1x2 with 40 MB a worker: Algorithm 3 alone gives 16 batches,
    whose measured peak is 1.13x the budget; the planner gives 21.

    >>> batches_for(19_821_452, 183_879, 183_879, 40e6)
    16
    >>> planned_batches(19_821_452, 183_879, 183_879, 40e6)
    21
    """
    return batches_for(max_c, max_a, max_b, planning_memory(mem_per_cell, headroom), r, grid,
                       of_budget=mem_per_cell if headroom else None)


def batch_lower_bound(sym: GridSymbolic, memory_total: float,
                      r: float = BYTES_PER_UNMERGED) -> int:
    """Equation (2): ``ceil(mem(C) / (M - r (nnz(A) + nnz(B))))`` with the grid's D."""
    free = memory_total - r * (int(sym.nnz_a.sum()) + int(sym.nnz_b.sum()))
    if free <= 0:
        return 0
    return max(1, math.ceil(r * sym.sum_layer_nnz / free))


def _csc(m) -> sp.csc_array:
    c = sp.csc_array(m)
    c.sum_duplicates()   # canonical: sorted rows in every column (_grid_pass needs it)
    return c


def _fmt(nbytes: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= size:
            return f"{nbytes / size:.1f} {unit}"
    return f"{nbytes:.0f} B"
