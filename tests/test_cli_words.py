"""Words and numbers a user can place, through the console script: why an
imbalance is large, what the alpha-beta model leaves out, what ``--check-serial``
compared, and a resumed run that had nothing left to do.

The runs join one two-worker cluster of the session (``--scheduler-address``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import scipy.io
import scipy.sparse as sp

from daskhpc import _workflows, datasets
from daskhpc import load as daskhpc_load

EXE = os.path.join(os.path.dirname(sys.executable), "daskhpc")


def daskhpc(*argv, timeout=600):
    """(exit status, stdout, stderr) of ``daskhpc argv...``."""
    done = subprocess.run([EXE, *map(str, argv)], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "DASK_DASKHPC__RUNTIME__PROGRESS":
                                                "false"})
    return done.returncode, done.stdout, done.stderr


def line(out: str, label: str) -> str:
    found = [x for x in out.splitlines() if x.strip().startswith(label + " ")]
    assert len(found) == 1, out
    return found[0]


@pytest.mark.slow             # CI budget (20 min on 2 cores): a partition of 512 parts
def test_plan_says_why_an_imbalance_cannot_be_small(tmp_path):
    """512 random parts of 610 users: one user alone outweighs an even part 14 times."""
    status, out, err = daskhpc("plan", "ssgd", datasets.path("ratings"), "--parts", "512",
                               "--partition", "random", "--json", tmp_path / "p.json")
    assert status == 0, err
    part = json.loads((tmp_path / "p.json").read_text())["partition"]
    low, bound = part["imbalance_lower_bound"], part["imbalance_bound"]
    assert bound["heaviest"] / bound["even_part"] - 1 == pytest.approx(low)
    assert part["imbalance"] >= low > 10
    assert (f"imbalance {100 * part['imbalance']:.1f}% (no partition can do better than "
            f"{100 * low:.1f}%: the heaviest row has {bound['heaviest']:,} nonzeros where "
            f"an even part has {bound['even_part']:,.0f})") in line(out, "partition")
    status, out, err = daskhpc("plan", "ssgd", datasets.path("ratings"), "--parts", "4",
                               "--partition", "random")
    assert status == 0, err
    assert "no partition can" not in out          # a small bound is not worth a word


@pytest.mark.slow             # CI budget (20 min on 2 cores)
def test_allreduce_says_what_the_model_leaves_out(client2, tmp_path):
    join = ["--scheduler-address", client2.scheduler.address]
    small = ["run", "allreduce", "--N", "20000", "--density", "0.01", "--parts", "2", *join]
    # a model of 1 ns per message: any call on a cluster takes far longer
    status, out, err = daskhpc(*small, "--alpha", "1e-9", "--beta", "1e-15",
                               "--json", tmp_path / "a.json")
    assert status == 0, err
    q = json.loads((tmp_path / "a.json").read_text())["quality"]
    ratio = q["measured_call_s"] / q["predicted_s"]
    # and how much of what it leaves out there was per step
    steps = q["steps_per_call"]
    per_step = (q["measured_call_s"] - q["predicted_s"]) / steps
    per_step = f"{1e3 * per_step:.3g} ms" if per_step < 1 else f"{per_step:.3g} s"
    assert line(out, "model").strip() == (
        f"model      measured {ratio:.0f}x the alpha-beta prediction, which counts only "
        "message latency and bytes, not task scheduling, Python per step, serialisation "
        f"or waiting for the slowest rank ({per_step} per step measured beyond it, "
        f"{steps} steps a call)")
    # 10 s per message: the prediction is above the measurement, nothing to explain
    status, out, err = daskhpc(*small, "--alpha", "10", "--beta", "1e-9")
    assert status == 0, err
    assert "alpha-beta" not in out


@pytest.fixture
def mtx(tmp_path):
    a = sp.random_array((120, 120), density=0.05, rng=7, format="coo")
    a.data = a.data.round(1) - 0.5
    path = tmp_path / "a.mtx"
    scipy.io.mmwrite(path, a)
    return path


@pytest.mark.slow             # CI budget (20 min on 2 cores): default run keeps a lighter test of the same path
def test_spgemm_says_what_check_serial_compared_and_a_finished_resume(client2, mtx,
                                                                     tmp_path):
    run = ["run", "spgemm", mtx, "--grid", "1x1x2", "--batches", "3", "--check-serial",
           "--scheduler-address", client2.scheduler.address]
    status, out, err = daskhpc(*run, "--json", tmp_path / "keep.json")
    assert status == 0, err
    check = json.loads((tmp_path / "keep.json").read_text())["serial_check"]
    assert line(out, "serial").strip().startswith(
        f"serial     C matches scipy's product: every value to {check['tolerance']:.2g} "
        "(1e-12 of its largest |entry|), max |diff| ")
    assert "identical" not in out
    count = [*run, "--consume", "count", "--checkpoint", tmp_path / "ck"]
    status, out, err = daskhpc(*count, "--json", tmp_path / "count.json")
    assert status == 0, err
    check = json.loads((tmp_path / "count.json").read_text())["serial_check"]
    assert check["compared"] == "structural_nnz, sum"
    said = line(out, "serial")
    assert (f"the count of C matches scipy's product: structural nnz "
            f"{check['structural_nnz']:,} = {check['structural_nnz_ref']:,}") in said
    assert f"nnz {check['nnz']:,} here, {check['nnz_ref']:,} in scipy's (not compared" in said
    status, out, err = daskhpc(*count, "--resume", "--json", tmp_path / "again.json")
    assert status == 0, err
    assert "already complete at batch 3: the checkpoint holds all 3 batches, nothing ran" \
        in line(out, "resumed")
    rep = json.loads((tmp_path / "again.json").read_text())
    assert rep["checkpoint"]["already_complete"] == {"units": 3, "unit_name": "batches"}


RESUMABLE = {
    "ssgd": ([datasets.path("ratings"), "--epochs", "2", "--partition", "random"],
             "epoch 2", "epochs"),
    "cpals": ([datasets.path("tensor"), "--rank", "3", "--iters", "2", "--tol", "0",
               "--partition", "random"], "iteration 2", "iterations"),
    "gcn": (["cora", "--epochs", "2", "--partition", "rp"], "epoch 2", "epochs"),
    "linear": ([datasets.path("libsvm"), "--test", datasets.path("libsvm-test"),
                "--epochs", "2", "--batch", "512"], "epoch 2", "epochs"),
}


@pytest.mark.slow             # CI budget: two console runs per workflow
@pytest.mark.parametrize("workflow", sorted(RESUMABLE))
def test_a_finished_run_resumed_says_already_complete(client2, tmp_path, workflow):
    argv, at, units = RESUMABLE[workflow]
    run = ["run", workflow, *argv, "--parts", "2", "--checkpoint", tmp_path / "ck",
           "--scheduler-address", client2.scheduler.address]
    status, first, err = daskhpc(*run)
    assert status == 0, err
    assert "already complete" not in first and "traffic" in first
    status, out, err = daskhpc(*run, "--resume", "--json", tmp_path / "r.json")
    assert status == 0, err
    assert line(out, "resumed").strip() == (
        f"resumed    already complete at {at}: the checkpoint holds all 2 {units}, nothing "
        "ran (the numbers below are the saved ones)")
    assert "0 B in 0 messages" not in out
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["recovery"]["already_complete"] == {"units": 2, "unit_name": units}


@pytest.mark.parametrize("workflow", [
    # CI budget (20 min on 2 cores): two in the default run, the others under -m slow
    name if name in ("cpals", "ssgd") else pytest.param(name, marks=pytest.mark.slow)
    for name in sorted(_workflows.available())])
def test_save_is_acknowledged_in_the_summary_and_the_report(client3, tmp_path, workflow):
    """``--save DIR`` says where the result went, in the summary and the JSON report."""
    saved = tmp_path / "model"
    status, out, err = daskhpc("run", workflow, *_workflows.load(workflow).small_run(),
                               "--scheduler-address", client3.scheduler.address,
                               "--save", saved, "--json", tmp_path / "r.json")
    assert status == 0, err
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["saved"]["dir"] == str(saved)
    assert str(saved) in line(out, "saved")
    again = daskhpc_load(saved)
    assert again.workflow == workflow and again.report()["saved"]["dir"] == str(saved)
