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
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from daskhpc.io import SparseInput, read_libsvm, read_ratings, read_tns

__all__ = ["names", "path", "ratings", "cora", "tensor", "libsvm", "GraphData"]

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


def ratings() -> SparseInput:
    """MovieLens ml-latest-small: 610 users x 9,724 movies, 100,836 ratings.

    Ratings 0.5..5; ``meta`` holds the triplets and timestamps in file
    order (see :func:`daskhpc.io.read_ratings`).

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
    """LIBSVM a9a (UCI Adult, labels +1/-1), 123 binary features.

    Parameters
    ----------
    split : {"train", "test"}
        ``train``: 32,561 samples; ``test``: 16,281 samples.

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


def cora() -> GraphData:
    """Cora citation graph: 2,708 papers, 5,278 undirected links, 7 classes.

    Node order and the 140/500/1000 split are Kipf & Welling's (Planetoid).

    Examples
    --------
    >>> g = cora()
    >>> g.adjacency.shape, g.adjacency.nnz, g.features.shape
    ((2708, 2708), 10556, (2708, 1433))
    """
    with np.load(path("cora")) as z:
        adj_indices = z["adj_indices"]
        adjacency = sp.csr_array((np.ones(adj_indices.size), adj_indices, z["adj_indptr"]),
                                 shape=tuple(int(n) for n in z["adj_shape"]))
        features = sp.csr_array((z["feat_data"].astype(np.float64), z["feat_indices"],
                                 z["feat_indptr"]),
                                shape=tuple(int(n) for n in z["feat_shape"]))
        return GraphData(adjacency=adjacency, features=features,
                         labels=z["labels"].astype(np.int64),
                         idx_train=z["idx_train"].astype(np.int64),
                         idx_val=z["idx_val"].astype(np.int64),
                         idx_test=z["idx_test"].astype(np.int64), name="cora")
