"""The 1D row partition of A_hat (GCN paper, section 4.3) and its models.

* ``hp``: the column-net hypergraph of A_hat (eq. (10)) for km1: one layer's forward
  volume exactly (section 4.3.2).
* ``gp``: the graph model (4.3.1), the symmetrised graph for edge cut (Mt-KaHyPar's
  graph mode; the paper used METIS).
* ``rp``: the paper's RP, a seeded permutation dealt evenly; ``random``: balanced random.

A row weighs its nonzeros in A_hat (``"nnz"``, the paper's), plus its feature row's
(``"nnz+features"``), or an epoch's cost on it (``"cost"``: ``ROW_COST`` nonzeros of
dense work, a feature nonzero half of one; docs/gcn.md)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

import daskhpc.hypergraph as hg
from daskhpc.errors import InputError

PARTITIONS = ("hp", "gp", "rp", "random")
WEIGHTS = ("nnz", "nnz+features", "cost")
#: ``weights="cost"``: a row's own dense work in nonzeros of A_hat (docs/gcn.md)
ROW_COST = 40


@dataclass(eq=False)
class Assignment:
    """Part of every row (= vertex), how it was made, and the partition's report."""

    parts: np.ndarray
    nparts: int
    method: str
    partitioner: str | None = None
    time_s: float = 0.0
    report: dict = field(default_factory=dict)
    choice: dict | None = None

    def __post_init__(self):
        self.parts = np.ascontiguousarray(self.parts, dtype=np.int64)


def paper_random(n: int, nparts: int, seed: int = 0) -> np.ndarray:
    """RP: a seeded permutation of the rows dealt round robin (row counts differ by <= 1)."""
    perm = np.random.default_rng([int(seed), 0x52B]).permutation(n)
    parts = np.empty(n, np.int64)
    parts[perm] = np.arange(n) % nparts
    return parts


def hp_backend(h, nparts: int) -> dict:
    """``auto`` for HP: the hypergraph size rule, but Mt-KaHyPar's ``large_k`` preset refined
    by label propagation where the rule falls back to label propagation at K >= 64."""
    c = hg.choose_partitioner(h, nparts)
    if c["backend"] == "lp" and nparts >= 64:
        c = {"backend": "mtkahypar", "options": {"preset": "large_k"}, "work": c["work"],
             "rule": f"pins*sqrt(K) = {c['work']:.3g} and K >= 64: Mt-KaHyPar large_k preset"}
    return c


def assign(graph, nparts: int, *, partition: str = "hp", partitioner: str = "auto",
           epsilon: float = 0.03, seed: int = 0, partition_file=None,
           weights: str = "nnz") -> Assignment:
    """Partition the rows of A_hat into ``nparts`` parts (or read ``partition_file``)."""
    if partition not in PARTITIONS:
        raise InputError(f"unknown --partition {partition!r}; choose one of {list(PARTITIONS)}")
    n = graph.n
    h = hg.column_net(graph.A)
    if weights == "nnz+features":
        h.vertex_weights[:, 0] += np.diff(graph.X.indptr)
    elif weights == "cost":        # in half nonzeros: ROW_COST + nnz(A_hat row) + nnz(X row) / 2
        h.vertex_weights[:, 0] = (2 * (ROW_COST + h.vertex_weights[:, 0])
                                  + np.diff(graph.X.indptr))
    t0 = time.perf_counter()
    choice = None
    if partition_file is not None:
        parts = hg.read_part_file(partition_file, num_vertices=n, nparts=nparts)
        method, backend = "file", None
    elif partition == "rp":
        parts, method, backend = paper_random(n, nparts, seed), "rp", "uniform random rows"
    elif partition == "random":
        p = hg.partition(h, nparts, "random", seed=seed)
        parts, method, backend = p.parts, "random", "random"
    elif partition == "gp":
        p = hg.partition(h, nparts, "graph", objective="cut", epsilon=epsilon, seed=seed,
                         graph=hg.symmetric_graph(graph.A))
        parts, method, backend = p.parts, "gp", "graph"
    else:
        options = {}
        if partitioner == "auto":
            choice = hp_backend(h, nparts)
            partitioner, options = choice["backend"], choice["options"]
        p = hg.partition(h, nparts, partitioner, objective="km1", epsilon=epsilon, seed=seed,
                         **options)
        parts, method, backend = p.parts, "hp", p.partitioner
        if options.get("preset") == "large_k":
            # a few seconds of label propagation on top: large_k leaves easy moves behind
            parts = hg.refine(h, parts, nparts, objective="km1", epsilon=epsilon, seed=seed)
            backend = "mtkahypar large_k + lp"
    dt = time.perf_counter() - t0
    a = Assignment(parts, nparts, method, backend, dt, choice=choice)
    part = hg.Partition(parts, nparts, backend or "file", "km1", epsilon, seed, h)
    a.report = part.report()
    if choice is not None:
        a.report["auto"] = {k: choice[k] for k in ("backend", "options", "rule")}
    return a
