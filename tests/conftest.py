"""Shared fixtures: where the real data lives, and the validated clusters every test folder
uses (real worker processes over TCP, built by ``daskhpc.testing.validated_client``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("DASKHPC_SHARED_DATA", ROOT.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA


def _session_client(n: int):
    from daskhpc.testing import validated_client

    with validated_client(n) as client:
        yield client


@pytest.fixture(scope="session")
def client2():
    """Two single-threaded workers shared by the session (SpGEMM, workflows)."""
    yield from _session_client(2)


@pytest.fixture(scope="session")
def client3():
    """Three single-threaded workers shared by every test that only submits work."""
    yield from _session_client(3)


@pytest.fixture(scope="session")
def client4():
    """Four single-threaded workers (one SSGD part per worker at K = 4)."""
    yield from _session_client(4)


@pytest.fixture(scope="session")
def dash_client():
    """Two workers for the dashboard pages (their own: the pages show one run)."""
    yield from _session_client(2)


@pytest.fixture
def make_client():
    """Factory for a private cluster that a test may scale, kill workers of, or close."""
    from daskhpc.testing import validated_client

    clients = []

    def make(n_workers: int):
        clients.append(validated_client(n_workers))
        return clients[-1]

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def workers3(client3):
    """The three worker addresses in stable order; checks nobody scaled the cluster."""
    from daskhpc.runtime import worker_addresses

    addresses = worker_addresses(client3)
    assert len(addresses) == 3
    return addresses
