"""Everything a BatchedSumma3D run is made of, built once on the client (no dask).

Shared by ``plan``, the serial reference and ``multiply``: the checked inputs, the
grid, the permutations, the cell blocks, the memory budget per cell.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from daskhpc._workflows import check_bounds, option
from daskhpc.errors import InputError

from ._block import CscBlock
from ._consumers import Consumer, parse_consumer
from ._kernels import SEMIRINGS
from ._grid import Grid, Layout
from ._local import semiring_code
from ._memory import parse_bytes
from ._data import as_csr, check_inputs, localize, permutations
from ._symbolic import (BYTES_PER_UNMERGED, cell_block, cell_input_nnz, grid_symbolic,
                        inverse, planned_batches)


@dataclass
class Options:
    """The command's options (``multiply``'s keywords, and the inputs' second factor)."""

    b: str | None = option(None, "second factor B (default: A)", metavar="B")
    aat: bool = option(False, "multiply A by its transpose")
    grid: str | None = option(None, "QxQxL process grid (default: --parts cells, else "
                                    "one or two cells a worker: 8 workers 4x4x1, 12 "
                                    "2x2x3), or auto: the grid of --parts cells the cost "
                                    "model predicts fastest on --network")
    layers: int | None = option(None, "layers l when the grid comes from the worker count "
                                      "(default: chosen)", type=int)
    memory_per_worker: str | None = option(None, "budget per worker, e.g. 512MB")
    batches: str = option("auto", "auto (Symbolic3D) or a number of batches")
    permute: bool = option(True, "keep the given row/column order (default: a seeded "
                                 "random permutation, for load balance)",
                           flag="--no-permute")
    seed: int = option(0, "seed of the permutation")
    alpha: float | None = option(None, "latency per message (s)", type=float,
                                 modes=("plan",))
    beta: float | None = option(None, "seconds per byte", type=float, modes=("plan",))
    consume: str = option("keep", "keep | count | write:DIR | prune:K | threshold:X",
                          modes=("run",))
    window: int = option(1, "batches in flight", modes=("run",), bounds=(1, None))
    local: str = option("fused", "fused: one accumulator over all stages; staged: the "
                                 "paper's Local-Multiply per stage + Merge-Layer",
                        choices=("fused", "staged"), modes=("run",))
    semiring: str = option("plus_times", "(add, multiply) of C(i,j) = add_k A(i,k)*B(k,j) "
                                         "over the stored entries (GraphBLAS semantics)",
                           choices=("plus_times", "min_plus", "max_plus", "max_times",
                                    "or_and", "plus_pair"))
    mask: str | None = option(None, "C<M>: keep only the entries of C stored in the matrix "
                                    "FILE (read like A; C's shape)", metavar="FILE")
    mask_complement: bool = option(False, "C<!M>: keep only the entries NOT in --mask")

    def check(self) -> None:
        parse_batches(self.batches)
        if self.memory_per_worker is not None:
            parse_bytes(self.memory_per_worker)
        if self.grid and self.grid != "auto":
            Grid.parse(self.grid)
        if self.b and self.aat:
            raise InputError("--b and --aat exclude each other")
        if self.mask_complement and not self.mask:
            raise InputError("--mask-complement needs --mask FILE")


#: Where a kept C ends (``multiply(keep=...)``).
KEEPS = ("client", "workers")


@dataclass(eq=False)
class Setup:
    """The prepared product C = A B: checked inputs, grid, permutations, budget.

    A and B are permuted (``pr``, ``pk``, ``pc``) only where a cell's block is cut
    (:meth:`block`); ``b`` is ``a`` for A·A; ``memory`` is bytes per worker.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> a = sp.random(60, 60, density=0.1, random_state=0, format="csr")
    >>> s = prepare(a, grid="2x2x1", nworkers=4, batches=2)
    >>> sorted(s.blocks("A"))[:2], s.layout(2).b
    ([(0, 0, 0), (0, 1, 0)], 2)
    """

    a: sp.csr_array
    b: sp.csr_array
    grid: Grid
    nworkers: int
    memory: int | None
    batches: object            # "auto" or an int
    consumer: Consumer
    window: int
    seed: int | None
    r: float
    local: str
    mask: sp.csr_array | None
    pr: np.ndarray
    pk: np.ndarray
    pc: np.ndarray
    #: nonzeros of every cell's A block and B block, (q, q, l) each
    cell_nnz: tuple = ()
    #: ``{"A": Nonzeros, "B": Nonzeros}`` of Dask collection inputs (a, b: patterns)
    sources: dict | None = None
    keep: str = "client"
    semiring: int = 0           # a code: SEMIRINGS[semiring] is its name
    complement: bool = False

    @property
    def semiring_name(self) -> str:
        return SEMIRINGS[self.semiring]

    def mask_blocks(self) -> dict:
        """The mask's piece of every cell: its rows x its whole column block (permuted like C)."""
        mp = sp.csc_array(sp.csr_array(self.mask)[self.pr][:, self.pc])
        lay = self.layout(1)
        return {(i, j, k): CscBlock.from_scipy(sp.csc_array(
                    mp[slice(*lay.rows(i))][:, slice(*lay.cols(j))]))
                for (i, j, k) in self.grid.cells()}

    def mask_report(self) -> dict | None:
        """What the report records of the mask."""
        if self.mask is None:
            return None
        return {"shape": [int(x) for x in self.mask.shape], "nnz": int(self.mask.nnz),
                "complement": self.complement}

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.a.shape[0], self.a.shape[1], self.b.shape[1])

    @property
    def cells_per_worker(self) -> int:
        return -(-self.grid.p // self.nworkers)

    @property
    def mem_cell(self) -> float | None:
        return None if self.memory is None else self.memory / self.cells_per_worker

    @property
    def nnz_a(self) -> int:
        return int(self.cell_nnz[0].max())

    @property
    def nnz_b(self) -> int:
        return int(self.cell_nnz[1].max())

    @functools.cached_property
    def _col_new(self) -> tuple[np.ndarray, np.ndarray]:
        """The new place of every inner index and of every column of B."""
        return inverse(self.pk), inverse(self.pc)

    def block(self, name: str, cell) -> CscBlock:
        """Cell ``(i, j, k)``'s block of ``"A"`` or ``"B"`` of the permuted operands (no copy)."""
        i, j, k = cell
        lay, (ink, colc) = self.layout(1), self._col_new
        if name == "A":
            return cell_block(self.a, self.pr[slice(*lay.rows(i))], ink, *lay.inner(j, k))
        return cell_block(self.b, self.pk[slice(*lay.inner(i, k))], colc, *lay.cols(j))

    def blocks(self, name: str) -> dict:
        """``{cell: CscBlock}`` of operand ``"A"`` or ``"B"``."""
        return {cell: self.block(name, cell) for cell in self.grid.cells()}

    @property
    def perms(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.pr, self.pk, self.pc

    def symbolic(self, nbatches: int = 1):
        """:func:`grid_symbolic` of the permuted product, read through the permutations."""
        return grid_symbolic(self.a, self.b, self.grid, nbatches, self.mask, self.complement,
                             perms=self.perms)

    def layout(self, nbatches: int) -> Layout:
        return Layout(self.grid, self.shape, nbatches)

    def ids(self, lay: Layout) -> dict:
        """Original row ids per row block, original id of every column, C's shape."""
        return {"rows": [self.pr[slice(*lay.rows(i))] for i in range(self.grid.q)],
                "cols": self.pc, "shape": (self.shape[0], self.shape[2])}

    def row_ids(self) -> dict:
        """Original row ids of every cell's rows (the consumers' ``info["rows"]``)."""
        rows = self.ids(self.layout(1))["rows"]      # row blocks do not depend on b
        return {cell: rows[cell[0]] for cell in self.grid.cells()}

    def mask_operands(self, lay: Layout) -> dict:
        """The mask's piece of every cell (permuted like C), for masked consumers."""
        mp = sp.csc_array(self.mask[self.pr][:, self.pc])
        return {(i, j, k): self.consumer.operand(mp, np.arange(*lay.rows(i)), np.concatenate(
                    [lay.batch_columns(t, j, k) for t in range(lay.b)]))
                for (i, j, k) in self.grid.cells()}


def prepare(a, b=None, *, grid=None, nworkers: int = 1, memory_per_worker=None,
            batches="auto", consume="keep", window: int = 1, seed: int | None = 0,
            r: float = BYTES_PER_UNMERGED, local: str = "fused", mask=None,
            keep: str = "client", semiring="plus_times", complement: bool = False) -> Setup:
    """Check the inputs and options and cut the blocks of a run on ``nworkers`` workers.

    Parameters are those of :func:`daskhpc.spgemm.multiply`; ``grid=None``: the worker
    count's default grid (:meth:`Grid.for_workers`)."""
    a, b = check_inputs(a, b)
    sr = check_semiring(semiring)
    mask = check_mask(mask, (a.shape[0], b.shape[1]))
    if complement and mask is None:
        raise InputError("the mask's complement needs a mask (--mask FILE)")
    consumer = consume if isinstance(consume, Consumer) else parse_consumer(consume)
    if local not in ("staged", "fused"):
        raise InputError(f"local must be 'staged' or 'fused', not {local!r}")
    check_bounds("--window", window, 1)
    if keep not in KEEPS:
        raise InputError(f"keep must be one of {', '.join(map(repr, KEEPS))}, not {keep!r}")
    if keep == "workers" and not consumer.keeps:
        raise InputError(f"keep='workers' needs a consumer that keeps C (keep, prune:K, "
                         f"threshold:X), not {consumer!r}")
    g = Grid.for_workers(nworkers) if grid is None else \
        grid if isinstance(grid, Grid) else Grid.parse(grid)
    batches = parse_batches(batches)
    mem = None if memory_per_worker is None else parse_bytes(memory_per_worker)
    shape = (a.shape[0], a.shape[1], b.shape[1])
    lay1 = Layout(g, shape, 1)
    pr, pk, pc = permutations(shape, seed)
    if seed is not None:
        # keep the input's order inside every block (locality), the random sets of the
        # blocks for balance; columns down to the sub-blocks when b is known
        pr = localize(pr, lay1.row_bounds)
        pk = localize(pk, lay1.inner_bounds)
        known_b = batches if batches != "auto" else (1 if mem is None else None)
        if known_b is not None:
            pc = localize(pc, np.unique(np.concatenate(Layout(g, shape, known_b).sub_bounds)))
    s = Setup(a, b, g, int(nworkers), mem, batches, consumer, int(window), seed, float(r),
              local, mask, pr, pk, pc, keep=keep, semiring=sr, complement=bool(complement))
    s.cell_nnz = cell_input_nnz(a, b, lay1, s.perms)
    if s.mem_cell is not None:           # fail before any work if inputs alone do not fit
        planned_batches(0, s.nnz_a, s.nnz_b, s.mem_cell, r, str(g))
    return s


def check_semiring(semiring) -> int:
    """The code of a semiring name, or a one-line InputError listing the names."""
    try:
        return semiring_code(semiring)
    except ValueError as e:
        raise InputError(str(e)) from None


def check_mask(mask, shape) -> sp.csr_array | None:
    """The mask as canonical CSR (a path is read like A); InputError unless C's shape."""
    if mask is None:
        return None
    name = f"{os.fspath(mask)}: " if isinstance(mask, (str, os.PathLike)) else ""
    m = as_csr(mask, f"{name}the mask")
    if m.shape != tuple(shape):
        raise InputError(f"{name}the mask is {m.shape[0]} x {m.shape[1]}, but C = A·B is "
                         f"{shape[0]} x {shape[1]}")
    m.sum_duplicates()
    return m


def matrix_digest(m) -> dict:
    """Shape, nnz and a SHA-256 of a canonical CSR matrix (what identifies an input)."""
    import hashlib

    h = hashlib.sha256()
    for arr in (m.indptr.astype(np.int64), m.indices.astype(np.int64),
                np.asarray(m.data, dtype=np.float64)):
        h.update(memoryview(np.ascontiguousarray(arr)).cast("B"))
    return {"shape": [int(x) for x in m.shape], "nnz": int(m.nnz), "sha256": h.hexdigest()}


def fingerprint(s: Setup) -> dict:
    """What changes the numbers of a run (not the workers, window or placement)."""
    digest = {n: matrix_digest(m) for n, m in (("A", s.a), ("B", s.b))}
    for n, nz in (s.sources or {}).items():      # a collection: its pattern and dask token
        digest[n] = {**digest[n], "sha256": None, "dask_token": nz.token}
    fp = {"a": digest["A"], "b": digest["B"], "grid": str(s.grid),
          "batches": s.batches, "seed": s.seed, "consume": repr(s.consumer), "local": s.local}
    if s.batches == "auto":
        fp.update(memory_per_worker=s.memory, r=s.r)
    if s.mask is not None:
        fp["mask"] = matrix_digest(s.mask)
    if s.semiring or s.complement:          # so that older checkpoints still match
        fp.update(semiring=s.semiring_name, complement=s.complement)
    return fp


def parse_batches(text):
    """``--batches``: ``auto`` or a positive integer."""
    if text in (None, "auto"):
        return "auto"
    try:
        n = int(text)
    except (TypeError, ValueError):
        n = 0
    if n < 1:
        raise InputError(f"--batches must be auto or a positive integer, not {text!r}")
    return n
