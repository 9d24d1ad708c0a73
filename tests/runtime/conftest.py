"""Fixtures for runtime tests: real worker processes talking over TCP."""

from __future__ import annotations

import dask.config
import pytest

from daskhpc.runtime import connect, worker_addresses

# Both state machines check their invariants after every transition.
VALIDATE = {"distributed.scheduler.validate": True, "distributed.worker.validate": True}


def start_client(n_workers: int):
    """A client owning a fresh LocalCluster of ``n_workers`` validated workers."""
    # The scheduler (in this process) and the worker processes (through their
    # Nanny) take the config as it is when connect() builds them.
    with dask.config.set(VALIDATE):
        return connect(n_workers=n_workers, dashboard_address=":0")


@pytest.fixture(scope="session")
def client3():
    """Three single-threaded workers shared by every test that only submits work."""
    with start_client(3) as client:
        yield client


@pytest.fixture
def make_client():
    """Factory for a private cluster that a test may scale, retire or close."""
    clients = []

    def make(n_workers: int):
        clients.append(start_client(n_workers))
        return clients[-1]

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def workers3(client3):
    """The three worker addresses in stable order; checks nobody scaled the cluster."""
    addresses = worker_addresses(client3)
    assert len(addresses) == 3
    return addresses
