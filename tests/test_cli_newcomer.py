"""What a new user hits first: every way of joining a cluster fails in bounded
time with one line, and a diverging run stops with exit 1. The real console script runs."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from daskhpc import datasets

EXE = os.path.join(os.path.dirname(sys.executable), "daskhpc")


def daskhpc(*argv, timeout=280, **env):
    # bounded by the options (a 1 s connect timeout), not by this: under pytest's 300 s
    done = subprocess.run([EXE, *map(str, argv)], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **env})
    return done.returncode, done.stdout, done.stderr


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("option, status, message", [
    (["--scheduler-file", "/nonexistent"], 1,      # no scheduler: one status (1) for all
     "daskhpc: failed: /nonexistent: the scheduler file does not exist after waiting 1 s"),
    (["--scheduler-file", "/nonexistent/dir/scheduler.json"], 2,
     "daskhpc: error: /nonexistent/dir/scheduler.json: no such scheduler file"),
    (["--scheduler-address", "tcp://127.0.0.1:{port}"], 1,      # refused: no wait at all
     "daskhpc: failed: no Dask scheduler at tcp://127.0.0.1:{port}: connection refused"),
    (["--scheduler-address", "nonsense"], 2,
     "daskhpc: error: scheduler address nonsense: missing port number"),
    (["--workers", "2", "--scheduler-address", "tcp://127.0.0.1:{port}"], 2,
     "daskhpc: error: --workers starts a local cluster; --scheduler-address joins"),
    (["--dashboard-address", "nonsense"], 2,
     "daskhpc: error: --dashboard-address must be HOST:PORT or :PORT, not 'nonsense'"),
    (["--workers", "0"], 2, "daskhpc: error: --workers must be at least 1, not 0"),
    (["--workers", "-1"], 2, "daskhpc: error: --workers must be at least 1, not -1"),
])
def test_joining_a_cluster_fails_fast_with_one_line(option, status, message):
    port = _unused_port()
    option = [o.format(port=port) for o in option]
    code, _, err = daskhpc("run", "ssgd", datasets.path("ratings"), "--epochs", "1", *option,
                           DASK_DASKHPC__RUNTIME__CONNECT_TIMEOUT="1")
    assert code == status, err
    assert err.startswith(message.format(port=port)), err
    assert err.count("\n") == 1 and "Traceback" not in err and "dashboard:" not in err


def test_a_stale_scheduler_file_fails_at_once_with_exit_1(tmp_path):
    """A scheduler file left by a finished job: its address refuses the connection, so
    the run fails without waiting for an answer (the default wait of 30 s)."""
    port = _unused_port()
    sched = tmp_path / "scheduler.json"
    sched.write_text(f'{{"address": "tcp://127.0.0.1:{port}"}}')
    code, _, err = daskhpc("run", "ssgd", datasets.path("ratings"), "--epochs", "1",
                           "--scheduler-file", sched)
    assert code == 1, err
    assert err == (f"daskhpc: failed: no Dask scheduler at tcp://127.0.0.1:{port} (from "
                   f"{sched}): connection refused (nothing listens there; the file may be a "
                   "finished job's)\n"), err


@pytest.mark.slow             # CI budget (20 min on 2 cores): default run keeps a lighter test of the same path
def test_a_diverging_run_stops_with_exit_1():
    code, out, err = daskhpc("run", "ssgd", datasets.path("ratings"), "--lr", "1e6",
                             "--epochs", "5", "--partition", "random", "--workers", "2",
                             "--dashboard-address", ":0")
    assert code == 1, err
    line = err.splitlines()[-1]
    assert line == ("daskhpc: failed: ssgd diverged: train_loss = nan in epoch 0 (counting "
                    "from 0); the run stopped there; try a smaller --lr than 1e+06"), err
    assert "Traceback" not in err and "final_objective" not in out


def _small_mtx(path, n=300, nnz=3000, seed=0):
    import numpy as np
    import scipy.io
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    a = sp.coo_array((rng.random(nnz), (rng.integers(0, n, nnz), rng.integers(0, n, nnz))),
                     shape=(n, n)).tocsr()
    scipy.io.mmwrite(str(path), a)
    return path


@pytest.mark.slow             # CI budget (20 min on 2 cores): default run keeps a lighter test of the same path
def test_a_blown_memory_budget_is_a_warning_with_the_figures(tmp_path):
    """The budget the user asked for is a promise; a peak over it, found once the product
    is complete, is one warning line with the figures in the report's memory section, not
    a failed run (the work is done)."""
    import json

    a = _small_mtx(tmp_path / "a.mtx")
    out = tmp_path / "out.json"
    code, _, err = daskhpc("run", "spgemm", a, "--grid", "1x1x2", "--workers", "2",
                           "--memory-per-worker", "200kB", "--dashboard-address", ":0",
                           "--json", out, timeout=300)
    assert code == 0, err
    warned = [x for x in err.splitlines() if x.startswith("daskhpc: warning: spgemm:")]
    assert len(warned) == 1 and warned[0].startswith(
        "daskhpc: warning: spgemm: worker tcp://"), err
    assert "x the memory budget of 200 kB a worker (the product is complete" in warned[0]
    mem = json.loads(out.read_text())["memory"]
    assert mem["within_budget"] is False and mem["max_peak_increase"] > 200_000
    assert mem["peak_over_budget"] == round(mem["max_peak_increase"] / 200_000, 4)


def _a_saved_model(tmp_path) -> str:
    """A saved ssgd model (two factors, no cluster: predict reads only the directory)."""
    import numpy as np

    from daskhpc.ssgd import SSGDResult

    r = SSGDResult(np.ones((2, 1)), np.ones((3, 1)))
    return r.save(tmp_path / "model")


@pytest.mark.parametrize("argv, message", [
    # CI budget (20 min on 2 cores): two in the default run, the rest under -m slow
    pytest.param(["run", "ssgd", "{ratings}", "--parts", "0"], "--parts must be at least 1, not 0",
                 marks=pytest.mark.slow),
    (["plan", "ssgd", "{ratings}", "--parts", "4", "--partition-file", "{p2}"],
     "{p2}: its row part ids go up to 1, so parts 2..3 of --parts 4 would be empty; "
     "partition into 4 parts or pass --parts 2"),
    pytest.param(["run", "ssgd", "{ratings}", "--epsilon", "-1"],
                 "--epsilon must be at least 0, not -1.0",
                 marks=pytest.mark.slow),
    (["run", "spgemm", "{mtx}", "--window", "0"],
     "--window must be at least 1, not 0"),
    pytest.param(["run", "spgemm", "{mtx}", "--consume", "write:/proc/none/dir"],
                 "--consume write:/proc/none/dir: cannot create the directory",
                 marks=pytest.mark.slow),
    # a missing file is named, not "[Errno 2] No such file or directory: ..."
    (["run", "cpals", "no/such/tensor.tns"], "no/such/tensor.tns: no such file or directory"),
    (["partition", "row-net", "no/such/a.mtx", "--parts", "2"],
     "no/such/a.mtx: no such file or directory"),
    (["predict", "{model}", "no/such/ratings.csv"],
     "no/such/ratings.csv: no such file or directory"),
])
def test_options_are_checked_before_the_cluster_starts(tmp_path, argv, message):
    """Exit 2 with one line and no cluster (no dashboard link): a typo costs nothing."""
    p2 = tmp_path / "p2.txt"
    p2.write_text("\n".join(str(i % 2) for i in range(610)) + "\n")
    subst = {"{ratings}": datasets.path("ratings"), "{p2}": str(p2),
             "{mtx}": str(_small_mtx(tmp_path / "a.mtx")), "{model}": _a_saved_model(tmp_path)}
    code, _, err = daskhpc(*[subst.get(a, a) for a in argv])
    assert code == 2, err
    assert err.startswith(f"daskhpc: error: {message.format(p2=p2)}") and err.count("\n") == 1


@pytest.mark.slow             # CI budget (20 min on 2 cores): default run keeps a lighter test of the same path
def test_an_unmet_balance_is_said_and_fails_an_explicit_epsilon(shared_data, tmp_path):
    tns = shared_data / "tensors/umls_head_rel_tail.tns"
    code, _, err = daskhpc("partition", "tensor-coarse", tns, "--parts", 3)
    assert code == 0 and err.startswith("daskhpc: warning: the partition is not balanced ("), err
    out = tmp_path / "p.json"
    code, _, err = daskhpc("partition", "tensor-coarse", tns, "--parts", 3, "--epsilon", 0.1,
                           "--json", out)
    assert code == 1 and err.startswith("daskhpc: failed: the partition is not balanced ("), err
    assert err.count("\n") == 1
    import json

    assert json.loads(out.read_text())["partition"]["balanced"] is False
    code, _, err = daskhpc("partition", "tensor-coarse", tns, "--parts", 3, "--epsilon", -1)
    assert code == 2 and err == "daskhpc: error: --epsilon must be at least 0, not -1.0\n"
