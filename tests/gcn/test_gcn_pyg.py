"""A graph given as a PyTorch Geometric ``Data`` object: mapped onto what the
Planetoid npz gives, duck-typed (torch is not imported for it), Cora as a Data trains to
the npz's bits, and bad attributes are one-line input errors. The tests with real PyG
(the ``pyg`` extra) are skipped where it is not installed; the others use a hand-built
object with the same attributes and tensor-like ``.cpu()`` / ``.numpy()``."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import daskhpc as dh
from daskhpc import datasets
from daskhpc.errors import InputError
from daskhpc.gcn._data import as_graph


class Tensor:
    """What the conversion uses of a torch tensor: ``detach``, ``cpu``, ``numpy``."""

    def __init__(self, a):
        self._a = np.asarray(a)
        self.shape = self._a.shape

    def detach(self):
        return self

    def cpu(self):
        return self

    def numpy(self):
        return self._a


class Data:
    """A hand-built stand-in of ``torch_geometric.data.Data``."""

    def __init__(self, **attrs):
        for k, v in attrs.items():
            setattr(self, k, None if v is None else Tensor(v))


def cora_attrs():
    """Cora's npz as PyG's attributes: edge (j, i) for A[i, j] (source j, target i)."""
    g = datasets.cora()
    A = g.adjacency.tocoo()
    n = A.shape[0]

    def mask(idx):
        m = np.zeros(n, bool)
        m[idx] = True
        return m

    return {"edge_index": np.vstack([A.col, A.row]).astype(np.int64),
            "x": g.features.toarray().astype(np.float32), "y": g.labels.copy(),
            "train_mask": mask(g.idx_train), "val_mask": mask(g.idx_val),
            "test_mask": mask(g.idx_test)}


@pytest.fixture(scope="module")
def cora():
    return cora_attrs()


def test_cora_as_a_data_object_is_the_npz_graph(cora):
    a, b = as_graph(Data(**cora)), as_graph("cora")
    assert (a.A != b.A).nnz == 0 and (a.X != b.X).nnz == 0
    assert np.array_equal(a.y, b.y) and all(np.array_equal(a.masks[k], b.masks[k])
                                            for k in b.masks)
    assert a.source["pyg"] == {"nodes": 2708, "edges": 10556, "x": True, "split": "masks"}
    r1 = dh.gcn.serial_fit(Data(**cora), epochs=3)
    r2 = dh.gcn.serial_fit("cora", epochs=3)
    assert all(np.array_equal(p, q) for p, q in zip(r1.params, r2.params))


def test_direction_follows_pyg_source_to_target():
    """Edge (0, 1) carries node 0's features to node 1: row 1 of A_hat has column 0."""
    d = Data(edge_index=[[0, 2], [1, 1]], x=np.eye(3), y=[0, 1, 0],
             train_mask=[True, True, True])
    g = as_graph(d)
    assert not g.symmetric
    assert g.A[[1], :].indices.tolist() == [0, 1, 2] and g.A[[0], :].indices.tolist() == [0]


def test_unlabeled_nodes_and_refusals(cora):
    attrs = dict(cora)
    y = attrs["y"].copy()
    outside = np.flatnonzero(~(attrs["train_mask"] | attrs["val_mask"] | attrs["test_mask"]))
    y[outside] = -1
    assert as_graph(Data(**{**attrs, "y": y})).source["unlabeled"] == outside.size
    yf = y.astype(float)
    yf[outside] = np.nan                                  # OGB's NaN, as N x 1
    assert as_graph(Data(**{**attrs, "y": yf[:, None]})).source["unlabeled"] == outside.size
    val = int(np.flatnonzero(attrs["val_mask"])[0])
    y[val] = -1                                           # refused like the npz
    with pytest.raises(InputError, match=f"the val split holds node {val}, which has no "
                                         "label"):
        as_graph(Data(**{**attrs, "y": y}))
    bad = {"edge_index": (np.array([[0, 1], [1, 2708]]), "column 1 names node 2708, "
                                                           "outside \\[0, 2708\\)"),
           "train_mask": (np.zeros((2708, 10), bool), "one column per split"),
           "val_mask": (np.flatnonzero(attrs["val_mask"]), "must be a bool tensor of 2708"),
           "y": (np.zeros((2708, 3)), "one label per node")}
    for key, (value, message) in bad.items():
        with pytest.raises(InputError, match=message):
            as_graph(Data(**{**attrs, key: value}))
    with pytest.raises(InputError, match="cannot read a graph from a dict"):
        as_graph({"edges": 1})


def test_without_x_or_masks(cora, capsys):
    """No x: seeded random features, said on stderr; no masks: class_split over the
    labeled nodes (20 per class, 500, 1000)."""
    attrs = {k: cora[k] for k in ("edge_index", "y")}
    attrs["y"] = attrs["y"].copy()
    attrs["y"][:100] = -1
    s = dh.gcn.prepare(Data(**attrs), 1, random_features=8)
    assert s.graph.X.shape == (2708, 8) and s.graph.source["pyg"]["split"] == "class_split"
    assert "pyg has no node features (x): seeded random features (8)" in capsys.readouterr().err
    m = s.graph.masks
    assert [int(m[k].sum()) for k in ("train", "val", "test")] == [140, 500, 1000]
    assert not any(m[k][:100].any() for k in m)
    bare = dh.gcn.prepare(Data(edge_index=cora["edge_index"]), 1)   # structure only
    assert bare.graph.X.shape == (2708, 64) and bare.graph.num_classes == 8
    assert "pyg has no node data" in capsys.readouterr().err
    assert bare.graph.source["random_node_data"]["classes"] == 8


def test_torch_is_not_imported_for_a_duck_typed_graph():
    code = ("import sys, numpy as np\n"
            "sys.path.insert(0, %r)\n"
            "from test_gcn_pyg import Data\n"
            "from daskhpc.gcn._data import as_graph\n"
            "g = as_graph(Data(edge_index=[[0, 1], [1, 0]], x=np.eye(2), y=[0, 1],\n"
            "                  train_mask=[True, True]))\n"
            "assert g.n == 2\n"
            "print('torch' in sys.modules)\n") % str(__import__("pathlib").Path(__file__).parent)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=280)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


# -- with PyG installed (the ``pyg`` extra) ------------------------------------------------

def pyg_data(attrs):
    torch = pytest.importorskip("torch")
    Data = pytest.importorskip("torch_geometric.data").Data
    return Data(**{k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in attrs.items()})


def test_pyg_cora_trains_to_the_npz_bits_on_the_cluster(client2, cora):
    data = pyg_data(cora)
    res = dh.gcn.fit(data, nparts=2, client=client2, epochs=3, partition="rp",
                     progress=False)
    ref = dh.gcn.local_fit("cora", 2, epochs=3, partition="rp")   # the npz's Program
    assert all(np.array_equal(p, q) for p, q in zip(res.params, ref.params))
    assert np.array_equal(res.logits, ref.logits)
    assert res.report()["input"]["pyg"]["split"] == "masks"
    assert dh.gcn.plan(data, 4, partition="rp", compare_rp=False)["plan"] == \
        dh.gcn.plan("cora", 4, partition="rp", compare_rp=False)["plan"]


def test_pyg_gcnconv_agrees_on_a_directed_graph():
    """Our layer is PyG's GCNConv (source_to_target, self loops, symmetric degree
    normalisation) on a directed graph with given weights."""
    rng = np.random.default_rng(0)
    n, f, c = 30, 5, 3
    ei = rng.integers(0, n, (2, 90))
    ei = np.unique(ei[:, ei[0] != ei[1]], axis=1)      # PyG counts a repeated edge twice
    x = rng.random((n, f))
    data = pyg_data({"edge_index": ei, "x": x, "y": rng.integers(0, c, n),
                     "train_mask": np.ones(n, bool)})
    import torch
    from torch_geometric.nn import GCNConv

    conv = GCNConv(f, c).double()
    with torch.no_grad():
        want = conv(data.x, data.edge_index).numpy()
    W = conv.lin.weight.detach().numpy().T
    b = conv.bias.detach().numpy()
    g = as_graph(data)
    raw = np.asarray(x)                                   # our X is row-normalised; not here
    got = g.A @ raw @ W + b
    assert not g.symmetric
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
