"""workflows/benchmarks/paper_inputs.py at 1/10,000 of the papers' sizes: the counts and
shapes asked for, distinct nonzeros, the files the readers read, and the memory guard."""

from __future__ import annotations

import importlib.util
import json
import pathlib

import numpy as np
import pytest

import daskhpc as dh
from daskhpc.io import read

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "workflows" / "benchmarks" / \
    "paper_inputs.py"
pq = pytest.importorskip("pyarrow.parquet")


@pytest.fixture(scope="module")
def gen():
    spec = importlib.util.spec_from_file_location("paper_inputs", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def made(gen, tmp_path_factory):
    d = tmp_path_factory.mktemp("paper")
    gen.main(["--scale", "1e-4", "--dir", str(d)])
    return d, json.loads((d / "inputs.json").read_text())["inputs"]


def parquet_rows(path) -> int:
    return sum(pq.read_metadata(f).num_rows for f in sorted(path.glob("*.parquet")))


def test_ratings_and_tensor(made):
    d, info = made
    r = read(d / "ratings.csv")
    assert r.matrix.nnz == info["ratings"]["nnz"] == 10_000
    assert r.matrix.shape == (4802, 178) == tuple(info["ratings"]["shape"])
    assert parquet_rows(d / "ratings.parquet") == 10_000
    assert set(np.unique(r.matrix.data)) <= set(np.arange(1, 11) / 2)
    t = read(d / "tensor.tns")
    assert t.tensor.nnz == 10_000 and len(info["tensor"]["shape"]) == 3
    assert parquet_rows(d / "tensor.parquet") == 10_000


def test_graph_and_matrix(made):
    d, info = made
    g = dh.datasets.planetoid(d / "graph.npz")
    n = info["graph"]["shape"][0]
    assert g.adjacency.shape == (n, n) and g.adjacency.nnz == info["graph"]["nnz"] == 11_461
    assert g.features.shape == (n, 602) and g.labels.max() < 41
    deg = np.diff(g.adjacency.indptr)
    assert deg.min() >= 1 and deg.max() > 20 * np.median(deg)        # power-law, not flat
    assert np.load(d / "features.npy").shape == (n, 602)
    assert parquet_rows(d / "edges.parquet") == 11_461
    A = read(d / "matrix.mtx").matrix
    assert A.nnz == info["matrix"]["nnz"] == 1_000
    B = (A != 0).astype(np.int64)
    # the flops the script reports: sum over k of nnz(A[:, k]) nnz(A[k, :])
    assert info["matrix"]["flops_AA"] == int(np.dot(np.diff(B.tocsc().indptr),
                                                    np.diff(B.tocsr().indptr)))


def test_pairs_are_distinct_with_the_degrees_asked(gen):
    rng = np.random.default_rng(1)
    deg = gen.degrees(rng, 300, 6_000, 0.8, 25)
    assert deg.sum() == 6_000 and deg.min() >= 1 and deg.max() == 25
    # hot low columns: many repeats to draw again
    keys = gen.distinct_pairs(rng, 7, deg, 100, lambda k: rng.integers(0, 100, k) ** 2 // 100)
    assert np.array_equal(keys, np.unique(keys))
    assert np.array_equal(np.bincount(keys // 100 - 7, minlength=300), deg)


def test_rows_that_cannot_be_filled_are_refused(gen):
    rng = np.random.default_rng(2)
    with pytest.raises(ValueError, match="distinct columns"):
        gen.distinct_pairs(rng, 0, np.array([3, 5]), 10, lambda k: rng.integers(0, 4, k))


def test_the_guard_stops_with_one_line(gen, monkeypatch, tmp_path):
    monkeypatch.setattr(gen, "mem_available", lambda: 1 << 20)
    with pytest.raises(SystemExit) as e:
        gen.main(["ratings", "--scale", "0.01", "--dir", str(tmp_path)])
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("ratings: needs about") and "MemAvailable" in msg
    assert not (tmp_path / "ratings.csv").exists()
    assert gen.mem_available.__name__ == "<lambda>" and gen.guard(0, "x") is None
