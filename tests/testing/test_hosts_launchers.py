"""``python -m daskhpc.slurm`` across hosts: one task per network-namespace host, the
SLURM_* variables set per task, the shared directory on the common file system, TLS
between hosts, and no ``--interface``: the hosts have no default route (as many compute
nodes), so the launcher must pick each host's own address, not the loopback. A task that
fails ends every other within seconds, with the documented status."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from daskhpc import _workflows
from daskhpc.testing import hosts

pytestmark = pytest.mark.skipif(hosts.unavailable() is not None,
                                reason=f"virtual cluster: {hosts.unavailable()}")


def srun(vc, argv, tmp_path, job="77", env=None):
    """One launcher task per host, as ``srun -N 4 -n 4`` starts them."""
    procs = []
    for rank in range(len(vc)):
        task_env = {**os.environ, "SLURM_PROCID": str(rank), "SLURM_NTASKS": str(len(vc)),
                    "SLURM_JOB_ID": job, "SLURM_JOB_NUM_NODES": str(len(vc)),
                    "SLURM_SUBMIT_DIR": str(tmp_path), **(env or {})}
        log = open(tmp_path / f"task{rank}.log", "w")
        with log:
            procs.append(vc.popen(rank, [sys.executable, "-m", "daskhpc.slurm", *argv],
                                  env=task_env, cwd=tmp_path, stdout=log,
                                  stderr=subprocess.STDOUT))
    return procs


def wait_all(procs, timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    codes = []
    for p in procs:
        try:
            codes.append(p.wait(max(deadline - time.monotonic(), 0.1)))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
                q.wait()
            raise
    return codes


def logs(tmp_path, n) -> str:
    return "\n".join(f"--- task {i}\n" + (tmp_path / f"task{i}.log").read_text()
                     for i in range(n))


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_srun_across_hosts_with_tls_and_no_interface(tmp_path):
    args = [str(a) for a in _workflows.load("ssgd").small_run()]
    args[args.index("--parts") + 1] = "2"
    with hosts.virtual_cluster(4, rate="1gbit") as vc:
        procs = srun(vc, ["ssgd", *args, "--json", "srun.json", "--no-progress"], tmp_path)
        codes = wait_all(procs, 600)
        addresses = vc.addresses
    assert codes == [0, 0, 0, 0], logs(tmp_path, 4)
    got = json.loads((tmp_path / "srun.json").read_text())
    assert got["serial_check"]["identical"] is True
    workers = set(got["placement"].values())
    assert {w.split("://")[0] for w in workers} == {"tls"}
    assert {w.split("//")[1].rsplit(":", 1)[0] for w in workers} == set(addresses[2:])


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_srun_tasks_end_when_the_scheduler_host_is_unreachable(tmp_path):
    with hosts.virtual_cluster(4) as vc:
        vc.cut(0)                                 # the scheduler's host, from the start
        procs = srun(vc, ["--startup-timeout", "20", "ssgd", "ratings", "--parts", "2"],
                     tmp_path)
        codes = wait_all(procs, 300)
    text = logs(tmp_path, 4)
    # the client could not reach the scheduler: every task ends with the client's
    # status, none waits to be killed
    assert codes[1] != 0 and codes == [codes[1]] * 4, text
    assert f"ended the job with status {codes[1]}" in text
