"""Bundled data sets: present, small, documented, and readable through daskhpc.io."""

import doctest
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from daskhpc import datasets
from daskhpc.io import read

DATA_DIR = Path(datasets.__file__).parent / "data"


def test_names_and_paths():
    assert datasets.names() == ["ratings", "cora", "tensor", "libsvm", "libsvm-test"]
    for name in datasets.names():
        assert Path(datasets.path(name)).is_file()
    with pytest.raises(ValueError, match="no bundled data set 'nope'; known: ratings"):
        datasets.path("nope")


def test_bundle_stays_small_and_documented():
    files = sorted(p for p in DATA_DIR.iterdir() if p.is_file())
    assert sum(p.stat().st_size for p in files) < 3_000_000
    provenance = (DATA_DIR.parent / "PROVENANCE.md").read_text()
    for p in files:
        assert f"`{p.name}`" in provenance, p.name
    assert "may not use this information for any commercial" in provenance


@pytest.mark.parametrize("name, fmt, shape, nnz", [
    ("ratings", "ratings", (610, 9724), 100836),
    ("tensor", "tns", (135, 46, 135), 6529),
    ("libsvm", "libsvm", (32561, 123), 451592),
])
def test_paths_read_through_the_generic_reader(name, fmt, shape, nnz):
    s = read(datasets.path(name))
    assert (s.format, s.shape, s.nnz) == (fmt, shape, nnz)


def test_ratings():
    r = datasets.ratings()
    assert r.shape == (610, 9724) and r.nnz == 100836
    assert r.meta["timestamps"].size == 100836 and r.index_maps[1].max() == 193609


def test_tensor():
    t = datasets.tensor()
    assert t.shape == (135, 46, 135) and t.nnz == 6529


def test_libsvm_splits_line_up():
    train, test = datasets.libsvm(), datasets.libsvm("test")
    assert train.shape == (32561, 123) and train.nnz == 451592
    assert test.shape == (16281, 123)
    assert set(np.unique(test.labels)) == {-1.0, 1.0}
    with pytest.raises(ValueError, match="split"):
        datasets.libsvm("validation")


def test_cora():
    g = datasets.cora()
    assert isinstance(g, datasets.GraphData) and g.name == "cora"
    a = g.adjacency
    assert isinstance(a, sp.csr_array) and a.shape == (2708, 2708) and a.dtype == np.float64
    assert a.nnz == 2 * 5278 and abs(a - a.T).max() == 0
    assert isinstance(g.features, sp.csr_array) and g.features.shape == (2708, 1433)
    assert g.features.dtype == np.float64 and set(np.unique(g.features.data)) == {1.0}
    assert g.labels.shape == (2708,) and set(np.unique(g.labels)) == set(range(7))
    assert (g.idx_train.size, g.idx_val.size, g.idx_test.size) == (140, 500, 1000)
    split = np.concatenate((g.idx_train, g.idx_val, g.idx_test))
    assert np.unique(split).size == split.size


def test_docstring_examples():
    assert doctest.testmod(datasets).failed == 0
