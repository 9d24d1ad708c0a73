"""The scripted newcomer run: what a new user does, for real.

A copy of the repository as a fresh checkout has it (tracked and untracked non-ignored
files, uncommitted changes included), alone in a temporary directory: nothing beside it
(no ``../shared``), as a user has it. In it:

1. the README's set-up command, verbatim: a new ``.venv``, ``pip install .``,
   ``daskhpc demo``;
2. one ``daskhpc run <workflow> ... --workers 2 --json -`` per registered workflow on the
   installed package's bundled data, and ``partition``/``info``/``demo --json -``, each
   piped into ``python -m json.tool``;
3. every other ``sh`` command of README.md, verbatim, in the activated venv, from an empty
   directory outside the copy (after the variable assignments before it in its block:
   the bundled data's paths).

Slow (two pip installs, the demo twice, a 6-rank mpiexec job): run it with
``pytest -m slow tests/test_newcomer.py``. pip uses its cache (``~/.cache/pip`` unless
``PIP_CACHE_DIR`` says otherwise), so reruns install from it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
TEST_SUITE = " && .venv/bin/python -m pytest"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


def sh_blocks(text: str) -> list[tuple[int, list[str]]]:
    """(offset, commands) of every ```sh fence of a Markdown text, in order.

    Continuation lines are joined; blank lines and comment-only lines are dropped; a
    command keeps its trailing comment (bash ignores it).
    """
    out = []
    for m in re.finditer(r"^```sh\n(.*?)^```", text, re.MULTILINE | re.DOTALL):
        cmds, buf = [], ""
        for line in m.group(1).splitlines():
            if line.rstrip().endswith("\\"):
                buf += line.rstrip()[:-1] + " "
                continue
            line = buf + line
            buf = ""
            if line.strip() and not line.lstrip().startswith("#"):
                cmds.append(line.strip())
        out.append((m.start(), cmds))
    return out


def _block_after(marker: str) -> list[str]:
    at = README.index(marker)
    return next(cmds for start, cmds in sh_blocks(README) if start > at)


SETUP = _block_after("Install and run the main job")
TEST_SETUP = _block_after("<!-- ci: test command -->")
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def _with_assignments(cmds: list[str]) -> list[tuple[list[str], str]]:
    """(the block's variable assignments before it, command) of each other command."""
    out, assigned = [], []
    for c in cmds:
        if ASSIGNMENT.match(c):
            assigned.append(c)
        else:
            out.append((list(assigned), c))
    return out


# The two set-up blocks are not in the list: the first is test_readme_setup_command; the
# second ends by running the whole suite (this test included, recursively), so only its
# install part runs (the full_install fixture), never its pytest.
OTHERS = [pair for start, cmds in sh_blocks(README) if cmds not in (SETUP, TEST_SETUP)
          for pair in _with_assignments(cmds)]


def _newcomer_env() -> dict[str, str]:
    """This process's environment without what a newcomer's shell would not have: our
    venv on PATH, Python and Dask settings, pytest's variables."""
    ours = {str(Path(sys.prefix) / "bin"), str(ROOT / ".venv" / "bin")}
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DASK_", "PYTEST_"))
           and k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PIP_NO_CACHE_DIR")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if p.rstrip("/") not in ours)
    # one pip cache shared by every run of this test (and the user's own installs)
    env.setdefault("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip"))
    return env


def _copy_checkout(dest: Path) -> None:
    """The repository's files as a fresh clone with the working tree's changes has them."""
    names = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, names):
        src = ROOT / name
        if not src.exists() and not src.is_symlink():
            continue                      # deleted in the working tree
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / name, follow_symlinks=False)


class Shell:
    """bash in the copy, with a newcomer's environment; each call timed."""

    def __init__(self, repo: Path):
        self.repo, self.env = repo, _newcomer_env()

    def __call__(self, script: str, timeout: float, label: str | None = None,
                 venv: bool = True, cwd: Path | None = None) -> subprocess.CompletedProcess:
        if venv:                          # as a user who activated the venv
            script = f"source '{self.repo}/.venv/bin/activate'\n" + script
        t0 = time.perf_counter()
        done = subprocess.run(["bash", "-c", script], cwd=cwd or self.repo, env=self.env,
                              capture_output=True, text=True, timeout=timeout, check=False)
        print(f"{time.perf_counter() - t0:7.1f} s  {label or script}")   # shown by -s
        return done


def _shown(done: subprocess.CompletedProcess) -> str:
    return (f"exit {done.returncode}\n--- stdout (end)\n{done.stdout[-3000:]}"
            f"\n--- stderr (end)\n{done.stderr[-3000:]}")


@pytest.fixture(scope="module")
def newcomer(tmp_path_factory):
    """The copy after the README's set-up command: (shell, result of the command)."""
    base = tmp_path_factory.mktemp("newcomer")
    repo = base / "repo"
    repo.mkdir()
    _copy_checkout(repo)
    sh = Shell(repo)
    assert len(SETUP) == 1, SETUP
    done = sh(SETUP[0], timeout=900, label="README set-up", venv=False)
    return sh, done


@pytest.fixture(scope="module")
def ready(newcomer):
    """The shell, once the set-up command has installed the package."""
    sh, done = newcomer
    if done.returncode != 0 or not (sh.repo / ".venv" / "bin" / "daskhpc").exists():
        pytest.fail("the README set-up command failed (see test_readme_setup_command)")
    return sh


@pytest.fixture(scope="module")
def registered(ready) -> list[str]:
    """Workflow names the installed package registers (entry points daskhpc.workflows)."""
    done = ready("cd / && python -c 'from importlib.metadata import entry_points; "
                 "print(*sorted(e.name for e in entry_points(group=\"daskhpc.workflows\")))'",
                 timeout=60, label="entry points")
    assert done.returncode == 0, _shown(done)
    return done.stdout.split()


@pytest.fixture(scope="module")
def full_install(ready):
    """The install part of the README's test set-up command (.[test,mpi,docs]: the mpich
    wheel's mpiexec the README's HPC command needs)."""
    assert len(TEST_SETUP) == 1 and TEST_SETUP[0].endswith(TEST_SUITE), TEST_SETUP
    done = ready(TEST_SETUP[0].removesuffix(TEST_SUITE), timeout=900,
                 label="README test set-up without its pytest", venv=False)
    assert done.returncode == 0, _shown(done)
    return ready


def test_readme_setup_command(newcomer, request):
    """Installs into a fresh venv and the demo runs every registered workflow."""
    _, done = newcomer
    assert done.returncode == 0, _shown(done)
    assert "Traceback" not in done.stdout + done.stderr, _shown(done)
    registered = request.getfixturevalue("registered")
    assert set(registered) >= {"ssgd", "spgemm", "cpals", "gcn", "allreduce", "linear"}
    missing = [n for n in registered
               if not re.search(rf"^\W*{re.escape(n)}\b", done.stdout, re.MULTILINE)]
    assert not missing, f"demo output has no block for {missing}\n{_shown(done)}"


def _data(name: str) -> str:
    # From / : in the copy's root `python -c` would import the source tree (the current
    # directory comes first on sys.path); the installed package's files are what users have.
    return (f"\"$(cd / && python -c \"from daskhpc import datasets; "
            f"print(datasets.path('{name}'))\")\"")


# One small run per workflow on the package's bundled data.
RUNS = {
    "ssgd": f"run ssgd {_data('ratings')} --parts 2 --epochs 2",
    # the package bundles no square matrix the readers take (cora is an .npz): A A^T of
    # the ratings matrix
    "spgemm": f"run spgemm {_data('ratings')} --aat --parts 2",
    "cpals": f"run cpals {_data('tensor')} --parts 2 --rank 4 --iters 3",
    "gcn": "run gcn cora --parts 2 --epochs 5",       # a bundled name, as in the README
    "allreduce": "run allreduce --N 100000 --density 0.001 --parts 2",  # no input: uniform
    "linear": (f"run linear {_data('libsvm')} --test {_data('libsvm-test')} "
               "--parts 2 --epochs 1"),
}
OTHER_JSON = {
    "partition": f"partition column-net {_data('ratings')} --parts 2",
    "info": "info",
    "demo": "demo",
}


def _json_pipe(sh: Shell, args: str, label: str, timeout: float = 600) -> dict:
    """``daskhpc ARGS --json - | python -m json.tool``; both exit 0, the parsed report.

    ``tee`` keeps what daskhpc wrote (json.tool prints nothing when it cannot parse it).
    """
    seen = sh.repo.parent / ("stdout-" + re.sub(r"\W+", "-", label) + ".txt")
    script = (f"set -o pipefail\n"
              f"daskhpc {args} --json - | tee '{seen}' | python -m json.tool\n"
              "st=(\"${PIPESTATUS[@]}\")\n"
              "echo \"exit status: daskhpc ${st[0]}, json.tool ${st[2]}\" >&2\n"
              "[ \"${st[0]}\" = 0 ] && [ \"${st[2]}\" = 0 ]\n")
    done = sh(script, timeout=timeout, label=label)
    shown = f"{_shown(done)}\n--- daskhpc's stdout (start)\n{seen.read_text()[:2000]}"
    assert "exit status: daskhpc 0, json.tool 0" in done.stderr, shown
    assert done.returncode == 0, shown
    assert "Traceback" not in done.stderr, shown
    return json.loads(done.stdout)


def test_every_registered_workflow_has_a_run(registered):
    assert sorted(RUNS) == sorted(registered)


@pytest.mark.parametrize("workflow", sorted(RUNS))
def test_run_json_to_stdout_pipes_into_json_tool(ready, workflow):
    report = _json_pipe(ready, f"{RUNS[workflow]} --workers 2", f"run {workflow}")
    keys = {"command", "workflow", "parts", "plan", "measured", "timing", "quality"}
    assert keys <= set(report), sorted(keys - set(report))
    assert report["workflow"] == workflow and report["parts"] == 2
    assert report["command"].startswith(f"daskhpc run {workflow} ")
    assert report["plan"] and report["quality"]
    assert report["measured"]["inter_worker_bytes"] > 0     # two workers talked


def test_partition_json_to_stdout(ready):
    report = _json_pipe(ready, OTHER_JSON["partition"], "partition")
    assert report["command"].startswith("daskhpc partition column-net ")
    assert report["parts"] == 2
    assert {"imbalance", "km1", "soed", "cut"} <= set(report["partition"])


def test_info_json_to_stdout(ready, registered):
    report = _json_pipe(ready, OTHER_JSON["info"], "info")
    assert report["command"] == "daskhpc info --json -"
    assert sorted(report["workflows"]) == sorted(registered)


def test_demo_json_to_stdout(ready, registered):
    report = _json_pipe(ready, OTHER_JSON["demo"], "demo --json -", timeout=900)
    assert report["command"] == "daskhpc demo --json -"
    assert sorted(report["workflows"]) == sorted(registered)
    for name, block in report["workflows"].items():
        assert "measured" in block and "timing" in block, name


def _id(command: str) -> str:
    return command.split("  #")[0][:90].strip()


@pytest.fixture(scope="module")
def elsewhere(ready) -> Path:
    """An empty directory outside the copy: where a user runs the README's commands."""
    where = ready.repo.parent / "elsewhere"
    where.mkdir()
    return where


@pytest.mark.parametrize(("assignments", "command"), OTHERS,
                         ids=[_id(c) for _, c in OTHERS])
def test_readme_command_runs_as_written(ready, elsewhere, assignments, command, request):
    if command.startswith("mpiexec"):
        request.getfixturevalue("full_install")   # the mpich wheel's mpiexec: .[mpi]
    script = "\n".join(["set -e -o pipefail", *assignments, command])
    done = ready(script, timeout=900, label=command, cwd=elsewhere)
    assert done.returncode == 0, _shown(done)
    assert "Traceback" not in done.stdout + done.stderr, _shown(done)
