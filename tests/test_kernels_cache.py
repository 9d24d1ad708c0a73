"""First-run compile of the numba kernels: announced on stderr once, compiled in the
client, and each workflow's declared warm-up (``WARMUP``/``WARMUP_PLAN`` in its kernels
module) covers what its ``run``/``plan`` compile. Every check uses a fresh, empty
``NUMBA_CACHE_DIR`` (inherited by LocalCluster workers)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from daskhpc import _workflows
from daskhpc._numba import _announcer, prepare_kernels, warmup_of

ROOT = pathlib.Path(__file__).resolve().parents[1]
DATA = pathlib.Path(os.environ.get("DASKHPC_SHARED_DATA", ROOT.parent / "shared" / "data"))
DASKHPC = pathlib.Path(sys.executable).parent / "daskhpc"
MESSAGE = "compiling kernels (first run only) ..."

#: Small runs and plans on bundled/shared data, one per workflow.
RUNS = {
    "ssgd": [str(DATA / "ratings/ml-latest-small/ratings.csv"), "--parts", "2", "--epochs", "1",
             "--check-serial"],
    "spgemm": [str(DATA / "matrices/bcsstk13.mtx"), "--aat", "--grid", "2x2x1",
               "--check-serial"],
    "cpals": [str(DATA / "tensors/umls_head_rel_tail.tns"), "--parts", "2", "--rank", "4",
              "--iters", "2", "--check-serial"],
    "gcn": ["cora", "--parts", "2", "--epochs", "2", "--check-serial"],
    "allreduce": ["--N", "100000", "--parts", "2", "--density", "0.001", "--check-serial"],
    "linear": [str(DATA / "libsvm/a9a"), "--parts", "2", "--epochs", "1", "--check-serial"],
}

#: The same inputs for ``plan`` (no run-only options).
PLANS = {
    "ssgd": RUNS["ssgd"][:3],
    "spgemm": RUNS["spgemm"][:4],
    "cpals": RUNS["cpals"][:5],
    "gcn": RUNS["gcn"][:3],
    "allreduce": RUNS["allreduce"][:6],
    "linear": RUNS["linear"][:3],
}


def _env(cache: pathlib.Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env.update(NUMBA_CACHE_DIR=str(cache), **extra)
    return env


def _prepare(cache, *args, command="run"):
    # run outside the checkout: ``python -c`` puts its working directory first on the
    # path, and from the checkout it would warm up the checkout's sources while the
    # console script runs the installed package (a non-editable install, as the README
    # installs it: other files, so other cache entries)
    code = ("import sys; from daskhpc._numba import prepare_kernels; "
            f"r = prepare_kernels(*{list(args)!r}, command={command!r}, file=sys.stderr); "
            "print(r.compiled)")
    return subprocess.run([sys.executable, "-c", code], env=_env(cache), capture_output=True,
                          text=True, timeout=600, check=True, cwd=cache)


def _saved(stdout: str) -> list[str]:
    """Kernels numba compiled and saved (NUMBA_DEBUG_CACHE=1 prints to stdout)."""
    return sorted({line.rsplit("/", 1)[-1].split(".py")[0] for line in stdout.splitlines()
                   if line.startswith("[cache] data saved")})


def test_every_workflow_declares_its_warm_up():
    for name in _workflows.available():
        assert warmup_of(name, "run"), f"{name}: no WARMUP in its kernels module"
        assert all(callable(f) for f in warmup_of(name, "run"))


def test_prepare_kernels_compiles_once_and_says_so(tmp_path):
    first = _prepare(tmp_path, "allreduce", command="plan")      # one kernel: fast
    assert int(first.stdout) > 0
    assert first.stderr.startswith(f"allreduce: {MESSAGE}")
    assert first.stderr.rstrip().endswith(" s") and "done in" in first.stderr
    assert list(tmp_path.rglob("*.nbc")), "nothing saved to NUMBA_CACHE_DIR"
    [stamp] = tmp_path.rglob("daskhpc-warmup-allreduce-plan.json")
    assert any(f.endswith("_kernels.py") for f in json.loads(stamp.read_text())["files"])
    second = _prepare(tmp_path, "allreduce", command="plan")
    assert int(second.stdout) == 0
    assert second.stderr == ""
    stamp.write_text(stamp.read_text().replace('"files": {', '"files": {"/gone.py": [0, 0], '))
    third = _prepare(tmp_path, "allreduce", command="plan")  # stale stamp: warm up (loads)
    assert int(third.stdout) == 0 and third.stderr == ""
    assert "/gone.py" not in stamp.read_text()


def test_uncached_compiles_are_not_announced():
    # numba's own helpers (typed.List's) have no cache: they compile on every run, so
    # they are not "first run only"
    import io

    import numba
    from numba.core import event

    @numba.njit(cache=False)
    def twice(x):
        return 2 * x

    out = io.StringIO()
    listener = _announcer(out, "x")
    with event.install_listener("numba:compile", listener):
        assert twice(3) == 6
    assert listener.compiled == 0 and out.getvalue() == ""
    assert prepare_kernels("gcn", command="plan").workflows == ("gcn",)
    assert prepare_kernels("pingpong").compiled == 0      # a frame job, not a workflow


@pytest.mark.slow             # compiles two workflows (~10 s on a quiet machine)
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one core: warm-ups run in turn")
def test_several_workflows_compile_side_by_side_not_here(tmp_path):
    """daskhpc demo's warm-up: each workflow compiles in a process of its own (one per
    core) into the shared cache; this process compiles nothing, says so once, and the
    next call finds every stamp fresh."""
    code = ("import sys\n"
            "from numba.core import event\n"
            "from daskhpc._numba import _announcer, prepare_kernels\n"
            "here = _announcer(None, 'here')\n"
            "with event.install_listener('numba:compile', here):\n"
            "    r = prepare_kernels('allreduce', 'ssgd', command='demo', file=sys.stderr)\n"
            "print(r.compiled, here.compiled)\n")
    runs = [subprocess.run([sys.executable, "-c", code], env=_env(tmp_path),
                           capture_output=True, text=True, timeout=900, check=True)
            for _ in range(2)]
    compiled, here = map(int, runs[0].stdout.split())
    assert compiled > 0 and here == 0, runs[0].stdout
    assert runs[0].stderr.startswith(f"allreduce, ssgd: {MESSAGE}")
    assert runs[0].stderr.count("compiling") == 1 and "done in" in runs[0].stderr
    assert sorted(p.name for p in tmp_path.rglob("daskhpc-warmup-*.json")) == \
        ["daskhpc-warmup-allreduce-run.json", "daskhpc-warmup-ssgd-run.json"]
    assert runs[1].stdout.split() == ["0", "0"] and runs[1].stderr == ""


@pytest.mark.slow             # CI budget (20 min on 2 cores): default run keeps a lighter test of the same path
def test_console_script_says_compiling_on_the_first_run_only(tmp_path):
    cmd = [str(DASKHPC), "run", "allreduce", "--N", "10000", "--parts", "2", "--density",
           "0.01", "--workers", "1", "--json", "-"]
    runs = [subprocess.run(cmd, env=_env(tmp_path), capture_output=True, text=True,
                           timeout=600, cwd=ROOT, check=False) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr
        assert "compiling" not in r.stdout
        json.loads(r.stdout)                    # stdout is the report alone
    assert MESSAGE in runs[0].stderr and "done in" in runs[0].stderr
    assert "compiling" not in runs[1].stderr


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(RUNS))
def test_warm_up_covers_what_a_run_compiles(tmp_path, name):
    assert int(_prepare(tmp_path, name).stdout) > 0
    r = subprocess.run([str(DASKHPC), "run", name, *RUNS[name], "--workers", "1"],
                       env=_env(tmp_path, NUMBA_DEBUG_CACHE="1"), capture_output=True,
                       text=True, timeout=900, cwd=ROOT, check=False)
    assert r.returncode == 0, r.stderr
    assert _saved(r.stdout) == [], f"{name}: compiled after its warm-up"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PLANS))
def test_warm_up_covers_what_a_plan_compiles(tmp_path, name):
    _prepare(tmp_path, name, command="plan")
    r = subprocess.run([str(DASKHPC), "plan", name, *PLANS[name]],
                       env=_env(tmp_path, NUMBA_DEBUG_CACHE="1"), capture_output=True,
                       text=True, timeout=900, cwd=ROOT, check=False)
    assert r.returncode == 0, r.stderr
    assert _saved(r.stdout) == [], f"{name}: compiled after its plan warm-up"
