"""Workflows across hosts: a scheduler on host 0 and one worker on each other host, each
host a network namespace with its own stack and a shaped link (daskhpc.testing.hosts).

A run across hosts equals the same run on a LocalCluster; a worker host cut off mid-run
(its processes alive) costs a restart from the checkpoint on the hosts left, not the run,
and the cut-off worker does not come back into the run when its link returns.
"""

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

BIN = os.path.dirname(sys.executable)
#: Workflows without --checkpoint (one call per repetition: nothing to resume)
NO_CHECKPOINT = {"allreduce"}
#: The option that makes a small run long enough to be cut in the middle.
LONGER = {"cpals": ("--iters", "1000"), "ssgd": ("--epochs", "60"),
          "gcn": ("--epochs", "300"), "linear": ("--epochs", "40")}


def untimed(section):
    """A report section without its timings."""
    return {k: v for k, v in (section or {}).items() if not k.endswith("_s")}


def daskhpc(vc, argv, cwd, env=None):
    """``daskhpc ARGV`` on host 0 (None: on this machine's LocalCluster)."""
    cmd = [os.path.join(BIN, "daskhpc"), *argv]
    if vc is None:
        return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=900)
    return vc.run(0, cmd, cwd=cwd, capture_output=True, text=True, timeout=900,
                  env={**os.environ, **(env or {})})


def completed(ck) -> int:
    """Steps the run recorded complete in its checkpoint (a worker writes a step's files
    before the run knows they are all there)."""
    try:
        return len(json.loads((ck / "manifest.json").read_text())["complete"])
    except (OSError, ValueError):
        return 0


def small(name: str, longer: bool = False) -> list[str]:
    args = [str(a) for a in _workflows.load(name).small_run()]
    if longer:
        flag, value = LONGER[name]
        args[args.index(flag) + 1] = value
    return args


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Four hosts at 1 Gbit/s: the scheduler on host 0, a worker on each of hosts 1-3."""
    with hosts.virtual_cluster(4, rate="1gbit") as vc:
        sf = vc.start_dask(str(tmp_path_factory.mktemp("dask")))
        yield vc, sf


def across_and_local(name, cluster, tmp_path):
    vc, sf = cluster
    args = small(name)
    ck = [] if name in NO_CHECKPOINT else ["--checkpoint", str(tmp_path / "ck")]
    multi = daskhpc(vc, ["run", name, *args, "--scheduler-file", sf, *ck, "--json",
                         "multi.json", "--no-progress"], tmp_path)
    assert multi.returncode == 0, multi.stderr
    local_ck = ["--checkpoint", str(tmp_path / "ck-local")] if ck else []
    local = daskhpc(None, ["run", name, *args, "--workers", "3", *local_ck, "--json",
                           "local.json", "--no-progress"], tmp_path)
    assert local.returncode == 0, local.stderr
    got = json.loads((tmp_path / "multi.json").read_text())
    ref = json.loads((tmp_path / "local.json").read_text())
    assert untimed(got.get("quality")) == untimed(ref.get("quality"))
    assert got["serial_check"]["identical"] is True, got["serial_check"]
    # the bytes that crossed the links are those of the run on one host, and the plan's
    # (up to the containers' headers where the plan counts the values only: an array's,
    # a sparse block's three)
    if got.get("measured", {}).get("planned_bytes") is not None:
        mine = got["measured"]
        assert mine["inter_worker_bytes_sizeof"] == ref["measured"]["inter_worker_bytes_sizeof"]
        assert 0 <= mine["inter_worker_bytes_sizeof"] - mine["planned_bytes"] \
            <= 512 * mine["inter_worker_messages"], mine
    # the workers are on hosts 1-3, each on its host's own address
    vc, _ = cluster
    hosts_used = {w.split("//")[1].rsplit(":", 1)[0]
                  for w in (got.get("placement") or {}).values()}
    assert hosts_used <= set(vc.addresses[1:])
    return got


@pytest.mark.timeout(900)
def test_cpals_across_hosts_equals_the_local_run(cluster, tmp_path):
    got = across_and_local("cpals", cluster, tmp_path)
    assert len(set(got["placement"].values())) == 3


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("name", sorted(n for n in _workflows.available()
                                         if _workflows.load(n).small_run() and n != "cpals"))
def test_every_workflow_across_hosts_equals_the_local_run(name, cluster, tmp_path):
    across_and_local(name, cluster, tmp_path)


def cut_mid_run(name: str, tmp_path, restore_after: float | None):
    """Run ``name`` across 4 hosts, cut host 2 once its checkpoint holds 3 units, and
    restore it ``restore_after`` s later (None: never); the report and the local run."""
    timeout = "5"                      # seconds of silence before a worker counts lost
    with hosts.virtual_cluster(4, rate="1gbit") as vc:
        sf = vc.start_dask(str(tmp_path / "dask"))
        ck = tmp_path / "ck"
        args = [*small(name, longer=True), "--checkpoint", str(ck)]
        env = {**os.environ, "DASK_DASKHPC__RUNTIME__HOST_TIMEOUT": timeout}
        proc = vc.popen(0, [os.path.join(BIN, "daskhpc"), "run", name, *args,
                            "--scheduler-file", sf, "--json", "cut.json", "--no-progress"],
                        cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True)
        # cut once three units are safe: mid-run on any machine, however fast or loaded
        deadline = time.monotonic() + 600
        while completed(ck) < 3:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.02)
        vc.cut(2)
        t_cut = time.monotonic()
        restored = False
        while proc.poll() is None:
            if restore_after is not None and not restored \
                    and time.monotonic() - t_cut > restore_after:
                vc.restore(2)
                restored = True
            time.sleep(0.05)
        out, err = proc.communicate()
        assert proc.returncode == 0, err
        # the cut-off worker is not taken back once its link returns
        if restored:
            check = vc.run(0, [sys.executable, "-c",
                               "import sys, distributed; "
                               "c = distributed.Client(scheduler_file=sys.argv[1]); "
                               # (the scheduler asked: scheduler_info() is a cache)
                               "print(*sorted(c.sync(c.scheduler.identity, "
                               "n_workers=-1)['workers']))", sf],
                           capture_output=True, text=True, timeout=120)
            assert vc.addresses[2] not in check.stdout and check.returncode == 0, check
        host2 = vc.addresses[2]
    got = json.loads((tmp_path / "cut.json").read_text())
    local = daskhpc(None, ["run", name, *args[:-2], "--workers", "3", "--json", "local.json",
                           "--no-progress"], tmp_path)
    assert local.returncode == 0, local.stderr
    ref = json.loads((tmp_path / "local.json").read_text())
    assert untimed(got.get("quality")) == untimed(ref.get("quality"))
    recs = got["recovery"]["recoveries"]
    assert len(recs) == 1 and [host2 in a for a in recs[0]["lost"]] == [True], recs
    rec = recs[0]
    # what was redone: ranges and a count, never one entry per unit
    assert rec["rerun_count"] == sum(b - a + 1 for a, b in rec["rerun"]) >= 1
    assert len(json.dumps(rec)) < 2000
    assert "recovered" in out and f"({rec['rerun_count']:,} " in out
    return rec


@pytest.mark.timeout(900)
def test_a_cut_host_costs_a_restart_and_does_not_come_back(tmp_path):
    cut_mid_run("cpals", tmp_path, restore_after=6.5)


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("name", sorted(set(LONGER) - {"cpals"}))
def test_every_workflow_survives_a_cut_host(name, tmp_path):
    cut_mid_run(name, tmp_path, restore_after=None)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_a_slow_link_is_named_by_the_report_and_the_dashboard(tmp_path):
    # host 2's link at a tenth of the others' once the checkpoint holds 3 epochs
    with hosts.virtual_cluster(4, rate="100mbit") as vc:
        sf = vc.start_dask(str(tmp_path / "dask"))
        ck = tmp_path / "ck"
        proc = vc.popen(0, [os.path.join(BIN, "daskhpc"), "run", "gcn", *small("gcn", longer=True),
                            "--checkpoint", str(ck), "--scheduler-file", sf, "--json",
                            "slow.json", "--no-progress"],
                        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 600
        while completed(ck) < 3:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.02)
        vc.shape(2, "10mbit")
        out, err = proc.communicate(timeout=1500)
        assert proc.returncode == 0, err
        board = vc.run(0, [sys.executable, "-c",
                           "import sys, distributed; "
                           "c = distributed.Client(scheduler_file=sys.argv[1]); "
                           "print(c.run_on_scheduler(lambda dask_scheduler: dask_scheduler"
                           ".plugins['daskhpc-dashboard'].state.waited_for())[0])", sf],
                       capture_output=True, text=True, timeout=120)
        host2 = vc.addresses[2]
    steps = json.loads((tmp_path / "slow.json").read_text())["execution"]["steps"]
    assert host2 in steps["waited_for"] and steps["waited_for_s"] > 0, steps
    assert f"waited for most: {steps['waited_for']}" in out
    assert board.returncode == 0 and host2 in board.stdout, board
