"""The CLI plug-in (plan / run / demo) and the public namespace."""

from __future__ import annotations

import json
import time

import pytest
import scipy.io
import scipy.sparse as sp
from spgemm_helpers import random_matrix

import daskhpc.spgemm
from daskhpc import _workflows
from daskhpc.errors import InputError
from daskhpc.report import to_json
from daskhpc.spgemm import _cli
from daskhpc.testing import workflow_call


def plan(argv):
    wf, call, _ = workflow_call("plan", "spgemm", argv)
    return wf.plan(call)


def run(argv, client):
    wf, call, run = workflow_call("run", "spgemm", argv, client)
    return wf.run(call, run)


@pytest.fixture
def mtx(tmp_path):
    a = random_matrix(60, 60, 0.08, 21)
    a.data = abs(a.data)
    path = tmp_path / "a.mtx"
    scipy.io.mmwrite(path, sp.coo_matrix(a))
    return str(path), a


def test_registered():
    assert isinstance(_workflows.load("spgemm"), _cli.Spgemm)


def test_plan_report(mtx):
    path, a = mtx
    rep = plan([path, "--grid", "4x4x4", "--memory-per-worker", "1MB"])
    json.loads(to_json(rep))
    assert rep["workflow"] == "spgemm" and rep["parts"] == 64
    assert rep["quality"]["nnz_c"] == (a @ a).nnz
    assert {"a_bcast", "b_bcast", "fiber", "symbolic"} == set(rep["plan"]["steps"])
    with pytest.raises(InputError, match="square"):
        plan([path, "--grid", "2x3x1"])
    with pytest.raises(InputError, match="square"):
        plan([path, "--parts", "3", "--layers", "1"])
    assert plan([path, "--parts", "3"])["grid"].startswith("1x1x3")


def test_run_report_with_serial_check(client2, mtx, tmp_path):
    path, a = mtx
    rep = run([path, "--aat", "--grid", "2x2x1", "--batches", "2",
                                 "--check-serial"], client2)
    assert rep["serial_check"]["identical"] is True
    assert rep["batches"] == 2 and rep["quality"]["nnz_c"] == (a @ a.T).nnz
    json.loads(to_json(rep))
    rep = run([path, "--grid", "1x1x2", "--consume", "count",
                                 "--check-serial"], client2)
    assert rep["serial_check"]["identical"] is True
    with pytest.raises(InputError, match="--batches"):
        run([path, "--grid", "1x1x1", "--batches", "zero"], client2)


def test_demo_is_quick_and_right(client2):
    t0 = time.perf_counter()
    rep = _cli.Spgemm().demo(client2)
    assert time.perf_counter() - t0 < 20
    assert rep["serial_check"]["identical"] and rep["batches"] > 1
    assert rep["timeline"]["violations"] == []


def test_public_namespace_is_pinned():
    assert set(daskhpc.spgemm.__all__) == {
        "BatchPolicy", "Consumer", "Count", "CscBlock", "Grid", "Keep", "Layout", "MaskedSum",
        "Prune", "SpgemmResult", "Write", "aat", "batch_count", "batch_lower_bound",
        "column_stochastic", "grid_symbolic", "load_batch", "local_multiply",
        "local_symbolic", "mcl_step", "merge", "multiply", "parse_consumer", "plan",
        "triangle_count", "serial_multiply", "prepare", "Setup"}


# -- with the real console script ----------------------------------------

def _console(*argv, timeout=300):
    import os
    import subprocess
    import sys

    exe = os.path.join(os.path.dirname(sys.executable), "daskhpc")
    done = subprocess.run([exe, *map(str, argv)], capture_output=True, text=True,
                          timeout=timeout)
    return done.returncode, done.stdout, done.stderr


@pytest.mark.slow             # CI budget (20 min on 2 cores): default run keeps a lighter test of the same path
def test_run_without_grid_fits_two_workers(mtx):
    # "2 workers do not form a square q x q x 1 grid" before: now 2x2x1 (two cells each)
    path, a = mtx
    code, out, err = _console("run", "spgemm", path, "--workers", "2", "--consume", "count",
                              "--json", "-")
    assert code == 0, err
    rep = json.loads(out)
    assert rep["grid"].startswith("2x2x1") and rep["parts"] == 4
    assert rep["quality"]["nnz_c"] == (a @ a).nnz


def test_plan_reads_a_weighted_edge_list_with_format(tmp_path):
    # SNAP CollegeMsg layout (src dst timestamp), a name that says nothing
    path = tmp_path / "college.data"
    path.write_text("1 2 1082008561\n3 4 1082155839\n5 2 1082414391\n1 2 1082426521\n")
    code, out, err = _console("plan", "spgemm", path, "--format", "snap", "--parts", "2",
                              "--json", "-")
    assert code == 0, err
    rep = json.loads(out)
    assert rep["input"]["shape"] == [5, 5] and rep["input"]["nnz"] == 3    # pattern
    code, out, err = _console("plan", "spgemm", path, "--format", "snap:nope", "--parts", "2")
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        "daskhpc: error: --format: unknown format option 'snap:nope'; options: snap:ignore, "
        "snap:weights"]
