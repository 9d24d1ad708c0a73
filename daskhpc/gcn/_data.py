"""The graph a GCN trains on: A_hat, row-normalised features, labels, split; all checked.

:func:`as_graph` reads a GraphData, a name (``"cora"``), a PyG ``Data`` (duck-typed), a
Planetoid ``.npz``, a Facebook-style directory, any graph file :func:`daskhpc.io.read`
reads (structure only: seeded random node data, as the paper's Table 2), or a scipy
matrix with ``features``, ``labels`` and ``split``."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from daskhpc import datasets
from daskhpc.errors import InputError
from daskhpc.io import read

from ._pyg import from_pyg, is_pyg_data


@dataclass(eq=False)
class Graph:
    """A checked node-classification problem: ``A`` is A_hat (CSR, diagonal present), ``X``
    the row-normalised features, ``y`` labels (< 0: unlabeled), ``masks`` the splits."""

    A: sp.csr_array
    X: sp.csr_array
    y: np.ndarray
    masks: dict
    num_classes: int
    name: str = ""
    symmetric: bool = True
    source: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        return int(self.A.shape[0])

    @property
    def AT(self) -> sp.csr_array:
        """A_hat^T as CSR (the backward pass of eq. (3) on a directed graph)."""
        if self.symmetric:
            return self.A
        t = sp.csr_array(self.A.T)
        t.sort_indices()
        return t


def normalized_adjacency(A) -> sp.csr_array:
    """A_hat = D^-1/2 (A + I) D^-1/2 with diag(A + I) = 1 (eq. (1)); the pattern of A only."""
    A = sp.csr_array(A)
    n = A.shape[0]
    P = sp.csr_array((np.ones(A.nnz), A.indices, A.indptr), shape=A.shape)
    P.sum_duplicates()
    P.data[:] = 1.0
    P = sp.csr_array(P + sp.eye_array(n, format="csr"))
    P.data[:] = 1.0                           # an existing self loop gets 1, not 2
    P.sort_indices()
    deg = np.diff(P.indptr).astype(np.float64)
    s = 1.0 / np.sqrt(deg)
    rows = np.repeat(np.arange(n), np.diff(P.indptr))
    P.data = s[rows] * s[P.indices]
    return P


def _symmetric(M) -> bool:
    """Whether a canonical CSR ``M`` equals its transpose (arrays compared, no difference)."""
    T = sp.csr_array(M.T)
    T.sort_indices()
    return bool(np.array_equal(M.indptr, T.indptr) and np.array_equal(M.indices, T.indices)
                and np.array_equal(M.data, T.data))


def row_normalize(X, copy: bool = True) -> sp.csr_array:
    """Every row divided by its sum (zero rows kept; PyG's ``NormalizeFeatures``);
    ``copy=False`` divides a float64 CSR ``X`` in place."""
    X = sp.csr_array(X).astype(np.float64, copy=copy)   # divided in place below
    X.sum_duplicates()
    X.sort_indices()
    s = np.asarray(X.sum(axis=1)).ravel()
    s[s == 0] = 1.0
    # a block of rows at a time: no temporary as large as the features
    step = max(1, (1 << 22) // max(1, X.shape[1]))
    for a in range(0, X.shape[0], step):
        lo, hi = X.indptr[a], X.indptr[min(a + step, X.shape[0])]
        X.data[lo:hi] /= np.repeat(s[a:a + step], np.diff(X.indptr[a:a + step + 1]))
    return X


def random_node_data(n: int, features: int = 64, classes: int = 8, seed: int = 0):
    """Seeded uniform features, labels and a 20-per-class split (graphs without node data)."""
    rng = np.random.default_rng([int(seed), 0x6C4])
    X = rng.random((n, features))
    y = rng.integers(0, classes, n)
    return X, y, datasets.class_split(y, 20, min(500, n // 4), min(1000, n // 2), seed=seed)


def random_data_note(source: dict) -> str | None:
    """What to tell the user when the node data were drawn, else None."""
    r = source.get("random_node_data")
    name = Path(str(source.get("path") or source.get("name") or "the graph")).name
    f = source.get("random_features")
    if f and not r:                  # a PyG Data without x: real labels, drawn features
        return (f"{name} has no node features (x): seeded random features "
                f"({f['features']}) were drawn")
    if not r:
        return None
    return (f"{name} has no node data: seeded random features ({r['features']}) and labels "
            f"({r['classes']} classes) were drawn (as the GCN paper's Table 2 runs): the "
            "accuracies are not a measure of anything")


def undirected_note(source: dict) -> str | None:
    """What to tell the user when a graph read as directed looks undirected, else None."""
    why = source.get("looks_undirected")
    if not why:
        return None
    name = Path(str(source.get("path") or source.get("name") or "the graph")).name
    return (f"{name} looks like an undirected graph ({why}) but is read as directed, "
            "each edge one way; if it is undirected, --symmetrize (symmetrize=True) trains "
            "on A + A^T")


def _masks(n, split) -> dict:
    names = ("train", "val", "test")
    if isinstance(split, dict):
        parts = [split.get(k, ()) for k in names]
    else:
        parts = list(split)
        if len(parts) != 3:
            raise InputError(f"split must be (train, val, test) node indices, got {len(parts)} "
                             "arrays")
    out = {}
    for name, idx in zip(names, parts):
        idx = np.asarray(idx)
        if idx.dtype == bool:
            if idx.shape != (n,):
                raise InputError(f"the {name} mask has {idx.size} entries for {n} nodes")
            out[name] = idx.copy()
            continue
        idx = idx.astype(np.int64, copy=False).ravel() if idx.size else np.zeros(0, np.int64)
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            bad = int(idx[(idx < 0) | (idx >= n)][0])
            raise InputError(f"the {name} split names node {bad}, outside [0, {n})")
        m = np.zeros(n, bool)
        m[idx] = True
        out[name] = m
    if not out["train"].any():
        raise InputError("the split has no training node")
    return out


def _load(source, seed: int, features: int, classes: int):
    """(adjacency, features, labels, split, name, source-dict) from a name or path."""
    if isinstance(source, datasets.GraphData):
        g = source
        return (g.adjacency, g.features, g.labels, (g.idx_train, g.idx_val, g.idx_test),
                g.name, {"name": g.name})
    if isinstance(source, str) and source == "cora":
        g = datasets.cora()
        return _load(g, seed, features, classes)[:5] + ({"path": datasets.path("cora"),
                                                        "name": "cora"},)
    if is_pyg_data(source):
        A, X, y, split, src = from_pyg(source, seed)
        n = A.shape[0]
        if y is None:             # structure only, as a graph file: drawn node data
            Xr, y, split = random_node_data(n, features, classes, seed)
            X = Xr if X is None else X
            src["random_node_data"] = {"features": features, "classes": classes,
                                       "seed": seed}
        elif X is None:           # real labels, drawn features (said on stderr)
            X = random_node_data(n, features, 2, seed)[0]
            src["random_features"] = {"features": features, "seed": seed}
        return A, X, y, split, "pyg", src
    if not isinstance(source, (str, os.PathLike)):
        raise InputError(f"cannot read a graph from a {type(source).__name__}: give a data "
                         "set name, a path, a GraphData, a PyG Data or a scipy matrix")
    path = Path(source)
    if not path.exists():
        raise InputError(f"{source}: no such file or directory (or data set name; known: cora)")
    if path.is_dir():
        if not (path / "edges.csv").exists():
            raise InputError(f"{source}: a graph directory needs edges.csv, features.json and "
                             "target.csv")
        g = datasets.facebook(path)
    elif path.name.endswith(".npz"):
        try:
            g = datasets.planetoid(path)
        except KeyError as e:
            raise InputError(f"{source}: not a Planetoid npz (missing {e})") from None
    else:
        got = read(path)
        A = got.matrix
        if A.shape[0] != A.shape[1]:
            raise InputError(f"{source}: a graph needs a square adjacency, got {A.shape}")
        X, y, split = random_node_data(A.shape[0], features, classes, seed)
        src = {"path": str(path), "random_node_data": {
            "features": features, "classes": classes, "seed": seed}}
        if got.meta.get("looks_undirected"):          # (a SNAP edge list read as directed)
            src["looks_undirected"] = got.meta["looks_undirected"]
        return A, X, y, split, path.name.split(".")[0], src
    return _load(g, seed, features, classes)[:5] + ({"path": str(path), "name": g.name},)


def as_graph(source, features=None, labels=None, split=None, *, symmetrize: bool = False,
             seed: int = 0, random_features: int = 64, random_classes: int = 8) -> Graph:
    """Check the input and build the :class:`Graph`; ``features``, ``labels``, ``split`` go with
    a matrix ``source`` (or replace the source's); ``symmetrize`` uses A + A^T."""
    if isinstance(source, Graph) and features is None and labels is None and split is None \
            and (source.symmetric or not symmetrize):
        return source                 # a symmetric graph is its own symmetrization
    if sp.issparse(source):
        A, name, src = source, "graph", {}
        X0, y0, split0 = None, None, None
    else:
        A, X0, y0, split0, name, src = _load(source, seed, random_features, random_classes)
    X = X0 if features is None else features
    # features read here from a path or a name are this call's own: normalised in place
    owned = features is None and isinstance(source, (str, os.PathLike))
    y = y0 if labels is None else labels
    split = split0 if split is None else split
    A = sp.csr_array(A)
    n = A.shape[0]
    if A.shape[0] != A.shape[1]:
        raise InputError(f"the adjacency must be square, got {A.shape[0]} x {A.shape[1]}")
    if n == 0 or A.nnz == 0:
        raise InputError(f"empty graph ({n} nodes, {A.nnz} edges)")
    if X is None or y is None or split is None:
        raise InputError("a matrix graph needs features=, labels= and split=")
    X = sp.csr_array(X) if sp.issparse(X) else sp.csr_array(np.atleast_2d(np.asarray(X, float)))
    if X.shape[0] != n:
        raise InputError(f"features have {X.shape[0]} rows for {n} nodes")
    if X.nnz and not np.all(np.isfinite(X.data)):
        raise InputError("features hold NaN or infinite values")
    y = np.asarray(y)
    if y.shape != (n,):
        raise InputError(f"labels have {y.size} entries for {n} nodes")
    if y.size and not np.issubdtype(y.dtype, np.integer):
        # NaN is "unlabeled" (OGB's convention); any other value must be a class id
        known = ~np.isnan(y.astype(np.float64))
        if not np.all(np.isfinite(y[known])) or np.any(y[known] != np.round(y[known])):
            raise InputError("labels must be integers (class ids; -1 or NaN: unlabeled)")
        y = np.where(known, y, -1)
    y = y.astype(np.int64)
    # a negative label is "unlabeled" (scikit-learn's -1): allowed outside the splits
    unlabeled = y < 0
    if unlabeled.all():
        raise InputError("no node has a label (labels < 0 or NaN mean unlabeled)")
    num_classes = int(y.max()) + 1
    if num_classes < 2:
        raise InputError("labels name a single class; a classifier needs at least two")
    masks = _masks(n, split)
    for split_name, m in masks.items():     # (``name`` is the graph's)
        bad = np.flatnonzero(m & unlabeled)
        if bad.size:
            raise InputError(f"the {split_name} split holds node {int(bad[0])}, which has "
                             f"no label ({bad.size} such node(s); unlabeled nodes may only lie "
                             "outside the train, validation and test sets)")
    src = dict(src)
    if symmetrize:
        P = sp.csr_array((np.ones(A.nnz), A.indices, A.indptr), shape=A.shape)
        A = sp.csr_array(P + P.T)
        src.pop("looks_undirected", None)
    Ahat = normalized_adjacency(A)
    symmetric = _symmetric(Ahat)
    if labels is not None:          # the caller's labels: the accuracies mean something
        src.pop("random_node_data", None)
    src.update(nodes=n, arcs=int(A.nnz), features=int(X.shape[1]), classes=num_classes,
               directed=not symmetric, unlabeled=int(unlabeled.sum()))
    return Graph(Ahat, row_normalize(X, copy=not owned), y, masks, num_classes, name, symmetric, src)
