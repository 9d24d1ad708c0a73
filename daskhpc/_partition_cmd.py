"""`daskhpc partition` and the partition comparison of `daskhpc demo` (no dask needed).

A model name and an input file give a Hypergraph (``build_model``); a partitioner gives a
Partition; the report holds the model's size and the cut metrics.
"""

from __future__ import annotations

import contextlib
import time

import numpy as np

from daskhpc import datasets
from daskhpc import hypergraph as hg
from daskhpc.errors import InputError
from daskhpc.io import SparseInput
from daskhpc.report import new_report

MODELS = ("column-net", "row-net", "graph", "tensor-fine", "tensor-coarse", "stochastic")


def graph_model(G) -> hg.Hypergraph:
    """Each undirected edge {u, v} of G as a 2-pin net: cut and km1 are the edge cut."""
    import scipy.sparse as sp

    upper = sp.triu(G, k=1, format="coo")
    net_ptr = np.arange(0, 2 * upper.nnz + 1, 2, dtype=np.int64)
    pins = np.column_stack([upper.row, upper.col]).ravel()
    deg = np.diff(sp.csr_array(G).indptr)
    return hg.Hypergraph(G.shape[0], net_ptr, pins, np.maximum(deg, 0), None, "graph",
                         {"edges": int(upper.nnz)})


def build_model(model: str, data, *, net_cost: int = 1, batches: int = 10,
                batch_size: float = 0.1, seed: int = 0):
    """(Hypergraph, graph or None) for a model name and a :class:`daskhpc.io.SparseInput`; the
    graph (symmetrised adjacency, square matrices) is what the ``graph`` partitioner takes."""
    if model not in MODELS:
        raise InputError(f"unknown model {model!r}; choose one of {', '.join(MODELS)}")
    if model.startswith("tensor"):
        if data.tensor is None:
            raise InputError(f"{data.path}: model {model} needs a tensor (.tns) input, "
                             f"got a {data.format} matrix")
        build = hg.tensor_fine if model == "tensor-fine" else hg.tensor_coarse
        return build(data.tensor, net_cost=net_cost), None
    if data.matrix is None:
        raise InputError(f"{data.path}: model {model} needs a matrix input, got a tensor")
    A = data.matrix
    square = A.shape[0] == A.shape[1]
    if model in ("graph", "stochastic") and not square:
        raise InputError(f"{data.path}: model {model} needs a square matrix, "
                         f"got {A.shape[0]} x {A.shape[1]}")
    G = hg.symmetric_graph(A) if square else None
    if model == "column-net":
        return hg.column_net(A, net_cost=net_cost), G
    if model == "row-net":
        return hg.row_net(A, net_cost=net_cost), (G if square else None)
    if model == "graph":
        return graph_model(G), G
    return hg.stochastic(A, batches=batches, batch_size=batch_size, seed=seed), G


def partition_report(args, data, stage=None) -> tuple[dict, hg.Partition]:
    """Build the model, partition it, and return the JSON report and the Partition; ``stage``
    says what runs (``daskhpc._terminal.stage`` on the command line; default silent)."""
    stage = stage or contextlib.nullcontext
    t0 = time.perf_counter()
    with stage(f"building the {args.model} model"):
        h, G = build_model(args.model, data, net_cost=args.net_cost, seed=args.seed)
    t_model = time.perf_counter() - t0
    options = {"threads": args.threads}
    if args.partitioner == "graph":
        options["graph"] = G if h.name != "row-net" else None
    if args.partitioner == "mtkahypar":
        options["preset"] = args.preset
    with stage(f"{args.partitioner}: {args.parts} parts of {h.num_vertices:,} vertices, "
               f"{h.num_nets:,} nets, {h.num_pins:,} pins"):
        p = hg.partition(h, args.parts, args.partitioner, objective=args.objective,
                         epsilon=args.epsilon, seed=args.seed, **options)
    model = {"name": h.name, "vertices": h.num_vertices, "nets": h.num_nets,
             "pins": h.num_pins, "constraints": h.num_constraints}
    report = new_report(
        "partition", input=data.describe(), model=model, parts=args.parts,
        partitioner=p.partitioner, objective=args.objective, epsilon=args.epsilon,
        seed=args.seed, partition=p.report(),
        timing={"model_s": round(t_model, 4), "partition_s": round(p.time_s, 4)})
    if h.name == "tensor-fine":
        owners = hg.assign_factor_rows(h, p.parts, args.parts, args.epsilon)
        report["partition"]["fine_grain_volume"] = hg.fine_grain_volume(h, p.parts, owners,
                                                                        args.parts)
    return report, p


def format_table(rows: list[dict], columns: list[str]) -> str:
    """A plain aligned text table (what the CLI prints)."""
    cells = [[str(r.get(c, "")) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) if cells else len(c)
              for i, c in enumerate(columns)]
    line = "  ".join(c.ljust(w) for c, w in zip(columns, widths))
    rule = "  ".join("-" * w for w in widths)
    body = ["  ".join(v.rjust(w) for v, w in zip(row, widths)) for row in cells]
    return "\n".join([line, rule, *body])


def demo_partitions(nparts: int = 4, seed: int = 0, backends=None, stage=None,
                    threads: int = 1) -> list[dict]:
    """Partition the bundled data the workflows' demos partition, with every backend, in
    the model they use; one row per (data, backend). ``threads``: Mt-KaHyPar's deterministic
    preset gives the same partitions on 1 and 2 threads here. a9a is left out: no workflow
    partitions it, and its row-net took 16 s of a 60 s demo."""
    stage = stage or contextlib.nullcontext
    cases = [("ratings (ml-latest-small)", datasets.ratings, "column-net"),
             ("cora", _cora_input, "column-net"),
             ("umls tensor", datasets.tensor, "tensor-fine")]
    backends = backends or ["mtkahypar", "kahypar", "graph", "random", "block"]
    rows = []
    for name, load, model in cases:
        with stage(f"{name}: {model} model, {', '.join(backends)}"):
            rows += _demo_rows(name, load(), model, nparts, seed, backends, threads)
    return rows


def _demo_rows(name, data, model, nparts, seed, backends, threads) -> list[dict]:
    rows = []
    h, G = build_model(model, data, seed=seed)
    base = None
    for backend in backends:
        opts = {"graph": G} if backend == "graph" else {}
        p = hg.partition(h, nparts, backend, objective="km1", seed=seed, threads=threads,
                         **opts)
        m = p.metrics()
        base = m["km1"] if backend == "random" else base
        rows.append({"data": name, "model": model, "partitioner": backend,
                     "km1": m["km1"], "soed": m["soed"], "cut": m["cut"],
                     "imbalance": f"{m['imbalance']:.3f}", "time_s": f"{p.time_s:.2f}"})
    for r in rows:
        r["km1/random"] = f"{r['km1'] / base:.2f}" if base else "-"
    return rows


def _cora_input():
    g = datasets.cora()
    return SparseInput(path=datasets.path("cora"), format="npz", matrix=g.adjacency,
                       tensor=None, labels=g.labels, index_maps=(None, None), meta={})
