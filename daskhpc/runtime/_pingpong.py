"""Ping-pong and ring Programs: the per-message cost of each exchange mode
(:func:`daskhpc.runtime.calibrate_exchange`)."""

from __future__ import annotations

import numpy as np

from daskhpc.comm import Plan, Program


def _init(ctx, start):
    ctx.state["buf"] = np.ones(int(ctx.static), dtype=np.uint8)


def _bounce(ctx, sender: int):
    if ctx.part != sender:
        return None
    return {1 - ctx.part: ctx.state["buf"]}


def _pass(ctx, fan=1):
    return {(ctx.part + k) % ctx.nparts: ctx.state["buf"] for k in range(1, fan + 1)}


def _lap(ctx):
    ctx.report(done=1)


def pingpong_program(steps: int, nbytes: int, units: int = 1, first_unit: int = 0) -> Program:
    """``units`` units of ``steps`` messages between two parts, alternating direction, then
    a reported step that sends nothing."""
    prog = Program(2, "pingpong", init=_init, first_unit=first_unit)
    plans = [Plan(2, [0], [p], [1 - p], volume=[int(nbytes)], unit="bytes",
                  words_per_unit=1, word_bytes=1) for p in (0, 1)]
    for _ in range(first_unit, units):
        for i in range(steps):
            prog.step(_bounce, i % 2, sends=plans[i % 2], label="bounce")
        prog.step(_lap, report=True, label="lap")
    return prog


def ring_program(steps: int, nparts: int, units: int = 1, nbytes: int = 8,
                 first_unit: int = 0, fan: int = 1) -> Program:
    """``units`` units of ``steps`` steps in which every part sends ``nbytes`` to each of
    the next ``fan`` parts, then a reported step."""
    prog = Program(nparts, "ring", init=_init, first_unit=first_unit)
    ring = ring_plan(nparts, nbytes, fan)
    for _ in range(first_unit, units):
        for _ in range(steps):
            prog.step(_pass, fan, sends=ring, label="pass")
        prog.step(_lap, report=True, label="lap")
    return prog


def ring_plan(K: int, nbytes: int, fan: int = 1) -> Plan:
    """The Plan of a step in which every part sends ``nbytes`` to each of the next ``fan``."""
    src = np.repeat(np.arange(K), fan)
    dst = (src + np.tile(np.arange(1, fan + 1), K)) % K
    return Plan(K, [0] * src.size, src.tolist(), dst.tolist(), volume=[int(nbytes)] * src.size,
                unit="bytes", words_per_unit=1, word_bytes=1)


def pingpong_row(unit: int, reports: dict) -> dict:
    return {"done": sum(v["done"] for v in reports.values())}
