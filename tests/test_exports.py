"""Exports a user of the field reads with their own tools: CP-ALS as SPLATT's
``modeN.mat``/``lambda.mat`` text, GCN weights by the names of a PyG ``GCNConv`` model."""

from __future__ import annotations

import numpy as np
import pytest

from daskhpc import cpals, datasets, gcn


def test_splatt_text_reads_back_to_the_model(tmp_path):
    r = cpals.serial_fit(datasets.path("tensor"), 4, iters=2, tol=0)
    paths = r.to_splatt(tmp_path)
    assert [p.rsplit("/", 1)[1] for p in paths] == ["mode1.mat", "mode2.mat", "mode3.mat",
                                                   "lambda.mat"]
    factors = [np.loadtxt(p, ndmin=2) for p in paths[:-1]]
    weights = np.loadtxt(paths[-1], ndmin=1)
    for F, G in zip(r.factors, factors):
        assert G.shape == F.shape and np.allclose(G, F, rtol=1e-8, atol=1e-300)
    assert np.allclose(weights, r.weights, rtol=1e-6)


def test_gcn_weights_load_into_a_pyg_model():
    r = gcn.serial_fit("cora", epochs=1)
    sd = r.to_pyg_state_dict()
    assert sd["conv1.lin.weight"].shape == r.params[0].T.shape
    assert np.array_equal(sd["conv2.bias"], r.params[3])
    torch = pytest.importorskip("torch")
    pyg = pytest.importorskip("torch_geometric.nn")

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = pyg.GCNConv(r.params[0].shape[0], r.params[0].shape[1])
            self.conv2 = pyg.GCNConv(r.params[2].shape[0], r.params[2].shape[1])

    net = Net().double()          # our weights are float64: loaded without a cast
    net.load_state_dict({k: torch.from_numpy(v) for k, v in sd.items()})
    assert np.array_equal(net.conv1.lin.weight.detach().numpy(), r.params[0].T)
