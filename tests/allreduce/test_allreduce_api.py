"""Embedding in other Programs, the CLI plug-in, input errors, and the namespace."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from allreduce_reference import vectors

import daskhpc.allreduce as ar
from daskhpc.testing import workflow_call
from daskhpc.comm import Program, run_local
from daskhpc.errors import InputError


def _get(ctx, call):
    return ctx.static[call]


def _put(ctx, total, call):
    ctx.state.setdefault("totals", []).append(total.to_dense())


def test_chained_calls_fuse_into_S_steps_each():
    import functools

    P, N, calls = 5, 300, 3
    data = [vectors(N, P, 0.05, seed=c, integer=True) for c in range(calls)]
    statics = [[data[c][p] for c in range(calls)] for p in range(P)]
    algo = ar.make("ssar_split_allgather", P, N, ar.Format(np.int64))
    prog = Program(P, "chain", final=lambda ctx: ctx.state["totals"])
    for c in range(calls):
        ar.append_allreduce(prog, functools.partial(_get, call=c),
                            functools.partial(_put, call=c), algorithm=algo,
                            fuse=c > 0, count=True)
    assert prog.nsteps == calls * algo.nstages + 1
    finals, _ = run_local(prog, statics)
    for p in range(P):
        for c in range(calls):
            assert np.array_equal(finals[p][c], np.sum(data[c], axis=0))
    # without a call plan every step carries the dense bound: no message is larger
    bound = ar.dense_bound_plan(algo)
    whole = prog.plan()
    assert whole.report()["planned_bytes"] == calls * bound.report()["planned_bytes"]
    assert int(whole.message_bytes().sum()) == calls * int(bound.message_bytes().sum())


def test_fuse_refuses_a_step_that_sends():
    prog = Program(2, "x")
    ar.append_allreduce(prog, _get, _put, N=4, algorithm="dense_rec_dbl")
    prog.step(lambda ctx: {1 - ctx.part: 0}, sends=ar.call_plan(
        ar.make("dense_rec_dbl", 2, 4, ar.Format(np.float64)), [None, None]))
    with pytest.raises(ValueError, match="sends nothing"):
        ar.append_allreduce(prog, _get, _put, N=4, algorithm="dense_rec_dbl", fuse=True)
    with pytest.raises(ValueError, match="auto"):
        ar.append_allreduce(prog, _get, _put, N=4, algorithm="auto")


def _plan(argv):
    wf, call, _ = workflow_call("plan", "allreduce", argv)
    return wf.plan(call)


def test_cli_plan_uniform_and_files(tmp_path):
    rep = _plan(["uniform", "--N", "4096", "--parts", "4", "--density", "0.01",
                           "--algorithm", "ssar_rec_dbl"])
    assert rep["workflow"] == "allreduce" and rep["plan"]["tot_msgs"] == 8
    assert rep["input"]["model"] == "uniform" and rep["input"]["k_max"] == 41
    vecs = vectors(100, 3, 0.1, seed=0, integer=False)
    files = []
    for i, v in enumerate(vecs):
        if i == 0:
            np.save(tmp_path / "v0.npy", v)
            files.append(str(tmp_path / "v0.npy"))
        else:
            nz = np.flatnonzero(v)
            np.savez(tmp_path / f"v{i}.npz", idx=nz, val=v[nz], N=100)
            files.append(str(tmp_path / f"v{i}.npz"))
    rep = _plan(files + ["--algorithm", "auto"])
    assert rep["parts"] == 3 and rep["choice"]["algorithm"] == rep["algorithm"]
    with pytest.raises(InputError, match="idx"):
        np.savez(tmp_path / "bad.npz", x=np.ones(3))
        _plan([str(tmp_path / "bad.npz")])


@pytest.mark.parametrize("kwargs,match", [
    (dict(vectors=[np.ones(3), np.ones(4)]), "length"),
    (dict(vectors=[np.array([1.0, np.nan])]), "NaN"),
    (dict(vectors=[(np.array([5]), np.array([1.0]))], N=4), "outside"),
    (dict(vectors=[(np.array([1, 1]), np.array([1.0, 2.0]))], N=4), "twice"),
    (dict(vectors=[(np.array([1]), np.array([1.0]))]), "need N"),
    (dict(vectors=[np.ones(3, complex)]), "integers or floats"),
    (dict(vectors=[np.ones(3)], algorithm="fast"), "unknown --algorithm"),
    (dict(vectors=[np.ones(3)], group=3), "power of two"),
    (dict(N=10, nparts=2, density=1.5), "density"),
    (dict(N=10, nparts=2), "density"),
    (dict(vectors=[]), "at least one"),
])
def test_bad_input_is_an_input_error(kwargs, match):
    with pytest.raises(InputError, match=match):
        ar.plan(**kwargs)


def test_an_unknown_option_is_refused_before_a_cluster_is_made():
    # engine= (one small graph per call) is retired: every call runs as a Program
    with pytest.raises(TypeError, match=r"unknown allreduce option\(s\): \['engine'\]"):
        ar.allreduce(N=100, nparts=2, density=0.1, engine="call")


def test_result_prints_and_reports():
    r = ar.allreduce_local(N=2000, nparts=3, density=0.01, algorithm="auto", repeat=2)
    text = repr(r)
    assert text.startswith("AllreduceResult(parts=3, algorithm=") and "auto chose" in text
    assert len(r.history) == 2 and r.history[0]["sent_bytes"] == r.history[1]["sent_bytes"]
    assert r.history[0]["sent_bytes"] == r.plan.report()["planned_bytes"]
    rep = r.report()
    assert rep["workflow"] == "allreduce" and rep["plan"]["stream_bytes"] == \
        rep["plan"]["planned_bytes"] + 4 * rep["plan"]["tot_msgs"]
    assert "<table>" in r._repr_html_()


def test_namespace_and_no_dask():
    assert set(ar.__all__) == {
        "allreduce", "plan", "allreduce_local", "serial_allreduce", "append_allreduce",
        "AllreduceResult", "call_plan", "dense_bound_plan", "simulate", "choose",
        "predicted_times", "expected_union", "uniform_vectors", "make", "cost_model",
        "Format", "Stream", "ALGORITHMS", "SPARSE", "DENSE", "CANDIDATES", "DEFAULT_GROUP"}
    # importing, planning and running locally with a given cost model: no dask at all;
    # auto without alpha/beta reads the calibration from dask.config (never distributed)
    code = ("import sys, daskhpc.allreduce as ar\n"
            "ar.allreduce_local(N=100, nparts=3, density=0.1, alpha=1e-3, beta=1e-9)\n"
            "ar.plan(N=100, nparts=3, density=0.1, algorithm='ssar_rec_dbl')\n"
            "bad = [m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')]\n"
            "assert not bad, bad\n"
            "ar.plan(N=100, nparts=3, density=0.1)\n"
            "assert 'distributed' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True)
