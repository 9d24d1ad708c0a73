"""Who owns what: the row partition (rows of R and W) and the column blocks (columns of H).

* Rows: ``"random"`` (seeded, balanced by nonzeros) or ``"hp"``: the column-net hypergraph
  of section V (vertex = row with weight nnz, net = column with cost F) partitioned for
  SOED, eq. (14), which is the P2P volume of one epoch. With the default partitioner
  (``auto``) the backend is chosen by the instance's size
  (:mod:`daskhpc.hypergraph._auto`): Mt-KaHyPar's deterministic preset for small
  instances, its default preset for medium ones, and label propagation from the random
  partition where Mt-KaHyPar would take many minutes (the 10M-rating matrix at K = 1024).
* Columns: random and balanced: a seeded permutation dealt round robin, so block sizes
  differ by at most one (section VI-A).
* Or both from a partition file in the paper code's format: the row part ids, a line
  ``-``, the column block ids; a file with only the row part ids keeps random columns
  (the public code's ``-d``).

Examples
--------
>>> import numpy as np
>>> from daskhpc.ssgd._data import as_ratings
>>> r = as_ratings((np.array([0, 1, 2, 3]), np.array([0, 1, 2, 0]), np.ones(4)))
>>> a = assign(r, 2, partition="random", seed=0)
>>> np.bincount(a.row_parts).tolist(), np.bincount(a.col_blocks).tolist()
([2, 2], [2, 1])
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from daskhpc.errors import InputError
from daskhpc.io import ReadError
from daskhpc.hypergraph import Hypergraph, column_net, partition as hg_partition
from daskhpc.hypergraph import read_pair_file
from daskhpc.hypergraph import read_part_file

from ._data import Ratings

__all__ = ["Assignment", "assign", "random_col_blocks", "partition_report", "imbalance_floor",
           "PARTITIONS", "read_partition"]

PARTITIONS = ("hp", "random")


@dataclass(eq=False)
class Assignment:
    """Row part of every row, column block of every column, and how they were made."""

    row_parts: np.ndarray
    col_blocks: np.ndarray
    nparts: int
    method: str
    partitioner: str | None = None
    report: dict = field(default_factory=dict)
    time_s: float = 0.0
    choice: dict | None = None  # how ``auto`` chose the backend (hp rows only)

    def __post_init__(self):
        self.row_parts = np.ascontiguousarray(self.row_parts, dtype=np.int64)
        self.col_blocks = np.ascontiguousarray(self.col_blocks, dtype=np.int64)


def random_col_blocks(ncols: int, nparts: int, seed: int = 0) -> np.ndarray:
    """Seeded random column blocks whose sizes differ by at most one."""
    perm = np.random.default_rng([int(seed), 0xC01]).permutation(ncols)
    blocks = np.empty(ncols, dtype=np.int64)
    blocks[perm] = np.arange(ncols) % nparts
    return blocks


def assign(train: Ratings, nparts: int, *, partition: str = "hp",
           partitioner: str = "auto", rank: int = 16, epsilon: float = 0.03,
           seed: int = 0, partition_file=None, source=None, row_nnz=None) -> Assignment:
    """Partition the rows of ``train`` into K parts and its columns into K blocks.

    Parameters
    ----------
    train : Ratings
        The training ratings (the matrix whose epochs are planned).
    nparts : int
        K.
    partition : {"hp", "random"}
        How rows are partitioned when no ``partition_file`` is given.
    partitioner : str
        Backend of :func:`daskhpc.hypergraph.partition` for ``hp``. ``auto`` (the
        default) applies the size rule of :mod:`daskhpc.hypergraph._auto` (Mt-KaHyPar
        direct k-way SOED where it is fast enough, else ``lp``); other names are used as
        given (``mtkahypar``: its deterministic preset at any size; ``kahypar``:
        recursive bisection with the 2F/F net costs of section V; ``lp``, ...).
    rank : int
        F, the net cost (so the partition's SOED is the P2P volume in words).
    epsilon : float
        Allowed imbalance of the row blocks' nonzero counts.
    seed : int
    partition_file : path, optional
        Row part ids, ``-``, column block ids (or only row part ids): one per row
        (column) of ``train``, or one per row (column) of the matrix as read when empty
        ones were dropped (``daskhpc partition`` of the same file).
    source : daskhpc.ssgd._input.Input, optional
        Which rows and columns of the file ``train`` kept (for such a partition file).
    row_nnz : int array, optional
        Training ratings per row, when counted elsewhere (a random partition reads only
        these).

    Returns
    -------
    Assignment
    """
    if partition not in PARTITIONS:
        raise InputError(f"unknown --partition {partition!r}; choose one of {list(PARTITIONS)}")
    N, M = train.shape
    t0 = time.perf_counter()
    choice = None
    if partition_file is not None:
        rows, cols = read_partition(partition_file, N, M, nparts, source)
        if cols is None:
            cols = random_col_blocks(M, nparts, seed)
        method, backend = "file", None
    else:
        cols = random_col_blocks(M, nparts, seed)
        h = row_weights(train, rank, row_nnz) if partition == "random" else \
            column_net(sp.coo_array((train.vals, (train.rows, train.cols)),
                                    shape=train.shape), net_cost=int(rank))
        method, backend = partition, (partitioner if partition == "hp" else "random")
        # The default ``auto`` must stay usable at K = 1024 on 10M ratings, where every
        # Mt-KaHyPar preset takes many minutes: the size rule picks the backend. A named
        # backend is used as named.
        p = hg_partition(h, nparts, backend, objective="soed", epsilon=epsilon, seed=seed)
        rows, backend, choice = p.parts, p.partitioner, p.meta.get("auto")
    return Assignment(rows, cols, nparts, method, backend, {}, time.perf_counter() - t0,
                      choice)


def row_weights(train: Ratings, rank: int, row_nnz=None) -> Hypergraph:
    """The column-net model's vertices and weights (nonzeros per row) without its nets.

    A random partition reads only these; the nets would be a copy of every rating's
    column (8 bytes a pin) on the client for nothing. Same parts as the full model.

    Examples
    --------
    >>> from daskhpc.ssgd._data import as_ratings
    >>> h = row_weights(as_ratings(([0, 0, 1], [0, 1, 1], [1.0, 2.0, 3.0])), 8)
    >>> h.num_vertices, h.num_pins, h.vertex_weights.ravel().tolist()
    (2, 0, [2, 1])
    """
    N, M = train.shape
    return Hypergraph(N, np.zeros(1, np.int64), np.zeros(0, np.int64),
                      np.bincount(train.rows, minlength=N) if row_nnz is None else row_nnz,
                      None, "column-net (no nets)",
                      {"shape": [N, M], "nnz": int(train.nnz), "rank": int(rank)})


def partition_report(a: Assignment, row_nnz: np.ndarray, pins_col: np.ndarray,
                     rank: int) -> dict:
    """imbalance, km1, soed and cut of the row partition (net cost F), from the pins and
    the training ratings per row.

    The same numbers as ``daskhpc.hypergraph.Partition.report()`` on the column-net
    model, computed from the (column, part) pairs the plan needs anyway.
    """
    K = a.nparts
    lam = np.bincount(pins_col, minlength=a.col_blocks.size)
    w = np.bincount(a.row_parts, weights=row_nnz, minlength=K).astype(np.int64)
    cut = lam > 1
    out = {"imbalance": float(w.max() / (w.sum() / K) - 1.0) if w.sum() else 0.0,
           "km1": int(rank) * int(np.maximum(lam - 1, 0).sum()),
           "soed": int(rank) * int(lam[cut].sum()), "cut": int(rank) * int(cut.sum())}
    out.update(imbalance_floor(row_nnz, K))
    if a.choice is not None:
        out["auto"] = {k: a.choice[k] for k in ("backend", "options", "rule")}
    return out


def imbalance_floor(row_nnz: np.ndarray, K: int) -> dict:
    """The least imbalance any partition of these rows into ``K`` parts can have.

    A row is never split: the heaviest part weighs at least the heaviest row, and at
    least the even share ``ceil(nnz / K)``. Either way, over the even share.

    Examples
    --------
    >>> imbalance_floor(np.array([10, 1, 1, 1, 1]), 2)["imbalance_lower_bound"]
    0.4285714285714286
    """
    total = int(row_nnz.sum())
    if not total:
        return {}
    even = total / K
    heaviest = int(row_nnz.max())
    return {"imbalance_lower_bound": max(heaviest, -(-total // K)) / even - 1.0,
            "imbalance_bound": {"vertex": "row", "weight": "nonzeros", "heaviest": heaviest,
                                "even_part": even, "vertices": int((row_nnz > 0).sum())}}


def read_partition(path, N: int, M: int, K: int | None, source=None):
    """``(row parts, column blocks or None)`` of partition file ``path`` for an
    ``N x M`` input; ``K`` None checks no part id against a part count.

    A file may hold one id per row of the input (``N``) or, when ``source`` (an
    ``Input``) dropped empty rows, one per row of the matrix as read: then the dropped
    rows' ids are left out. Errors name the file and line and both counts.
    """
    with open(path, encoding="utf-8") as f:
        has_sep = any(line.strip() == "-" for line in f)
    rows, cols = read_pair_file(path, nparts=K) if has_sep else \
        (read_part_file(path, nparts=K), None)
    kept = getattr(source, "kept", (None, None))
    in_file = tuple(getattr(source, "file_shape", (N, M)))
    name = getattr(source, "path", "the input")
    out = []
    for axis, (what, ids, n) in enumerate((("row", rows, N), ("column", cols, M))):
        if ids is None or ids.size == n:
            out.append(ids)
        elif kept[axis] is not None and ids.size == in_file[axis]:
            out.append(ids[kept[axis]])          # made for the file: drop the empty ones
        else:
            last = ids.size if axis == 0 else rows.size + 1 + ids.size   # its last line
            also = (f" ({in_file[axis]} in {name} before its {in_file[axis] - n} empty "
                    f"{what}s were dropped; a file for either count fits)"
                    if in_file[axis] != n else f" of {name}")
            raise ReadError(str(path), last, f"{ids.size} {what} part ids for {n} {what}s"
                            f"{also}")
    for what, ids in (("row", rows), ("column", cols)):
        # A file made for fewer parts (its largest id below K - 1) would leave workers
        # idle: refuse it. A part left empty inside the range (a random partition of few
        # columns) is a valid stratum block with no work, as in the paper's code.
        top = int(ids.max()) + 1 if ids is not None and ids.size else 0
        if ids is not None and K is not None and top < K:
            raise InputError(f"{path}: its {what} part ids go up to {top - 1}, so parts "
                             f"{top}..{K - 1} of --parts {K} would be empty; partition into "
                             f"{K} parts or pass --parts {top}")
    return out[0], out[1]
