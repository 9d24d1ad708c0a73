"""Public API, CLI plug-in, result object, synthetic tensors, dask-free import."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import daskhpc.cpals as cp
from daskhpc import datasets
from daskhpc.cpals import _cli
from daskhpc.testing import workflow_call
from daskhpc.report import to_json


def test_public_namespace_is_pinned():
    assert set(cp.__all__) == {
        "fit", "serial_fit", "plan", "CPResult", "prepare", "Setup", "Options", "statics",
        "program", "assemble", "mttkrp", "Tensor", "as_tensor", "power_law_tensor",
        "write_tns", "cpals_job"}
    for name in cp.__all__:
        assert hasattr(cp, name)


def test_import_and_plan_do_not_import_dask():
    code = ("import sys, daskhpc.cpals as cp\n"
            "from daskhpc import datasets\n"
            "cp.plan(datasets.path('tensor'), 2, grain='coarse', partition='block')\n"
            "cp.serial_fit(datasets.path('tensor'), 2, iters=1)\n"
            "bad = [m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')]\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def cli_plan(argv):
    wf, call, _ = workflow_call("plan", "cpals", argv)
    return wf.plan(call)


def test_cli_plan_gives_the_full_report(shared_data):
    path = str(shared_data / "tensors" / "umls_head_rel_tail.tns")
    rep = cli_plan([path, "--parts", "4", "--grain", "coarse", "--partition", "block",
                    "--rank", "12"])
    assert rep["workflow"] == "cpals" and rep["parts"] == 4 and rep["rank"] == 12
    assert rep["input"] == {"path": path, "shape": [135, 46, 135], "nnz": 6529}
    for key in ("tot_vol", "max_vol", "sum_max_vol", "tot_msgs", "max_msgs", "sum_max_msgs",
                "max_max_msgs", "phases"):
        assert isinstance(rep["plan"][key], int)
    assert rep["plan"]["unit"] == "rows" and rep["plan"]["words_per_unit"] == 12
    assert len(rep["partition"]["imbalance_per_mode"]) == 3
    assert [m["mode"] for m in rep["modes"]] == [1, 2, 3]
    assert sum(m["vol_total"] for m in rep["modes"]) == rep["plan"]["tot_vol"]
    assert rep["allreduce"]["tot_msgs"] == 3 * 4 * 2      # recursive doubling, 3 modes
    json.loads(to_json(rep))
    text = _cli.CPALS().summary(rep)
    assert "load max" in text and "  gram       all-reduce of" in text
    _, call, run = workflow_call("run", "cpals", [path, "--iters", "7", "--tol", "0",
                                                  "--check-serial"])
    assert (call.options.iters, call.options.tol, run.check_serial) == (7, 0.0, True)


def test_cli_partition_file_round_trip(tmp_path, shared_data):
    """A partition saved by `daskhpc partition tensor-fine` (one part per nonzero) gives
    the same plan as the partition it came from."""
    from daskhpc.cpals._assign import random_parts

    path = str(shared_data / "tensors" / "nations_head_rel_tail.tns")
    X = cp.as_tensor(path)
    parts = random_parts(X.nnz, 4, 0, 3)
    f = tmp_path / "p.txt"
    np.savetxt(f, parts, fmt="%d")
    rep = cli_plan([path, "--parts", "4", "--partition-file", str(f)])
    ref = cp.plan(path, 4, grain="fine", partition="random")
    assert rep["partition"]["method"] == "file"
    # same nonzero parts, rows placed by the post-pass instead of at random: km1 equal
    assert rep["partition"]["km1"] == ref["partition"]["km1"]


def test_cli_needs_parts_and_one_input():
    from daskhpc.errors import InputError

    with pytest.raises(InputError):
        cli_plan(["a.tns"])
    with pytest.raises(InputError):
        cli_plan(["a.tns", "b.tns", "--parts", "2"])


def test_serial_fit_result():
    res = cp.serial_fit(datasets.path("tensor"), 5, iters=4, tol=0)
    assert len(res.history) == 4 and len(res.iteration_times) == 4
    rep = res.report()
    assert rep["workflow"] == "cpals" and rep["quality"]["final_fit"] == res.fit[-1]
    assert rep["rank"] == 5 and len(rep["timing"]["per_iteration_s"]) == 4
    text = repr(res)
    assert text.startswith("CPResult(rank=5)") and "fit" in text
    assert "<table>" in res._repr_html_()
    weights, factors = res.to_tensorly()
    assert weights.shape == (5,) and [f.shape[0] for f in factors] == [135, 46, 135]
    X = cp.as_tensor(datasets.path("tensor"))
    vals = res.reconstruct(X.coords[:, :50])
    full = res.full()
    assert np.allclose(vals, full[tuple(X.coords[:, :50])], rtol=1e-12, atol=1e-14)
    resid = np.linalg.norm(X.to_dense() - full) / np.sqrt(X.norm2())   # vals: float32 here
    assert abs((1 - resid) - res.fit[-1]) < 1e-10


def test_plot_has_the_fit_curve():
    pytest.importorskip("bokeh")
    res = cp.serial_fit(datasets.path("tensor"), 3, iters=3, tol=0)
    fig = res.plot()
    assert fig.xaxis[0].axis_label == "iteration"


def test_power_law_tensor_is_seeded_and_round_trips(tmp_path):
    a = cp.power_law_tensor(50_000, seed=3)
    b = cp.power_law_tensor(50_000, seed=3)
    assert np.array_equal(a.coords, b.coords) and np.array_equal(a.vals, b.vals)
    assert a.nnz == 50_000 and a.shape == (250, 50, 365)
    assert not np.array_equal(a.coords, cp.power_law_tensor(50_000, seed=4).coords)
    # canonical order, no duplicates
    c = cp.as_tensor((a.coords, a.vals, a.shape))
    assert np.array_equal(c.coords, a.coords)
    # skewed: the busiest slice of mode 2 holds far more than the average
    counts = np.bincount(a.coords[1], minlength=a.shape[1])
    assert counts.max() > 5 * counts.mean()
    f = tmp_path / "x.tns"
    cp.write_tns(f, a)
    back = cp.as_tensor(str(f))
    assert np.array_equal(back.coords, a.coords) and np.array_equal(back.vals, a.vals)


def test_write_tns_non_integer_values_round_trip(tmp_path):
    X = cp.as_tensor(([[0, 1, 2], [2, 0, 1], [1, 1, 0]], [0.1, -2.5e-7, 3.0], (3, 3, 2)))
    f = tmp_path / "y.tns"
    cp.write_tns(f, X)
    back = cp.as_tensor(str(f))
    assert np.array_equal(back.vals, X.vals) and np.array_equal(back.coords, X.coords)
    assert f.read_text().splitlines()[0] == "1 3 2 0.1"
