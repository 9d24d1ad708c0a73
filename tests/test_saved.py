"""Results kept on disk: ``--save DIR`` / ``result.save(DIR)`` and ``daskhpc.load(DIR)``
in a fresh process; damaged, edited and foreign directories refused with one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import daskhpc as dh
from daskhpc import datasets
from daskhpc.errors import InputError

EXE = str(Path(sys.executable).with_name("daskhpc"))


def _fresh(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def saved_cp(tmp_path_factory, client2):
    d = tmp_path_factory.mktemp("cp")
    out = d / "r.json"
    # the session's cluster, joined: a cluster of its own cost the CI budget ~10 s
    done = subprocess.run([EXE, "run", "cpals", datasets.path("tensor"), "--scheduler-address",
                           client2.scheduler.address,
                           "--rank", "4", "--iters", "3", "--tol", "0", "--save",
                           str(d / "model"), "--json", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return d / "model", json.loads(out.read_text())


def test_a_saved_run_loads_in_a_fresh_process(saved_cp):
    model, report = saved_cp
    got = json.loads(_fresh(
        "import json, daskhpc as dh\n"
        f"r = dh.load({str(model)!r})\n"
        "print(json.dumps({'cls': type(r).__name__, 'fit': r.fit, 'final': "
        "r.report()['quality']['final_fit'], 'shapes': [list(f.shape) for f in r.factors],"
        " 'full': float(abs(r.full()).sum()) if hasattr(r, 'full') else None}))"))
    assert got["cls"] == "CPResult"
    assert got["fit"] == report["quality"]["fit"] and got["final"] == report["quality"]["final_fit"]
    assert got["shapes"] == [[135, 4], [46, 4], [135, 4]]
    # the arrays need nothing of daskhpc: numpy reads them
    with np.load(model / "arrays.npz", allow_pickle=False) as f:
        assert sorted(f.files) == ["factors.0", "factors.1", "factors.2", "weights"]


def test_damaged_edited_and_foreign_directories_are_refused(saved_cp, tmp_path):
    import shutil

    model, _ = saved_cp
    with pytest.raises(InputError, match="a cpals result, not ssgd"):
        dh.load(model, "ssgd")
    edited = tmp_path / "edited"
    shutil.copytree(model, edited)
    m = json.loads((edited / "manifest.json").read_text())
    m["report"]["quality"]["final_fit"] = 0.99
    (edited / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(InputError, match=r"manifest.json: the manifest was edited"):
        dh.load(edited)
    cut = tmp_path / "cut"
    shutil.copytree(model, cut)
    data = (cut / "arrays.npz").read_bytes()
    (cut / "arrays.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match=r"arrays.npz: damaged or truncated"):
        dh.load(cut)
    with pytest.raises(InputError, match="no saved result here"):
        dh.load(tmp_path)
    # on the command line: one line, exit 2 (runs do not warm-start)
    bad = subprocess.run([sys.executable, "-c", f"import daskhpc as dh; dh.load({str(cut)!r})"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and "arrays.npz: damaged or truncated" in bad.stderr


def test_every_result_class_saves_what_makes_its_model():
    from daskhpc.cpals import CPResult
    from daskhpc.gcn import GCNResult
    from daskhpc.linear import LinearResult
    from daskhpc.spgemm import SpgemmResult
    from daskhpc.ssgd import SSGDResult

    assert CPResult.SAVED == ("weights", "factors") and SSGDResult.SAVED[:2] == ("W", "H")
    assert GCNResult.SAVED and LinearResult.SAVED and SpgemmResult.SAVED


def test_a_saved_classifier_scores_its_test_file_in_a_fresh_process(tmp_path):
    r = dh.linear.fit_local(datasets.path("libsvm"), nparts=2, batch=512, epochs=1,
                            test=datasets.path("libsvm-test"))
    r.save(tmp_path / "clf")
    got = json.loads(_fresh(
        "import json, daskhpc as dh\n"
        f"m = dh.load({str(tmp_path / 'clf')!r}, 'linear')\n"
        f"t = {datasets.path('libsvm-test')!r}\n"
        "print(json.dumps([m.score(t), m.predict_proba(t)[:3].tolist()]))"))
    assert got[0] == r.history[-1]["test_accuracy"]
    assert np.allclose(np.asarray(got[1]).sum(axis=1), 1.0)
