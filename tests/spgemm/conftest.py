"""Fixtures for spgemm tests: one validated 2-worker cluster over TCP for the session."""

from __future__ import annotations

import dask.config
import pytest

from daskhpc.runtime import connect

VALIDATE = {"distributed.scheduler.validate": True, "distributed.worker.validate": True}


@pytest.fixture(scope="session")
def client2():
    with dask.config.set(VALIDATE):
        client = connect(n_workers=2, dashboard_address=":0")
    with client:
        yield client
