"""The 3D process grid and how A, B and C are laid out on it (section III-B, Fig. 1).

Rows of A and C are cut into ``q`` row blocks ``i``; the inner dimension into ``q``
blocks, each into ``l`` layer slices ``(s, k)``; columns of B and C into ``q`` column
blocks ``j``, each into ``b*l`` sub-blocks, ``u`` in batch ``u % b`` and layer
``u // b`` (Fig. 1(i)). Cell (i, j, k) owns ``A[rows_i, inner_(j,k)]`` and
``B[inner_(i,k), cols_j]``. No dask here.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from daskhpc.errors import InputError


def bounds(n: int, parts: int) -> np.ndarray:
    """``parts + 1`` boundaries cutting ``range(n)`` into near-equal ranges."""
    return (np.arange(parts + 1, dtype=np.int64) * n) // parts


@dataclass(frozen=True)
class Grid:
    """A ``q x q x l`` process grid (square layers, as in the paper).

    Examples
    --------
    >>> g = Grid.parse("2x2x1")
    >>> g.p, g.cells()[:2]
    (4, [(0, 0, 0), (0, 1, 0)])
    """

    q: int
    l: int  # noqa: E741 - the paper's symbol

    def __post_init__(self):
        if self.q < 1 or self.l < 1:
            raise InputError(f"grid dimensions must be >= 1, got {self.q}x{self.q}x{self.l}")

    @classmethod
    def parse(cls, text: str) -> Grid:
        """From ``"QxQxL"`` (or ``"QxQ"`` for one layer)."""
        m = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+)\s*(?:[xX]\s*(\d+))?\s*", str(text))
        if not m:
            raise InputError(f"--grid must look like QxQxL (e.g. 2x2x1), not {text!r}")
        qr, qc, l = int(m[1]), int(m[2]), int(m[3] or 1)
        if qr != qc:
            raise InputError(f"--grid {text}: layers must be square (q x q), got {qr}x{qc}")
        return cls(qr, l)

    @classmethod
    def for_workers(cls, nworkers: int, layers: int | None = None) -> Grid:
        """The default grid of ``nworkers`` workers.

        ``layers=None``: one layer where each worker takes one or two cells (``q**2`` the
        worker count or twice it), else one cell per worker in the largest square layer. A
        second cell per worker beats a fiber reduction of ``nnz(C) (l - 1) / l`` when C is
        denser than A and B (docs/benchmarks.md). Given ``layers``, ``nworkers / layers``
        must be a square.

        Examples
        --------
        >>> [str(Grid.for_workers(n)) for n in (1, 2, 3, 4, 8, 9, 12)]
        ['1x1x1', '2x2x1', '1x1x3', '2x2x1', '4x4x1', '3x3x1', '2x2x3']
        """
        if layers is None and nworkers > 0 and math.isqrt(nworkers) ** 2 != nworkers and \
                math.isqrt(2 * nworkers) ** 2 == 2 * nworkers:
            return cls(math.isqrt(2 * nworkers), 1)   # two cells a worker, one layer
        return cls.one_per_part(nworkers, layers)

    @classmethod
    def one_per_part(cls, nparts: int, layers: int | None = None) -> Grid:
        """The grid of ``nparts`` cells: the largest square layer, or ``layers`` layers.

        Examples
        --------
        >>> [str(Grid.one_per_part(n)) for n in (2, 8, 12)]
        ['1x1x2', '2x2x2', '2x2x3']
        """
        n = nparts                     # (the worker count, when for_workers asks)
        if n < 1:
            raise InputError(f"a grid needs at least one worker, got {n}")
        if layers is None:
            q = max(q for q in range(1, math.isqrt(n) + 1) if n % (q * q) == 0)
            return cls(q, n // (q * q))
        if layers < 1 or n % layers:
            raise InputError(f"{n} workers cannot be split into {layers} layers")
        q = math.isqrt(n // layers)
        if q * q * layers != n:
            raise InputError(
                f"{n} workers do not form a square q x q x {layers} grid; "
                f"use {q * q * layers} or {(q + 1) ** 2 * layers} workers, leave out "
                f"--layers, or give --grid")
        return cls(q, layers)

    @property
    def p(self) -> int:
        return self.q * self.q * self.l

    def cells(self) -> list[tuple[int, int, int]]:
        """All (i, j, k), layer-major then row-major."""
        return [(i, j, k) for k in range(self.l) for i in range(self.q) for j in range(self.q)]

    def rank(self, i: int, j: int, k: int) -> int:
        """Cell number, the part index given to :class:`~daskhpc.runtime.Placement`."""
        return (k * self.q + i) * self.q + j

    def __str__(self) -> str:
        return f"{self.q}x{self.q}x{self.l}"


class Layout:
    """Block boundaries of A, B and C on a grid, for ``nbatches`` batches.

    Parameters
    ----------
    grid : Grid
    shape : (m, kk, n)
        ``A`` is m x kk, ``B`` is kk x n.
    nbatches : int
        b, the number of batches.

    Examples
    --------
    >>> lay = Layout(Grid(2, 1), (10, 10, 10), nbatches=2)
    >>> lay.batch_columns(1, j=0).tolist()
    [2, 3, 4]
    """

    def __init__(self, grid: Grid, shape, nbatches: int = 1):
        self.grid = grid
        self.m, self.kk, self.n = (int(x) for x in shape)
        self.b = int(nbatches)
        q, l = grid.q, grid.l
        self.row_bounds = bounds(self.m, q)
        # inner index -> 2D block s, then layer slice k inside it (Fig. 1(c))
        outer = bounds(self.kk, q)
        self.inner_bounds = np.concatenate(
            [outer[s] + bounds(int(outer[s + 1] - outer[s]), l)[:-1] for s in range(q)]
            + [[self.kk]]).astype(np.int64)          # slice (s, k) is entry s*l + k
        self.col_bounds = bounds(self.n, q)
        # sub-block boundaries inside every column block: b*l sub-blocks each
        self.sub_bounds = [self.col_bounds[j] + bounds(int(self.col_bounds[j + 1]
                           - self.col_bounds[j]), self.b * l) for j in range(q)]

    def rows(self, i: int) -> tuple[int, int]:
        return int(self.row_bounds[i]), int(self.row_bounds[i + 1])

    def inner(self, s: int, k: int) -> tuple[int, int]:
        u = s * self.grid.l + k
        return int(self.inner_bounds[u]), int(self.inner_bounds[u + 1])

    def cols(self, j: int) -> tuple[int, int]:
        return int(self.col_bounds[j]), int(self.col_bounds[j + 1])

    # -- batches (Fig. 1(i)) -------------------------------------------------
    def subblock(self, j: int, u: int) -> tuple[int, int]:
        """Global column range of sub-block ``u`` of column block ``j``."""
        sb = self.sub_bounds[j]
        return int(sb[u]), int(sb[u + 1])

    def batch_columns(self, t: int, j: int, k: int | None = None) -> np.ndarray:
        """Global columns of batch ``t`` in column block ``j``.

        With ``k``: only the sub-block that lands on layer ``k`` after the fiber all-to-all;
        without: all ``l`` sub-blocks, in layer order (B's batch piece)."""
        layers = range(self.grid.l) if k is None else [k]
        parts = [np.arange(*self.subblock(j, kk * self.b + t), dtype=np.int64) for kk in layers]
        return np.concatenate(parts)

    def part_offsets(self, t: int, j: int) -> np.ndarray:
        """Where each layer's sub-block starts inside B's batch piece (l + 1 entries)."""
        widths = [np.subtract(*self.subblock(j, kk * self.b + t)[::-1])
                  for kk in range(self.grid.l)]
        return np.concatenate([[0], np.cumsum(widths)]).astype(np.int64)

    def column_maps(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per global column of B: column block j, batch t, destination layer."""
        q, l, b = self.grid.q, self.grid.l, self.b
        block = np.zeros(self.n, np.int64)
        batch = np.zeros(self.n, np.int64)
        layer = np.zeros(self.n, np.int64)
        for j in range(q):
            for u in range(b * l):
                lo, hi = self.subblock(j, u)
                block[lo:hi], batch[lo:hi], layer[lo:hi] = j, u % b, u // b
        return block, batch, layer

    def row_block_of(self) -> np.ndarray:
        """Row block i of every row of A."""
        return np.repeat(np.arange(self.grid.q), np.diff(self.row_bounds))

    def inner_slice_of(self) -> tuple[np.ndarray, np.ndarray]:
        """2D block s and layer k of every inner index."""
        u = np.repeat(np.arange(self.grid.q * self.grid.l), np.diff(self.inner_bounds))
        return u // self.grid.l, u % self.grid.l
