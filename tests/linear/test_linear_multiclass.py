"""A LIBSVM file with 3+ labels trains a one-vs-rest model (one allreduce of the
K stacked gradients per step) with no extra option, through fit and the command line; the
cluster equals fit_local bit for bit; the model predicts and is saved like a binary one."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import daskhpc.linear as lin
from daskhpc.testing import workflow_call

KW = dict(nparts=2, batch=32, epochs=2)


def test_multiclass_on_a_cluster_equals_fit_local_bitwise(client2, digits_svm):
    train, test = digits_svm
    r = lin.fit(train, test=test, client=client2, check_serial=True, **KW)
    want = lin.fit_local(train, test=test, **KW)
    assert r.w.shape == (10, 65) and r.classes_.tolist() == list(range(10))
    assert np.array_equal(r.w, want.w)
    assert [h["test_accuracy"] for h in r.history] == [h["test_accuracy"] for h in want.history]
    assert r.report()["serial_check"]["within_tolerance"] is True
    assert r.history[-1]["test_accuracy"] > 0.85
    # one call per step: a9a-style step count, the calls' vectors K N long
    assert r.report()["models"] == 10
    assert r.report()["steps"]["iterations_per_epoch"] == 19          # ceil(600 / 32)


def test_multiclass_hinge_equals_plain_serial_bitwise(digits_svm):
    # integer features and hinge factors: the gradient sums are integers, so the
    # reassociation of the allreduce changes nothing
    train, test = digits_svm
    a = lin.fit_local(train, test=test, loss="hinge", **KW)
    b = lin.serial_fit(train, test=test, loss="hinge", **KW)
    assert np.array_equal(a.w, b.w)


def test_multiclass_through_the_cli_parser(client2, digits_svm):
    train, test = digits_svm
    wf, call, run = workflow_call("run", "linear", [train, "--test", test, "--parts", "2",
                                                    "--batch", "32", "--epochs", "2"], client2)
    wf.check(call)
    rep = wf.run(call, run)
    assert rep["models"] == 10 and rep["classes"] == [float(c) for c in range(10)]
    want = lin.fit_local(train, test=test, **KW)
    assert rep["quality"]["test_accuracy"] == want.history[-1]["test_accuracy"]


def test_multiclass_predictions_and_a_saved_model_in_a_fresh_process(tmp_path, digits_svm):
    train, test = digits_svm
    r = lin.fit_local(train, test=test, **KW)
    from daskhpc.io import read

    t = read(test, format="libsvm")
    d = r.decision_function(t.matrix)
    assert d.shape == (t.matrix.shape[0], 10)
    assert np.array_equal(r.predict(t.matrix), r.classes_[np.argmax(d, axis=1)])
    p = r.predict_proba(t.matrix)
    assert p.shape == d.shape and np.allclose(p.sum(axis=1), 1.0) and (p >= 0).all()
    assert r.score(test) == r.history[-1]["test_accuracy"]
    r.save(tmp_path / "m")
    code = ("import json, daskhpc as dh\n"
            f"m = dh.load({str(tmp_path / 'm')!r}, 'linear')\n"
            f"print(json.dumps([m.score({str(test)!r}), m.predict({str(test)!r}).tolist(), "
            "list(m.w.shape)]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=280)
    score, pred, shape = json.loads(out.stdout)
    assert score == r.history[-1]["test_accuracy"] and shape == [10, 65]
    assert pred == r.predict(test).tolist()


@pytest.mark.slow
def test_multiclass_through_the_console_script(digits_svm):
    train, test = digits_svm
    exe = os.path.join(os.path.dirname(sys.executable), "daskhpc")
    done = subprocess.run([exe, "run", "linear", str(train), "--test", str(test), "--workers",
                           "2", "--parts", "2", "--batch", "32", "--epochs", "2",
                           "--check-serial", "--json", "-"], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    rep = json.loads(done.stdout)
    want = lin.fit_local(train, test=test, **KW)
    assert rep["models"] == 10 and rep["serial_check"]["within_tolerance"] is True
    assert rep["quality"]["test_accuracy"] == want.history[-1]["test_accuracy"]
