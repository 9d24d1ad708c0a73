"""Small real data sets bundled with daskhpc, for demos, docs and tests.

Provenance and terms of use: ``PROVENANCE.md`` beside this file (MovieLens
data are for non-commercial research use only).

=============  ==========================================  ====================
name           data                                        loader
=============  ==========================================  ====================
ratings        MovieLens ml-latest-small ratings           :func:`ratings`
cora           Cora citation graph (Planetoid split)       :func:`cora`
tensor         UMLS knowledge graph, head x relation x     :func:`tensor`
               tail FROSTT tensor
libsvm         LIBSVM a9a (UCI Adult), training split      :func:`libsvm`
libsvm-test    LIBSVM a9a.t, test split                    ``libsvm("test")``
=============  ==========================================  ====================

Loaders of larger public graphs, not bundled: :func:`planetoid` (the Cora/PubMed npz
layout of ``cora.npz``) and :func:`facebook` (SNAP's musae Facebook page-page directory:
``edges.csv``, ``features.json``, ``target.csv``).

Examples
--------
>>> from daskhpc import datasets
>>> datasets.ratings().shape
(610, 9724)
>>> datasets.path("tensor").endswith("umls_head_rel_tail.tns.gz")
True
"""

from __future__ import annotations

import atexit
import contextlib
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from daskhpc._narrow import index_dtype
from daskhpc.io import (SparseInput, read_edge_csv, read_libsvm, read_node_features,
                        read_node_labels, read_ratings, read_tns)

__all__ = ["names", "path", "resolve", "ratings", "cora", "tensor", "libsvm", "GraphData", "planetoid",
           "facebook", "class_split"]

_FILES = {
    "ratings": "ml-latest-small-ratings.csv.gz",
    "cora": "cora.npz",
    "tensor": "umls_head_rel_tail.tns.gz",
    "libsvm": "a9a.gz",
    "libsvm-test": "a9a.t.gz",
}

# a9a has 123 features; the test split never uses the last one, so its
# width must be given for the two splits to line up.
_A9A_FEATURES = 123

# Files extracted from a zipped install stay until the interpreter exits.
_extracted = contextlib.ExitStack()
atexit.register(_extracted.close)


@dataclass
class GraphData:
    """A node classification graph: adjacency, node features, labels, split.

    Attributes
    ----------
    adjacency : scipy.sparse.csr_array
        n x n, float64, symmetric 0/1 (undirected edges stored both ways).
    features : scipy.sparse.csr_array
        n x f, float64.
    labels : numpy.ndarray
        int64 class of each node.
    idx_train, idx_val, idx_test : numpy.ndarray
        int64 node indices of the standard split.
    name : str
    """

    adjacency: sp.csr_array
    features: sp.csr_array
    labels: np.ndarray
    idx_train: np.ndarray
    idx_val: np.ndarray
    idx_test: np.ndarray
    name: str

    def __repr__(self) -> str:
        return (f"GraphData(name={self.name!r}, nodes={self.adjacency.shape[0]}, "
                f"arcs={self.adjacency.nnz}, features={self.features.shape[1]}, "
                f"train/val/test={self.idx_train.size}/{self.idx_val.size}/"
                f"{self.idx_test.size})")


def names() -> list[str]:
    """The bundled data sets' names, for :func:`path`.

    Examples
    --------
    >>> names()
    ['ratings', 'cora', 'tensor', 'libsvm', 'libsvm-test']
    """
    return list(_FILES)


def path(name: str) -> str:
    """Filesystem path of a bundled file (pass it to :func:`daskhpc.io.read`).

    Examples
    --------
    >>> from daskhpc.io import read
    >>> read(path("libsvm-test"), n_features=123).shape
    (16281, 123)
    """
    if name not in _FILES:
        raise ValueError(f"no bundled data set {name!r}; known: {', '.join(_FILES)}")
    resource = resources.files(__name__) / "data" / _FILES[name]
    if isinstance(resource, Path):
        return str(resource)
    return str(_extracted.enter_context(resources.as_file(resource)))


def resolve(name: str) -> str:
    """``name`` itself if it is a file, else the path of the bundled data set of that name
    (``daskhpc run ssgd ratings``), else ``name`` unchanged (the reader then says what is
    wrong with it).

    Examples
    --------
    >>> resolve("tensor").endswith("umls_head_rel_tail.tns.gz"), resolve("my.csv")
    (True, 'my.csv')
    """
    if os.path.exists(name) or name not in _FILES:
        return name
    return path(name)


def ratings() -> SparseInput:
    """MovieLens ml-latest-small: 610 users x 9,724 movies, 100,836 ratings (0.5..5); ``meta``
    holds the triplets and timestamps in file order (:func:`daskhpc.io.read_ratings`).

    Examples
    --------
    >>> r = ratings()
    >>> r.nnz, r.index_maps[1][:3].tolist()
    (100836, [1, 2, 3])
    """
    return read_ratings(path("ratings"))


def tensor() -> SparseInput:
    """UMLS knowledge graph as a 135 x 46 x 135 (head, relation, tail) tensor.

    Examples
    --------
    >>> t = tensor()
    >>> t.shape, t.nnz
    ((135, 46, 135), 6529)
    """
    return read_tns(path("tensor"))


def libsvm(split: str = "train") -> SparseInput:
    """LIBSVM a9a (UCI Adult, labels +1/-1), 123 binary features; ``split`` ``"train"``
    (32,561 samples) or ``"test"`` (16,281 samples).

    Examples
    --------
    >>> s = libsvm()
    >>> s.shape, s.nnz, sorted(set(s.labels.tolist()))
    ((32561, 123), 451592, [-1.0, 1.0])
    """
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', not {split!r}")
    name = "libsvm" if split == "train" else "libsvm-test"
    return read_libsvm(path(name), n_features=_A9A_FEATURES, zero_based=False)


def _small(indptr: np.ndarray) -> np.ndarray:
    """``indptr`` as int32 where it fits: scipy widens the indices to the indptr's dtype,
    and int64 indices double a large matrix's pattern."""
    return indptr.astype(index_dtype(int(indptr[-1]) + 1))


def cora() -> GraphData:
    """Cora citation graph: 2,708 papers, 5,278 undirected links, 7 classes, in Kipf &
    Welling's (Planetoid) node order and 140/500/1000 split.

    Examples
    --------
    >>> g = cora()
    >>> g.adjacency.shape, g.adjacency.nnz, g.features.shape
    ((2708, 2708), 10556, (2708, 1433))
    """
    return planetoid(path("cora"), name="cora")


def planetoid(file, name: str | None = None) -> GraphData:
    """A graph in the Planetoid npz layout of ``cora.npz`` / ``pubmed.npz``.

    Keys: CSR adjacency ``adj_indptr/adj_indices/adj_shape``, CSR features
    ``feat_indptr/feat_indices/feat_data/feat_shape``, ``labels``, ``idx_train``,
    ``idx_val``, ``idx_test`` (Kipf & Welling's node order and split).

    Examples
    --------
    >>> g = planetoid("pubmed.npz")                               # doctest: +SKIP
    >>> g.adjacency.shape, g.idx_train.size                        # doctest: +SKIP
    ((19717, 19717), 60)
    """
    name = name or Path(str(file)).name.split(".")[0]
    with np.load(file) as z:
        adj_indices = z["adj_indices"]
        adjacency = sp.csr_array((np.ones(adj_indices.size), adj_indices,
                                  _small(z["adj_indptr"])),
                                 shape=tuple(int(n) for n in z["adj_shape"]))
        features = sp.csr_array((z["feat_data"].astype(np.float64), z["feat_indices"],
                                 _small(z["feat_indptr"])),
                                shape=tuple(int(n) for n in z["feat_shape"]))
        return GraphData(adjacency=adjacency, features=features,
                         # float labels keep NaN, "unlabeled" (OGB); ints stay ints
                         labels=z["labels"] if z["labels"].dtype.kind == "f" else
                         z["labels"].astype(np.int64),
                         idx_train=z["idx_train"].astype(np.int64),
                         idx_val=z["idx_val"].astype(np.int64),
                         idx_test=z["idx_test"].astype(np.int64), name=name)


def class_split(labels, per_class: int = 20, val: int = 500, test: int = 1000,
                seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A Planetoid-style split: ``per_class`` training nodes of every class, then ``val``
    validation and ``test`` test nodes, in the order of one permutation drawn with
    ``default_rng(seed)`` (training nodes excluded); each index array sorted.

    Examples
    --------
    >>> tr, va, te = class_split(np.arange(3000) % 4)
    >>> tr.size, va.size, te.size, np.bincount(np.arange(3000)[tr] % 4).tolist()
    (80, 500, 1000, [20, 20, 20, 20])
    """
    labels = np.asarray(labels)
    perm = np.random.default_rng(seed).permutation(labels.size)
    ranked = labels[perm]
    # rank of each node within its class, in permutation order
    order = np.argsort(ranked, kind="stable")
    first = np.searchsorted(ranked[order], ranked[order], side="left")
    rank = np.empty(labels.size, np.int64)
    rank[order] = np.arange(labels.size) - first
    is_train = rank < per_class
    rest = perm[~is_train]
    return (np.sort(perm[is_train]), np.sort(rest[:val]), np.sort(rest[val:val + test]))


def facebook(directory) -> GraphData:
    """SNAP musae Facebook page-page: 22,470 pages, 170,823 mutual likes, 4 page types.

    Reads ``edges.csv`` (symmetrised: the links are mutual), ``features.json`` (4,714
    binary features) and ``target.csv`` (``page_type``). There is no standard split:
    :func:`class_split` draws 20 training nodes per class, 500 validation and 1,000 test
    nodes with ``numpy.random.default_rng(0)``.

    Examples
    --------
    >>> g = facebook("facebook_page_page")                        # doctest: +SKIP
    >>> g.adjacency.shape, g.features.shape, g.idx_train.size      # doctest: +SKIP
    ((22470, 22470), (22470, 4714), 80)
    """
    d = Path(directory)
    labels, classes = read_node_labels(d / "target.csv", id_column="id",
                                       label_column="page_type")
    n = labels.size
    adjacency = read_edge_csv(d / "edges.csv", symmetrize=True, num_nodes=n).matrix
    features = read_node_features(d / "features.json", num_nodes=n)
    tr, va, te = class_split(labels, 20, 500, 1000, seed=0)
    g = GraphData(adjacency=adjacency, features=features, labels=labels, idx_train=tr,
                  idx_val=va, idx_test=te, name="facebook")
    g.classes = classes
    return g
