"""A part's init runs off the worker's event loop: building a large part's state takes
minutes, and a loop blocked that long sends no heartbeat (the run would count the worker
lost after ``daskhpc.runtime.host-timeout`` seconds)."""

from __future__ import annotations

import asyncio
import functools

import pytest

from daskhpc.runtime import Job, run_job
from daskhpc.testing import toy_program, toy_row

LENGTH = 20


def _on_a_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _init(ctx, start, init=None):
    init(ctx, start)
    ctx.state["init_on_loop"] = _on_a_loop()


def _final(ctx):
    return ctx.state["init_on_loop"]


def _program(K, units, first_unit):
    prog = toy_program(K, units, length=LENGTH, first_unit=first_unit)
    prog.init, prog.final = functools.partial(_init, init=prog.init), _final
    return prog


@pytest.mark.parametrize("in_loop", [True, False])
def test_init_runs_off_the_event_loop(client2, in_loop):
    job = Job("toy", 2, 2, row=toy_row, fingerprint={"K": 2, "length": LENGTH},
              program=functools.partial(_program, 2, 2), statics=[LENGTH] * 2,
              exchange="direct", in_loop=in_loop)
    out = run_job(client2, job, progress_bar=False)
    assert out.execution["in_loop"] is in_loop
    assert out.value == [False, False]
