"""The public namespace, the result object and the CLI plug-in."""

from __future__ import annotations

import json

import pytest

import daskhpc.ssgd as ssgd
from daskhpc import _workflows
from daskhpc.errors import InputError
from daskhpc.report import to_json
from daskhpc.ssgd import _cli
from daskhpc.testing import workflow_call


def test_public_namespace_is_pinned():
    assert sorted(ssgd.__all__) == sorted([
        "fit", "serial_fit", "plan", "SSGDResult", "StratumPolicy", "StratumOrderPlugin",
        "check_timeline", "power_law_ratings", "write_ratings_csv", "write_ratings_parquet",
        "timeline", "prepare", "Setup", "sgd_block", "MatrixFactorization"])
    for name in ssgd.__all__:
        assert getattr(ssgd, name) is not None


def test_plan_imports_no_dask():
    import subprocess
    import sys

    code = ("import sys, daskhpc.ssgd as s; from daskhpc import datasets; "
            "s.plan(datasets.ratings(), 2, partition='random'); "
            "print(any(m == 'distributed' or m.startswith(('dask.', 'distributed.')) "
            "or m == 'dask' for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_serial_result_prints_a_table_and_reports(ml_small):
    res = ssgd.serial_fit(ml_small, 2, epochs=3, partition="random")
    text = repr(res)
    assert text.splitlines()[0] == "SSGDResult(strategy=hc, parts=2, rank=16, epochs=3)"
    assert "train loss" in text and "test RMSE" in text and len(text.splitlines()) == 6
    html = res._repr_html_()
    assert html.count("<tr>") == 4 and "<th>test RMSE</th>" in html
    rep = res.report()
    for key in ("workflow", "version", "command", "input", "parts", "partitioner", "plan",
                "timing", "quality"):
        assert key in rep
    assert rep["workflow"] == "ssgd" and rep["input"]["shape"] == [610, 9724]
    assert rep["plan"]["words_per_unit"] == 16 and rep["plan"]["unit"] == "rows"
    assert len(rep["timing"]["per_iteration_s"]) == 3
    json.loads(to_json(rep))                                    # JSON-ready
    fig = res.plot()
    assert type(fig).__name__ == "figure" and len(fig.renderers) == 2


def cli_plan(argv):
    wf, call, _ = workflow_call("plan", "ssgd", argv)
    return wf.plan(call)


def test_cli_is_registered():
    assert _workflows.available()["ssgd"] == "daskhpc.ssgd._cli:SSGD"
    wf = _workflows.load("ssgd")
    assert isinstance(wf, _cli.SSGD) and wf.name == "ssgd" and wf.help


def test_cli_plan(ml_small):
    rep = cli_plan([ml_small.path, "--parts", "4", "--strategy", "p2p", "--partition",
                    "random", "--test-fraction", "0"])
    assert rep["workflow"] == "ssgd" and rep["version"] and "command" in rep
    assert rep["plan"]["tot_vol"] < 4 * 9724 and rep["parts"] == 4
    assert rep["partitioner"] == "random" and "objective" not in rep


def test_cli_errors(ml_small):
    with pytest.raises(InputError, match="--parts is required"):
        cli_plan([ml_small.path])
    # several files are a collection, which only 'run' reads (on the workers)
    with pytest.raises(InputError, match="^plan reads one ratings file on the client; "):
        cli_plan(["a.csv", "b.csv", "--parts", "2"])
    with pytest.raises(InputError, match="--parts 611 is more than the 610 rows"):
        cli_plan([ml_small.path, "--parts", "611"])


def test_cli_run_with_check_serial(client4, ml_small):
    wf, call, run = workflow_call("run", "ssgd", [ml_small.path, "--parts", "2", "--epochs",
                                                  "2", "--strategy", "hc", "--check-serial"],
                                  client4)
    rep = wf.run(call, run)
    assert rep["serial_check"] == {"done": True, "identical": True, "max_abs_diff": 0.0,
                                   "history_identical": True}
    assert rep["objective"] == "soed" and rep["partitioner"] == "mtkahypar"
    assert set(rep["quality"]) >= {"train_loss", "test_rmse", "global_mean_rmse"}
    assert rep["measured"]["inter_worker_bytes"] > 0 and rep["measured"]["planned_bytes"] > 0


@pytest.mark.parametrize("module", ["_data", "_strata", "_assign", "_dgap", "_plan",
                                    "_runplan", "_kernels", "_setup", "_serial", "_parts",
                                    "_tasks", "_policy", "_result", "_synthetic", "_cli",
                                    "_api", "_job", "_plugin", "_checkpoint", "_estimator"])
def test_docstring_examples(module):
    import doctest
    import importlib

    mod = importlib.import_module(f"daskhpc.ssgd.{module}")
    res = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert res.failed == 0
