"""A run that joins a scheduler with no worker waits (bounded) for one, then says so.

Before, ``daskhpc run allreduce --scheduler-address A`` on a scheduler whose workers had
not registered yet failed with ``ZeroDivisionError: integer modulo by zero``.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from distributed import LocalCluster

DASKHPC = os.path.join(os.path.dirname(sys.executable), "daskhpc")


@pytest.fixture(scope="module")
def empty_scheduler():
    with LocalCluster(n_workers=0, processes=False, protocol="tcp", host="127.0.0.1",
                      dashboard_address="127.0.0.1:0") as cluster:
        yield cluster.scheduler_address


def test_the_command_line_names_the_scheduler_without_workers(empty_scheduler):
    env = {**os.environ, "DASK_DASKHPC__RUNTIME__WORKER_TIMEOUT": "0.5"}
    out = subprocess.run([DASKHPC, "run", "allreduce", "--N", "1000",
                          "--scheduler-address", empty_scheduler],
                         capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 1, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last == (f"daskhpc: failed: no worker joined the scheduler at {empty_scheduler} in 0.5 s: "
                    "start workers for it, or wait longer (worker_timeout=SECONDS, or "
                    "daskhpc.runtime.worker-timeout)"), out.stderr
    assert "Traceback" not in out.stderr
