"""The ticking stage line keeps ticking while a native call holds the GIL (the
a9a partitioning line jumped from 1 s to 42 s under Mt-KaHyPar and KaHyPar)."""

from __future__ import annotations

import re
import subprocess
import sys

# A call that holds the GIL for 3.5 s, as a partitioner's native call does: a busy loop
# with a switch interval longer than the loop (no other thread runs meanwhile).
SCRIPT = r"""
import sys, time
from daskhpc._terminal import stage
sys.setswitchinterval(60)
with stage("partitioning", mode="tick", file=sys.stdout):
    t = time.perf_counter()
    while time.perf_counter() - t < 3.5:
        pass
"""


def test_the_stage_ticks_while_the_gil_is_held():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True,
                         timeout=280).stdout.decode()          # bytes: keep the \r
    ticks = [int(n) for n in re.findall(r"\rpartitioning \.\.\. (\d+) s", out)]
    assert ticks[:2] == [1, 2], out                     # each second, during the call
    assert re.search(r"partitioning \.\.\. done in [0-9.]+ s", out), out
