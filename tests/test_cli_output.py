"""What the command line shows: the JSON report alone on stdout with
``--json -``, progress on a terminal (and not when piped), human summaries instead of
``key=value`` dumps, and Ctrl-C ending a run with status 130 and no worker tracebacks.

The console script runs for real; a pseudo-terminal stands in for the user's terminal.
"""

import contextlib
import json
import os
import pty
import re
import select
import shutil
import signal
import subprocess
import sys
import time

import pytest

DASKHPC = shutil.which("daskhpc", path=os.path.dirname(sys.executable)) or "daskhpc"
KEY_VALUE = re.compile(r"\b[a-z_]+=[0-9]")     # "tot_vol=7170": the old dump


def _ratings(shared_data):
    return str(shared_data / "ratings" / "ml-latest-small" / "ratings.csv")


def piped(*argv, env=None, timeout=300):
    """Run the console script with stdout and stderr captured (not a terminal)."""
    return subprocess.run([DASKHPC, *map(str, argv)], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def on_a_terminal(*argv, interrupt_after=None, interrupt_when=None, timeout=300):
    """Run the console script on a pseudo-terminal; optionally send SIGINT to its process
    group (what Ctrl-C does) once ``interrupt_after`` appears in the output, or once
    ``interrupt_when(pid)`` is true.

    Returns (exit status, output, seconds from SIGINT to exit or None)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DASK_DASKHPC__RUNTIME__PROG")}
    pid, fd = pty.fork()
    if pid == 0:                                    # the child: the command on the pty
        os.execvpe(DASKHPC, [DASKHPC, *map(str, argv)], env)
    out, sent, t0 = b"", None, time.monotonic()
    while True:
        if time.monotonic() - t0 > timeout:
            os.killpg(pid, signal.SIGKILL)
            raise AssertionError(f"no exit within {timeout} s:\n{out.decode(errors='replace')}")
        if sent is None and (interrupt_after and interrupt_after.encode() in out
                             or interrupt_when is not None and interrupt_when(pid)):
            os.killpg(os.getpgid(pid), signal.SIGINT)
            sent = time.monotonic()
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                data = os.read(fd, 65536)
            except OSError:                          # EIO: the child closed the pty
                data = b""
            if not data:
                break
            out += data
    _, status = os.waitpid(pid, 0)
    after = None if sent is None else time.monotonic() - sent
    return os.waitstatus_to_exitcode(status), out.decode(errors="replace"), after


@pytest.mark.slow             # CI budget: test_info_json_alone_on_stdout keeps the rule
def test_partition_json_alone_on_stdout_and_table_on_stderr(shared_data):
    r = piped("partition", "column-net", _ratings(shared_data), "--parts", 2,
              "--partitioner", "kahypar", "--json", "-")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)                   # nothing but the report
    assert report["workflow"] == "partition" and report["parts"] == 2
    assert "km1" in r.stderr and "imbalance" in r.stderr     # the table went to stderr
    # piped: no progress lines (they are for a terminal)
    assert "done in" not in r.stderr


def test_info_json_alone_on_stdout():
    r = piped("info", "--json", "-")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["partitioners"]["mtkahypar"]
    assert "partitioners:" in r.stderr


@pytest.mark.slow      # ~14 s: three bundled data sets with every partitioner
def test_demo_without_cluster_json_alone_on_stdout():
    r = piped("demo", "--no-cluster", "--json", "-")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["partitions"]
    assert {x["partitioner"] for x in rows} == {"mtkahypar", "kahypar", "graph", "random",
                                                  "block"}
    by = {(x["data"], x["partitioner"]): x for x in rows}
    for data in ["ratings (ml-latest-small)", "cora", "umls tensor"]:
        assert by[data, "mtkahypar"]["km1"] < by[data, "random"]["km1"]
    assert "Partitioning the bundled data" in r.stderr and "km1/random" in r.stderr


def test_run_json_alone_on_stdout_with_a_human_summary_on_stderr(shared_data, client2):
    # the session's cluster, joined (a cluster of its own costs the CI budget ~8 s)
    r = piped("run", "ssgd", _ratings(shared_data), "--parts", 2,
              "--scheduler-address", client2.scheduler.address,
              "--epochs", 2, "--check-serial", "--json", "-")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["serial_check"]["identical"] is True
    # the summary a person reads: labelled lines, planned next to measured, no key=value
    assert "  traffic    planned " in r.stderr and " measured " in r.stderr
    assert "  serial     identical to the serial reference" in r.stderr
    assert "  quality    " in r.stderr and "test rmse" in r.stderr
    assert not KEY_VALUE.search(r.stderr), r.stderr


def test_progress_lines_in_a_log_when_asked(shared_data):
    r = piped("partition", "column-net", _ratings(shared_data), "--parts", 2,
              "--partitioner", "kahypar", env={"DASK_DASKHPC__RUNTIME__PROGRESS": "true"})
    assert r.returncode == 0, r.stderr
    assert re.search(r"reading ratings\.csv \.\.\. done in [0-9.]+ s", r.stderr), r.stderr
    assert re.search(r"kahypar: 2 parts of 610 vertices, 9,724 nets, 100,836 pins \.\.\. "
                     r"done in [0-9.]+ s", r.stderr), r.stderr
    assert "km1" in r.stdout and "done in" not in r.stdout


def test_partition_shows_progress_on_a_terminal(shared_data):
    status, out, _ = on_a_terminal("partition", "column-net", _ratings(shared_data),
                                   "--parts", 2, "--partitioner", "kahypar")
    assert status == 0, out
    # a ticking line, ended with the time taken, before the table
    assert re.search(r"\rkahypar: 2 parts of 610 vertices.*\.\.\. done in [0-9.]+ s", out), out
    assert out.index("done in") < out.index("imbalance")


def test_ctrl_c_exits_130_without_tracebacks(shared_data):
    status, out, after = on_a_terminal(
        "run", "ssgd", _ratings(shared_data), "--parts", 2, "--workers", 2,
        "--epochs", 2000, interrupt_after="ssgd epochs")
    assert after is not None, out                   # the run started and was interrupted
    assert status == 130, out
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out
    assert "daskhpc: interrupted" in out
    # not a hang: on_a_terminal's timeout bounds the close (no timing assertion: a
    # loaded machine took 50 s for the first epoch)


def _spawning_worker(pid):
    """Whether a worker process of ``pid``'s LocalCluster is being spawned (its
    multiprocessing child exists: it imports Dask for a second or more)."""
    kids = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):   # the thread that spawned it lists it
            with open(f"/proc/{pid}/task/{task}/children") as f:
                kids += f.read().split()
    for kid in kids:
        with contextlib.suppress(OSError), open(f"/proc/{kid}/cmdline", "rb") as f:
            if b"spawn_main" in f.read():
                return True
    return False


def test_ctrl_c_while_the_cluster_starts_exits_130_without_tracebacks(shared_data):
    # SIGINT to the group while a worker process is being spawned: the workers' own
    # Ctrl-C handling (a preload) is not installed yet, and the client is inside
    # LocalCluster's start-up
    status, out, after = on_a_terminal(
        "run", "ssgd", _ratings(shared_data), "--parts", 2, "--workers", 2,
        "--epochs", 2, interrupt_when=_spawning_worker)
    assert after is not None, out
    assert "starting a LocalCluster" in out, out
    assert status == 130, out
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out
    assert "AssertionError" not in out and "Exception ignored" not in out, out
    assert "daskhpc: interrupted" in out


def test_first_run_compile_ticks_on_a_terminal(tmp_path, monkeypatch):
    # an empty numba cache: the kernels compile (`daskhpc demo`: 40 s without a sign of life)
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    status, out, _ = on_a_terminal("plan", "allreduce", "--N", 100000, "--parts", 2,
                                   "--density", 0.001)
    assert status == 0, out
    # a ticking stage (tests/test_terminal_ticker.py shows that it ticks through a call
    # that holds the GIL); whether a tick is seen depends on how long numba takes here
    assert re.search(r"allreduce: compiling kernels \(first run only\) \.\.\.\r"
                     r"allreduce: compiling kernels \(first run only\) \.\.\.( [0-9]+ s\r"
                     r"allreduce: compiling kernels \(first run only\) \.\.\.)* "
                     r"done in [0-9.]+ s", out), out
