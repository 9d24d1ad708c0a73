"""Who owns what: the row partition (rows of R and W) and the column blocks (columns of H).

* Rows: ``"random"`` (seeded, balanced by nonzeros) or ``"hp"``: the column-net hypergraph
  of section V (vertex = row with weight nnz, net = column with cost F) partitioned for
  SOED, eq. (14), the P2P volume of one epoch; ``auto`` picks the backend by size.
* Columns: a seeded permutation dealt round robin (section VI-A).
* Or both from a partition file in the paper code's format: row part ids, ``-``, column
  block ids (only row part ids: random columns, the public code's ``-d``)."""

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

    ``rank`` F is the net cost, so SOED is the P2P volume in words; a ``partition_file`` may
    number the rows of ``train`` or, with ``source``, of the matrix before empty ones were
    dropped."""
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
        p = hg_partition(h, nparts, backend, objective="soed", epsilon=epsilon, seed=seed)
        rows, backend, choice = p.parts, p.partitioner, p.meta.get("auto")
    return Assignment(rows, cols, nparts, method, backend, {}, time.perf_counter() - t0,
                      choice)


def row_weights(train: Ratings, rank: int, row_nnz=None) -> Hypergraph:
    """The column-net model's vertices and weights (nonzeros per row) without its nets."""
    N, M = train.shape
    return Hypergraph(N, np.zeros(1, np.int64), np.zeros(0, np.int64),
                      np.bincount(train.rows, minlength=N) if row_nnz is None else row_nnz,
                      None, "column-net (no nets)",
                      {"shape": [N, M], "nnz": int(train.nnz), "rank": int(rank)})


def partition_report(a: Assignment, row_nnz: np.ndarray, pins_col: np.ndarray,
                     rank: int) -> dict:
    """imbalance, km1, soed and cut of the row partition (net cost F) from the pins."""
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
    """The least imbalance of any partition of these rows into ``K`` parts: a row is never
    split, so the heaviest part weighs at least max(heaviest row, ceil(nnz / K))."""
    total = int(row_nnz.sum())
    if not total:
        return {}
    even = total / K
    heaviest = int(row_nnz.max())
    return {"imbalance_lower_bound": max(heaviest, -(-total // K)) / even - 1.0,
            "imbalance_bound": {"vertex": "row", "weight": "nonzeros", "heaviest": heaviest,
                                "even_part": even, "vertices": int((row_nnz > 0).sum())}}


def read_partition(path, N: int, M: int, K: int | None, source=None):
    """``(row parts, column blocks or None)`` of partition file ``path`` for an ``N x M`` input
    (or, given ``source``, for the file before empty rows were dropped)."""
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
