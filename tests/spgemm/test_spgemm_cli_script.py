"""``daskhpc run spgemm`` through the real console script: inputs checked before the
cluster starts, and ``--consume count --check-serial`` compares what it says it does."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import numpy as np
import scipy.sparse as sp

from daskhpc.spgemm._serial import compare_counts

EXE = os.path.join(os.path.dirname(sys.executable), "daskhpc")
A34 = "%%MatrixMarket matrix coordinate real general\n3 4 2\n1 1 1.0\n2 3 2.0\n"


def daskhpc(*argv, timeout=300):
    done = subprocess.run([EXE, *map(str, argv)], capture_output=True, text=True,
                          timeout=timeout)
    return done.returncode, done.stdout, done.stderr


def test_shapes_that_do_not_multiply_exit_2_before_the_cluster(tmp_path):
    a = tmp_path / "a.mtx"
    a.write_text(A34)
    code, _, err = daskhpc("run", "spgemm", a, "--b", a, "--workers", "1")
    assert code == 2 and "dashboard:" not in err
    assert err.strip().splitlines() == [
        f"daskhpc: error: {a} and {a}: dimension mismatch: A is 3 x 4, B is 3 x 4; A's "
        "columns must equal B's rows"]


@pytest.mark.slow             # CI budget (20 min on 2 cores): default run keeps a lighter test of the same path
def test_bcsstk13_count_check_compares_structural_counts(shared_data, tmp_path):
    """bcsstk13 A·A: 850 entries cancel; to exactly 0 in scipy's order, to round-off
    residues in ours, so ``nnz`` differs. ``identical`` compares the structural counts
    (and the sum) and says so; both nnz counts are reported."""
    out = tmp_path / "r.json"
    code, _, err = daskhpc("run", "spgemm", shared_data / "matrices/bcsstk13.mtx",
                           "--workers", "2", "--consume", "count", "--check-serial",
                           "--json", out)
    assert code == 0, err
    rep = json.loads(out.read_text())
    check = rep["serial_check"]
    assert check["identical"] is True and check["compared"] == "structural_nnz, sum"
    assert check["structural_nnz"] == check["structural_nnz_ref"] == 396773
    assert check["nnz"] != check["nnz_ref"]           # the residues: what nnz cannot tell
    assert rep["quality"]["nnz_c"] == check["nnz"]
    assert rep["quality"]["structural_nnz_c"] == check["structural_nnz"]


def test_count_check_fails_on_a_wrong_count():
    a = sp.csr_array(np.array([[1.0, 1.0], [0.0, 1.0]]))
    b = sp.csr_array(np.array([[1.0, 0.0], [-1.0, 1.0]]))
    ref = sp.csr_array(a @ b)
    assert compare_counts({"nnz": 3, "sum": 1.0, "structural_nnz": 4}, a, b, ref)["identical"]
    assert not compare_counts({"nnz": 3, "sum": 1.0, "structural_nnz": 3}, a, b,
                              ref)["identical"]
    assert not compare_counts({"nnz": 3, "sum": 1.5, "structural_nnz": 4}, a, b,
                              ref)["identical"]
