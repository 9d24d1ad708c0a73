"""Start-up of ``daskhpc run``: every workflow reads and checks its input
before the cluster starts, so a missing or malformed file costs no cluster start-up and
ends with one line and exit status 2, before any ``dashboard:`` line.

The console script runs for real.
"""

import os
import shutil
import subprocess
import sys

import pytest

DASKHPC = shutil.which("daskhpc", path=os.path.dirname(sys.executable)) or "daskhpc"

#: workflow -> (the name of its input file, extra options)
WORKFLOWS = {
    "ssgd": ("ratings.csv", []),
    "cpals": ("tensor.tns", []),
    "gcn": ("edges.txt", []),
    "spgemm": ("matrix.mtx", []),
    "linear": ("train.libsvm", []),
    "allreduce": ("rank0.npy", []),
}


def _run(*argv, cwd):
    return subprocess.run([DASKHPC, *map(str, argv)], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


# CI budget (20 min on 2 cores): a malformed file in the default run of test_io and the
# readers' tests; every workflow's console script with it under -m slow
@pytest.mark.parametrize("problem", ["missing", pytest.param("wrong-format", marks=pytest.mark.slow)])
@pytest.mark.parametrize("workflow", sorted(WORKFLOWS))
def test_bad_input_fails_before_the_cluster_starts(workflow, problem, tmp_path):
    name, extra = WORKFLOWS[workflow]
    if problem == "wrong-format":
        # text where every reader expects numbers, a banner, index:value or a .npy header
        (tmp_path / name).write_text("hello world\nthis is not the format\n")
    r = _run("run", workflow, name, "--workers", 1, "--no-progress", *extra, cwd=tmp_path)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2, r.stderr
    assert "dashboard:" not in r.stderr, r.stderr          # no cluster was started
    assert len(lines) == 1 and lines[0].startswith("daskhpc: error:"), r.stderr
    assert name in lines[0], r.stderr                       # the line names the file
