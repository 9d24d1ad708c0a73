"""Unlabeled nodes (label -1, or NaN in float labels) are the normal case of
semi-supervised node classification: allowed outside the splits, refused inside one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import daskhpc as dh
from daskhpc import datasets

EXE = str(Path(sys.executable).with_name("daskhpc"))


def _cora_npz(path, labels):
    with np.load(datasets.path("cora")) as f:
        arrays = {k: f[k] for k in f.files}
    arrays["labels"] = labels
    np.savez(path, **arrays)
    return str(path)


@pytest.fixture(scope="module")
def unlabeled(tmp_path_factory):
    """Cora with every node outside train/val/test unlabeled (-1): 1,068 of 2,708."""
    with np.load(datasets.path("cora")) as f:
        y = f["labels"].copy()
        inside = np.concatenate([f["idx_train"], f["idx_val"], f["idx_test"]])
    out = np.full_like(y, -1)
    out[inside] = y[inside]
    return _cora_npz(tmp_path_factory.mktemp("g") / "cora-unlabeled.npz", out), inside


def test_unlabeled_nodes_outside_the_splits_change_nothing(unlabeled):
    path, _ = unlabeled
    a = dh.gcn.serial_fit(path, epochs=30)
    b = dh.gcn.serial_fit("cora", epochs=30)
    assert a.report()["input"]["unlabeled"] == 1068
    qa, qb = a.report()["quality"], b.report()["quality"]
    assert qa["final_test_acc"] == qb["final_test_acc"] > 0.7
    assert all(np.array_equal(p, q) for p, q in zip(a.params, b.params))


def test_float_labels_with_nan_are_unlabeled(unlabeled, tmp_path):
    _, inside = unlabeled
    with np.load(datasets.path("cora")) as f:
        y = f["labels"].astype(float)
    y[np.setdiff1d(np.arange(y.size), inside)] = np.nan
    res = dh.gcn.serial_fit(_cora_npz(tmp_path / "nan.npz", y), epochs=2)
    assert res.report()["input"]["unlabeled"] == 1068


@pytest.mark.slow             # CI budget (20 min on 2 cores): default run keeps a lighter test of the same path
def test_the_command_line_trains_on_it_and_refuses_an_unlabeled_split_node(unlabeled,
                                                                           tmp_path):
    path, inside = unlabeled
    out = tmp_path / "r.json"
    done = subprocess.run([EXE, "run", "gcn", path, "--workers", "2", "--epochs", "30",
                           "--check-serial", "--json", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rep = json.loads(out.read_text())
    assert rep["serial_check"]["identical"] is True
    assert rep["quality"]["final_test_acc"] == \
        dh.gcn.serial_fit("cora", epochs=30).report()["quality"]["final_test_acc"]
    with np.load(path) as f:
        y = f["labels"].copy()
    y[inside[200]] = -1                                  # a validation node
    bad = subprocess.run([EXE, "run", "gcn", _cora_npz(tmp_path / "bad.npz", y)],
                         capture_output=True, text=True, timeout=280)
    assert bad.returncode == 2
    lines = [x for x in bad.stderr.splitlines() if x.startswith("daskhpc:")]
    assert lines == [f"daskhpc: error: the val split holds node {int(inside[200])}, which "
                     "has no label (1 such node(s); unlabeled nodes may only lie outside the "
                     "train, validation and test sets)"]
    assert "dashboard" not in bad.stderr
