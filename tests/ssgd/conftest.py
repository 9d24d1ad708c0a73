"""Fixtures for SSGD tests: small inputs (the clusters are tests/conftest.py's)."""

from __future__ import annotations

import dask.config
import numpy as np
import pytest

from daskhpc import datasets


@pytest.fixture(scope="session")
def ml_small():
    """ml-latest-small as a SparseInput (610 x 9724, 100836 ratings)."""
    return datasets.ratings()


@pytest.fixture
def tiny():
    """A 12 x 8 ratings matrix with every row and column used (triplets, shape)."""
    rng = np.random.default_rng(3)
    rows, cols = [], []
    for i in range(12):
        for j in rng.choice(8, size=3, replace=False):
            rows.append(i)
            cols.append(int(j))
    rows += list(range(8))
    cols += list(range(8))
    key = np.unique(np.array(rows) * 8 + np.array(cols))
    r, c = key // 8, key % 8
    return r, c, rng.integers(1, 6, r.size).astype(float), (12, 8)


@pytest.fixture(params=["direct", "graph"])
def exchange(request):
    """Both exchange modes (daskhpc.runtime.exchange): every distributed SSGD test must hold
    in each, with the same numbers."""
    with dask.config.set({"daskhpc.runtime.exchange": request.param}):
        yield request.param
