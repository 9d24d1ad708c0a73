"""Fixtures for dashboard tests: headless Chromium (the cluster, ``dash_client``, is the
shared one of tests/conftest.py, started by ``connect()``: with the daskhpc pages)."""

from __future__ import annotations

import pytest
from dashboard_browser import Chromium, find_chromium


@pytest.fixture(scope="session")
def browser():
    binary = find_chromium()
    if binary is None:
        pytest.skip("needs Chromium (Debian package 'chromium'; .ci/run installs it)")
    b = Chromium(binary)
    yield b
    b.close()
