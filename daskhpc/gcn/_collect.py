"""A Dask DataFrame edge list (and Dask Array node data) as ``fit``'s graph.

Only the edges' pins reach the client (ids numbered as the SNAP reader numbers them),
which builds A_hat, partitions and plans as for the file; features given as a Dask Array
are routed to the parts' workers and row-normalised there, the very arrays the in-memory
path scatters. The predictions come back as a Dask Array chunked like the features."""

from __future__ import annotations

import dataclasses
import types
import uuid

import numpy as np
import scipy.sparse as sp

from daskhpc._narrow import index_dtype
from daskhpc._workflows import checked_options
from daskhpc.errors import InputError
from daskhpc.io import (check_array, check_rows, is_collection, join_rows, read_edge_list,
                        read_rows, rereading, route, rows_route)

from ._data import as_graph, random_node_data, row_normalize
from ._job import prepare_run, short_steps
from ._model import dense_features, features, take_rows
from ._setup import Options


class Source:
    """What a collection run keeps: the features on the workers, chunks and tokens."""

    def __init__(self, rows, chunks, tokens):
        self.rows, self.chunks, self.tokens = rows, chunks, tokens

    def release(self):
        if self.rows is not None:
            self.rows.release()


def _labels_meta(y, n_hint=None):
    if not hasattr(y, "chunks") or y.ndim != 1:
        raise InputError(f"labels: a {type(y).__name__} of {getattr(y, 'ndim', '?')} "
                         "dimensions; give a 1-D Dask Array (one label a node)")
    check_array(y, "labels", values="numbers (class ids)")
    if n_hint is not None and y.shape[0] != n_hint:
        raise InputError(f"labels: {y.shape[0]} labels for {n_hint} nodes")


def prepare_collection(client, graph, features, labels, split, nparts, minibatch,
                       checkpoint, resume, partition_file, options, columns=None):
    """``(setup, source)`` of a run whose graph is a Dask DataFrame edge list."""
    opts = checked_options(Options, dict(options), "GCN")   # options first: cost nothing
    if not is_collection(graph):
        raise InputError("features or labels as a Dask Array need the graph as a Dask "
                         "DataFrame edge list (source, target[, weight])")
    if is_collection(split) if split is not None else False:
        raise InputError("split: give (train, val, test) node indices or masks as arrays")
    if is_collection(features):                   # checked before anything is read
        check_rows(features, name="features")
        if features.ndim != 2:
            raise InputError(f"features: a {features.ndim}-D Dask Array; need n x F")
    if is_collection(labels):
        _labels_meta(labels)
    edges = read_edge_list(graph, client, columns=columns, name="edges")
    n = edges.n
    tokens = {"edges": edges.token}
    rows = None
    try:
        if is_collection(labels):
            _labels_meta(labels, n)
            labels = client.compute(labels).result()     # one integer a node
            tokens["labels"] = True
        drawn = None
        if features is None or labels is None or split is None:   # as the file reader
            X0, y0, split0 = random_node_data(n, opts.random_features, opts.random_classes,
                                              opts.seed)
            drawn = {"features": opts.random_features, "classes": opts.random_classes,
                     "seed": opts.seed}
            features = X0 if features is None else features
            labels = y0 if labels is None else labels
            split = split0 if split is None else split
        if is_collection(features):
            rows = read_rows(features, client, name="features", rows=n)
            tokens["features"] = rows.token
            X = sp.csr_array((n, int(features.shape[1])))     # the shape; rows on workers
        else:
            X = features
        # int32 ids where they fit: scipy keeps the index arrays' width
        ids = index_dtype(n)
        src, dst = edges.pins[0].astype(ids, copy=False), edges.pins[1].astype(ids, copy=False)
        A = sp.csr_array((np.ones(src.size), (src, dst)), shape=(n, n))
        A.sum_duplicates()
        A.data[:] = 1.0
        g = as_graph(A, X, labels, split, symmetrize=opts.symmetrize)
        g.name = "edges"
        g.source = {"collection": edges.token, **g.source}
        if drawn is not None and "labels" not in tokens and labels is y0:
            g.source["random_node_data"] = drawn
        s = prepare_run(g, None, None, None, nparts, minibatch, checkpoint, resume,
                        partition_file, dict(options))
    except BaseException:
        if rows is not None:
            rows.release()
        raise
    chunks = rows.chunks if rows is not None else None
    return s, Source(rows, chunks, tokens)


def short_steps_of(s, source, workers: int) -> bool:
    """``_job.short_steps`` with the features' nonzeros counted on the workers."""
    if source.rows is None:
        return short_steps(s, workers)
    g = dataclasses.replace(s.graph, X=types.SimpleNamespace(nnz=source.rows.nonzeros,
                                                             shape=s.graph.X.shape))
    return short_steps(dataclasses.replace(s, graph=g), workers)


def part_statics(client, shells: list, source, placement, parts=None) -> dict:
    """``{part: Future}``: each part's statics on its worker, features routed there."""
    from distributed import wait

    K = len(shells)
    where = {p: placement.worker(p) for p in range(K)}
    # dense or CSR features: the whole matrix's choice, as the in-memory run makes it
    n, d = sum(sh["rows"].size for sh in shells), int(shells[0]["dims"][0])
    dense = dense_features(int(source.rows.nonzeros), n, d)
    who = client.who_has(source.rows.pieces)
    source.holders = [sorted(who.get(f.key) or [None])[0] for f in source.rows.pieces]
    part_rows = [sh["rows"] for sh in shells]
    bare = {}
    for p, sh in enumerate(shells):
        bare[p] = {k: v for k, v in sh.items() if k != "X"}
        bare[p]["dense_x"] = dense
        if sh.get("batches") is not None:
            bare[p]["batches"] = [{k: v for k, v in b.items() if k != "X"}
                                  for b in sh["batches"]]
    futs = route(client, source.rows, rows_route(part_rows, source.rows.offsets), where,
                 _part_static, bare, name="gcn-features", parts=parts)
    if parts is None:
        wait(list(futs.values()))
    return futs


def rebuilder(client, shells: list, source):
    """``rebuild(parts, placement)``: the lost parts' features read and routed again."""
    return rereading(client, [source.rows], lambda parts, placement: part_statics(
        client, shells, source, placement, parts))


def _part_static(shell, *segments):
    """On the part's worker: its feature rows as the client would cut them, and its batches'."""
    block = join_rows(list(segments))
    if block is None:
        block = np.zeros((0, 0))
    shell = dict(shell)
    dtype, dense = np.dtype(shell["options"].dtype), shell.pop("dense_x")
    if dense and not sp.issparse(block) and block.size and \
            np.count_nonzero(block) == block.size:
        X = _normalized_dense(block, dtype)
    else:
        M = sp.csr_array(block) if sp.issparse(block) else \
            sp.csr_array(np.atleast_2d(np.asarray(block, float)))
        # in the run's dtype, as the client casts the row-normalised features
        X = features(row_normalize(M), dtype, dense=dense)
    out = dict(shell, X=X)
    if shell.get("batches") is not None:
        out["batches"] = [dict(b, X=take_rows(X, np.searchsorted(shell["rows"], b["rows"])))
                          for b in shell["batches"]]
    return out


def _normalized_dense(block, dtype) -> np.ndarray:
    """``features(row_normalize(csr(block)), dtype, dense=True)`` of a dense block without
    zeros, with no CSR copy (the same sums, each value divided once)."""
    B = np.array(block, dtype=np.float64, order="C")
    n, f = B.shape
    s = np.add.reduceat(B.ravel(), np.arange(0, n * f, f))
    s[s == 0] = 1.0
    B /= s[:, None]
    return B if dtype == B.dtype else B.astype(dtype)


def full_setup(client, s, source):
    """The Setup with the features on the client (``check_serial`` only)."""
    if source.rows is None:
        return s
    full = source.rows.gather(client)
    M = sp.csr_array(full) if sp.issparse(full) else sp.csr_array(np.asarray(full, float))
    g = dataclasses.replace(s.graph, X=row_normalize(M))
    return dataclasses.replace(s, graph=g)


def predictions_array(client, predictions: np.ndarray, source, workers: list):
    """The predictions as a Dask Array chunked like the features' rows."""
    import dask.array as da

    n = predictions.size
    if source.chunks is not None:
        sizes = [int(c) for c in source.chunks]
        holders = getattr(source, "holders", [])
    else:
        sizes = [len(c) for c in np.array_split(np.arange(n), max(1, min(len(workers), n)))]
        holders = []
    name = f"gcn-predictions-{uuid.uuid4().hex[:8]}"
    dsk, lo = {}, 0
    for k, size in enumerate(sizes):
        w = holders[k] if k < len(holders) and holders[k] in workers else \
            workers[k % len(workers)]            # (a holder lost during the run: another)
        dsk[(name, k)] = client.scatter(predictions[lo:lo + size], workers=[w], hash=False)
        lo += size
    return da.Array(dsk, name, chunks=(tuple(sizes),), dtype=predictions.dtype,
                    meta=np.zeros(0, predictions.dtype))
