"""Fixtures for dashboard tests: a validated 2-worker cluster over TCP, started by
``connect()`` (so with the daskhpc pages), and headless Chromium."""

from __future__ import annotations

import dask.config
import pytest
from dashboard_browser import Chromium, find_chromium

from daskhpc.runtime import connect

VALIDATE = {"distributed.scheduler.validate": True, "distributed.worker.validate": True}


@pytest.fixture(scope="session")
def dash_client():
    with dask.config.set(VALIDATE):
        client = connect(n_workers=2, dashboard_address="127.0.0.1:0")
    with client:
        yield client


@pytest.fixture(scope="session")
def browser():
    binary = find_chromium()
    if binary is None:
        pytest.skip("needs Chromium (Debian package 'chromium'; .ci/run installs it)")
    b = Chromium(binary)
    yield b
    b.close()
