"""Fixtures for SSGD tests: small inputs, and one real cluster (worker processes, TCP)."""

from __future__ import annotations

import dask.config
import numpy as np
import pytest

from daskhpc import datasets

# Both state machines check their invariants after every transition.
VALIDATE = {"distributed.scheduler.validate": True, "distributed.worker.validate": True}


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


@pytest.fixture(scope="session")
def client4():
    """Four single-threaded worker processes over TCP, validated, shared by the session."""
    from daskhpc.runtime import connect

    with dask.config.set(VALIDATE):
        with connect(n_workers=4, dashboard_address=":0") as client:
            yield client
