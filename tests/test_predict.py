"""A saved run's model, used in a fresh process: ``daskhpc run WF ... --save DIR`` on a
2-worker cluster, then ``daskhpc predict DIR INPUT`` gives the run's own quality figure
back (the same arithmetic: exactly, or to rounding where a norm is summed in another
order)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from daskhpc import datasets

DASKHPC = os.path.join(os.path.dirname(sys.executable), "daskhpc")

#: workflow -> (run arguments, predict input, report figure, predict figure)
CASES = {
    # the run's file holds its test split too: predict tells the trained records apart
    "ssgd": (["ratings", "--parts", "2", "--epochs", "2"],
             datasets.path("ratings"), "final_train_rmse", "train_rmse"),
    "linear": (["libsvm", "--test", datasets.path("libsvm-test"), "--parts", "2",
                "--epochs", "1"], datasets.path("libsvm-test"), "test_accuracy", "accuracy"),
    "cpals": (["tensor", "--parts", "2", "--rank", "4", "--iters", "3", "--tol", "0"],
              datasets.path("tensor"), "final_fit", "fit"),
    "gcn": (["cora", "--parts", "2", "--epochs", "3"], "cora", "final_test_acc", "test_acc"),
}


def daskhpc(*argv):
    done = subprocess.run([DASKHPC, *map(str, argv)], capture_output=True, text=True,
                          timeout=600)
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize("name", [
    # CI budget: one of the four in the default run (ssgd's fresh-process load is in
    # tests/ssgd/test_ssgd_model.py)
    n if n == "gcn" else pytest.param(n, marks=pytest.mark.slow) for n in sorted(CASES)])
def test_the_saved_model_gives_the_runs_figure_back(name, client2, tmp_path):
    run_args, inp, figure, got = CASES[name]
    address = client2.scheduler.address
    code, _, err = daskhpc("run", name, *run_args, "--scheduler-address", address,
                           "--save", tmp_path / "model", "--json", tmp_path / "run.json")
    assert code == 0, err
    full = json.loads((tmp_path / "run.json").read_text())
    assert full["command"].startswith(f"daskhpc run {name} "), full["command"]  # not "run"
    report = full["quality"][figure]
    want = report[-1] if isinstance(report, list) else report
    code, out, err = daskhpc("predict", tmp_path / "model", inp, "--output",
                             tmp_path / "pred.csv", "--json", tmp_path / "pred.json")
    assert code == 0, err
    got_q = json.loads((tmp_path / "pred.json").read_text())["quality"][got]
    assert got_q == pytest.approx(want, rel=1e-12, abs=0), (got_q, want)
    header, *rows = (tmp_path / "pred.csv").read_text().splitlines()
    assert "prediction" in header or "model" in header
    assert len(rows) == json.loads((tmp_path / "pred.json").read_text())["rows"] > 0


def test_spgemm_c_loads_in_a_fresh_process_equal_to_scipys_product(client2, tmp_path):
    a = tmp_path / "a.mtx"
    import scipy.io
    import scipy.sparse as sp

    A = sp.random(60, 60, density=0.08, random_state=1, format="csr")
    A.data = np.round(8 * A.data) + 1.0         # integer values: every sum is exact
    scipy.io.mmwrite(a, A)
    code, _, err = daskhpc("run", "spgemm", a, "--grid", "1x1x2", "--scheduler-address",
                           client2.scheduler.address, "--save", tmp_path / "c")
    assert code == 0, err
    np.save(tmp_path / "want.npy", (A @ A).toarray())
    check = ("import sys, numpy as np, daskhpc; r = daskhpc.load(sys.argv[1]); "
             "C = r.matrix.toarray(); w = np.load(sys.argv[2]); "
             "sys.exit(0 if C.shape == w.shape and np.array_equal(C, w) else 1)")
    done = subprocess.run([sys.executable, "-c", check, tmp_path / "c", tmp_path / "want.npy"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    code, _, err = daskhpc("predict", tmp_path / "c", a)
    assert code == 2 and err.count("\n") == 1 and "no model to apply" in err, err
    # C is kept as save_npz pieces the workers wrote: a truncated one is named, exit 2
    piece = sorted((tmp_path / "c" / "matrix").iterdir())[0]
    piece.write_bytes(piece.read_bytes()[:300])
    code, _, err = daskhpc("predict", tmp_path / "c", a)
    assert code == 2 and err.count("\n") == 1 and f"{piece}: " in err, err


def test_an_unknown_user_is_one_line_naming_it_and_its_record(tmp_path):
    from daskhpc import ssgd

    r = ssgd.serial_fit(datasets.path("ratings"), 1, epochs=1)
    r.save(tmp_path / "m")
    f = tmp_path / "new.csv"
    f.write_text("userId,movieId,rating\n1,1,4.0\n999999,1,3.0\n")
    code, _, err = daskhpc("predict", tmp_path / "m", f)
    assert code == 2 and err.count("\n") == 1, err
    assert "record 2: unknown user 999999" in err and str(f) in err


def test_predict_on_the_training_file_gives_train_and_test_rmse_apart(tmp_path):
    """The ratings file a run read holds its held-out test split too: predict's
    ``train_rmse`` is the run's ``final_train_rmse``, ``held_out_rmse`` its
    ``final_test_rmse``, ``rmse`` covers both, and the CSV says which record trained."""
    from daskhpc import ssgd

    r = ssgd.serial_fit(datasets.path("ratings"), 1, epochs=2)
    r.save(tmp_path / "m")
    q = r.report()["quality"]
    code, out, err = daskhpc("predict", tmp_path / "m", "ratings", "--output",
                             tmp_path / "p.csv", "--json", tmp_path / "p.json")
    assert code == 0, err
    got = json.loads((tmp_path / "p.json").read_text())["quality"]
    assert got["train_rmse"] == pytest.approx(q["final_train_rmse"], rel=1e-12, abs=0)
    assert got["held_out_rmse"] == pytest.approx(q["final_test_rmse"], rel=1e-12, abs=0)
    assert got["held_out_rmse"] > got["rmse"] > got["train_rmse"]
    header, *rows = (tmp_path / "p.csv").read_text().splitlines()
    assert header.split(",")[-1] == "trained"
    assert sum(row.endswith(",0") for row in rows) == round(0.1 * len(rows))  # the split
