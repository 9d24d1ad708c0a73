"""The Workflow protocol from outside the package: a small workflow defined in this
folder (``toysum.py``), registered with one entry point in a distribution made by the
test, runs through ``fit``, ``plan``, the command line, checkpoint/resume and a killed
worker; no file of the package names it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def registered(tmp_path_factory):
    """A distribution ``toysum-test`` whose one entry point registers ``ToySum``, on
    sys.path and PYTHONPATH (the workers and the console script import it too)."""
    site = tmp_path_factory.mktemp("site")
    info = site / "toysum_test-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toysum-test\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text('[daskhpc.workflows]\ntoysum = toysum:ToySum\n')
    path = os.pathsep.join([str(site), str(HERE)])
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(HERE))
        mp.syspath_prepend(str(site))
        mp.setenv("PYTHONPATH", path + os.pathsep + os.environ.get("PYTHONPATH", ""))
        yield path


@pytest.fixture(scope="module")
def toy_client(registered):
    from daskhpc.testing import validated_client

    with validated_client(3) as client:      # started with the PYTHONPATH above
        yield client


def reference(K, iters):
    import toysum
    from daskhpc.comm import run_local

    o = toysum.Options(iters=iters)
    idx, val = toysum.vector("random", o)
    parts = [dict(s, n=idx.size) for s in toysum.statics(idx, val, K)]
    finals, reports = run_local(toysum.program(K, iters), parts)
    return np.concatenate(finals), [toysum.row(u, r)["total"] for u, r in enumerate(reports)]


def test_the_entry_point_registers_the_class(registered):
    from daskhpc import _workflows

    wf = _workflows.load("toysum")
    assert type(wf).__name__ == "ToySum" and isinstance(wf, _workflows.Workflow)
    assert wf.warmup("run") == [] and wf.panels() == {}


@pytest.mark.parametrize("exchange", ["direct", "graph"])
def test_fit_equals_run_local(toy_client, exchange):
    import toysum

    want, totals = reference(3, 4)
    res = toysum.fit("random", 3, iters=4, client=toy_client, exchange=exchange,
                     check_serial=True)
    rep = res.report()
    assert [h["total"] for h in res.history] == totals
    assert rep["serial_check"]["identical"] is True
    assert rep["execution"]["exchange"] == exchange
    # a dense allreduce of one word per part: bytes as the plan says, on 3 workers
    assert rep["measured"]["inter_worker_messages"] == rep["measured"]["planned_messages"] > 0


def test_plan_and_the_command_line(registered, toy_client, tmp_path):
    from daskhpc.testing import workflow_call

    wf, call, _ = workflow_call("plan", "toysum", ["random", "--parts", "4"])
    assert wf.plan(call)["plan"]["tot_msgs"] == 8          # recursive doubling, 2 rounds
    exe = Path(sys.executable).with_name("daskhpc")
    out = tmp_path / "r.json"
    # the module's cluster, joined (a cluster of its own costs the CI budget ~8 s)
    done = subprocess.run([str(exe), "run", "toysum", "random", "--scheduler-address",
                           toy_client.scheduler.address, "--parts", "2", "--iters", "3",
                           "--check-serial", "--json", str(out)],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    rep = json.loads(out.read_text())
    assert rep["workflow"] == "toysum" and rep["serial_check"]["identical"] is True
    assert [round(rep["quality"]["total"], 9)] == [round(reference(2, 3)[1][-1], 9)]
    bad = subprocess.run([str(exe), "run", "toysum", "random", "--iters", "0"],
                         capture_output=True, text=True, timeout=280)
    assert bad.returncode == 2 and "--iters must be at least 1" in bad.stderr
    assert "dashboard" not in bad.stderr                    # refused before any cluster


def test_checkpoint_resume_and_a_killed_worker(registered, make_client, tmp_path, unit_tasks):
    import toysum
    from daskhpc.testing import KillOnce, TaskKey

    want, totals = reference(3, 6)
    client = make_client(3)
    ck = tmp_path / "ck"
    first = toysum.fit("random", 3, iters=3, client=client, checkpoint=str(ck))
    assert [h["total"] for h in first.history] == totals[:3]
    # the rest of the run: resumed from iteration 3, a worker killed in iteration 4 (the
    # resumed program's second unit: its steps count from the first unit it runs)
    per_unit = toysum.program(3, 1).nsteps
    client.register_plugin(KillOnce(TaskKey("toysum-", {2: 2 * per_unit - 1}),
                                    str(tmp_path / "killed")), name="kill")
    rest = toysum.fit("random", 3, iters=6, client=client, checkpoint=str(ck), resume=True,
                      check_serial=True)
    rep = rest.report()
    assert (tmp_path / "killed").exists()
    assert rep["recovery"]["resumed_from"] == 3 and len(rep["recovery"]["recoveries"]) == 1
    assert [h["total"] for h in rest.history] == totals
    assert rep["serial_check"]["identical"] is True
