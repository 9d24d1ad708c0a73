"""Progress of long runs: a bar on a terminal, lines in a job log, silence elsewhere."""

from __future__ import annotations

import io
import os
import select
import time

import dask.config
import pytest

import daskhpc as dh
from daskhpc import spgemm
from daskhpc.runtime._progress import progress


def _slow(i):
    time.sleep(0.05)
    return i


def test_mode_follows_the_setting_and_the_terminal():
    log = io.StringIO()                       # not a terminal
    assert progress([], "x", file=log).mode == "off"
    with dask.config.set({"daskhpc.runtime.progress": True}):
        assert progress([], "x", file=log).mode == "lines"
    with dask.config.set({"daskhpc.runtime.progress": "false"}):   # as from the environment
        assert progress([], "x", file=log).mode == "off"
    master, slave = os.openpty()              # a real terminal
    with os.fdopen(slave, "w") as tty:
        assert progress([], "x", file=tty).mode == "bar"
        with dask.config.set({"daskhpc.runtime.progress": False}):
            assert progress([], "x", file=tty).mode == "off"
    os.close(master)
    with pytest.raises(ValueError, match="unknown progress mode"):
        progress([], "x", mode="fancy")


def test_lines_in_a_job_log(dash_client):
    futs = dash_client.map(_slow, range(6))
    log = io.StringIO()
    with progress(futs, "steps", mode="lines", file=log, interval=0.0):
        assert dash_client.gather(futs) == list(range(6))
    lines = log.getvalue().splitlines()
    assert lines[-1].startswith("steps: 6/6 done in ")
    assert len(lines) >= 2 and all(line.startswith("steps: ") for line in lines)
    assert sum("6/6" in line for line in lines) == 1       # the end is said once


def test_bar_on_a_terminal(dash_client):
    futs = dash_client.map(_slow, range(4), pure=False)
    master, slave = os.openpty()
    with os.fdopen(slave, "w") as tty:
        with progress(futs, "steps", file=tty):
            dash_client.gather(futs)
        out = ""
        while not out.endswith("\n") and select.select([master], [], [], 5)[0]:
            out += os.read(master, 65536).decode()   # a pty hands output over in pieces
    os.close(master)
    assert "\rsteps [####################] 4/4" in out and out.endswith("s\r\n")


@pytest.mark.timeout(1200)    # a whole SpGEMM run: over 300 s at load 40 (two full runs at once)
def test_spgemm_reports_its_batches(dash_client, capsys):
    a = dh.datasets.cora().adjacency
    with dask.config.set({"daskhpc.runtime.progress": True}):
        spgemm.multiply(a, client=dash_client, grid="1x1x2", consume="count", batches=3)
    assert "spgemm batches: 3/3 done in" in capsys.readouterr().err


def test_a_log_hears_from_a_run_whose_steps_are_slow():
    """In a log, lines come every interval while the run goes, not only when a step ends;
    while the count stands still they slow down (each repeat doubles the gap)."""
    log = io.StringIO()
    interval = 0.05
    with progress(3, "steps", mode="lines", file=log, interval=interval) as bar:
        bar.advance()
        time.sleep(30 * interval)                 # a long step: no step ends
        bar.advance()
    lines = log.getvalue().splitlines()
    assert lines[0].startswith("steps: 1/3 after ")       # the first step at once
    repeats = sum(line.startswith("steps: 1/3 after ") for line in lines)
    # 30 intervals, gaps of 1, 2, 4, 8, 16 intervals: the first line and 4 more if the
    # thread keeps up, fewer on a busy machine, 1 without it; 31 if they did not slow down
    assert 3 <= repeats <= 6, lines
    assert lines[-1].startswith("steps: 3/3 done in ")
    elapsed = [float(line.split()[-2]) for line in lines[:repeats]]
    assert elapsed == sorted(elapsed)
