"""The floor of a direct-exchange step: what a Program step costs when it
computes nothing, on 1 and 2 workers, a task per unit against a task per window.

::

    python workflows/benchmarks/step_floor.py --rounds 3 --out floor.json
    python workflows/benchmarks/step_floor.py --transports --rounds 5 --units 200
    python workflows/benchmarks/step_floor.py --dask-floor --repeats 50

A toy :class:`~daskhpc.comm.Program` over 2 parts: per unit ``S - 1`` ring steps (each
part sends a ``--length``-vector of float64 to the other and adds what it got) and a
reported step. It runs with :func:`~daskhpc.runtime.run_job` on a LocalCluster of 2
workers (direct exchange: the messages cross between workers) and of 1 worker (every
part on it: no exchange), each with ``daskhpc.runtime.units-per-task`` 1 (a task per
unit) and 0 (a task per worker for the whole run), in
alternating order per round. Printed: milliseconds per step and per unit (whole run,
start-up included, over ``--units`` units), medians over rounds, and the ratios
per-unit / per-window on the same workers, with the 1-minute load.

``--dask-floor``: instead, what a run cannot go below on this machine: on one LocalCluster
of 2 workers, with Dask's message batching as configured and inside
:func:`~daskhpc.runtime.low_latency` (the intervals at 0, as the frame runs), the median
and minimum over ``--repeats`` of a no-op task from ``submit`` to its result, a scatter of
8 kB straight to a worker, a gather of 1.3 MB from one, a scheduler round trip
(``identity``), and a whole ``run_job`` of one unit of one step that computes nothing (the
frame's own cost of a run: its edges without any epochs).

``--transports``: instead, two clusters of 2 workers side by side, one with each
``daskhpc.runtime.transport`` (``socket``: the Exchange's own connections; ``dask``:
distributed's comm), a task per window, runs alternating; the ratio is dask / socket per
round.

Only the public API is used.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import time

import dask
import numpy as np

from daskhpc.comm import Plan, Program
from daskhpc.runtime import Job, connect, low_latency, run_job, worker_addresses


def _init(ctx, start):
    ctx.state["x"] = np.zeros(ctx.static)


def _ring(ctx):
    for v in ctx.inbox.values():
        ctx.state["x"] += v
    return {(ctx.part + 1) % ctx.nparts: ctx.state["x"]}


def _report(ctx):
    for v in ctx.inbox.values():
        ctx.state["x"] += v
    ctx.report(x0=float(ctx.state["x"][0]))


def _program(steps: int, units: int, length: int, first: int) -> Program:
    ring = Plan.from_messages(2, [(0, 0, 1, [0]), (0, 1, 0, [0])], words_per_unit=length)
    prog = Program(2, "floor", init=_init, final=lambda ctx: float(ctx.state["x"][0]))
    for _ in range(first, units):
        for _ in range(steps - 1):
            prog.step(_ring, sends=ring, label="ring")
        prog.step(_report, report=True, label="report")
    return prog


def _job(steps: int, units: int, length: int) -> Job:
    import functools

    return Job("floor", 2, units, row=lambda u, r: {"x0": r[0]["x0"]},
               statics=[length, length], program=functools.partial(_program, steps, units,
                                                                    length))


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--units", type=int, default=100)
    ap.add_argument("--length", type=int, default=1000)
    ap.add_argument("--steps", type=int, nargs="+", default=[1, 10],
                    help="steps per unit (the last one reports)")
    ap.add_argument("--transports", action="store_true",
                    help="compare the direct exchange's two transports on 2 workers")
    ap.add_argument("--dask-floor", action="store_true",
                    help="the floor of Dask's own calls and of a run that computes nothing")
    ap.add_argument("--repeats", type=int, default=50, help="--dask-floor: calls each")
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    if a.transports:
        return transports(a)
    if a.dask_floor:
        return dask_floor(a)
    got: dict = {}
    for workers in (2, 1):
        with connect(n_workers=workers) as client:
            run_job(client, _job(2, 5, a.length), progress_bar=False)      # warm up
            for r in range(a.rounds):
                order = (1, 0) if r % 2 == 0 else (0, 1)
                for steps in a.steps:
                    for per_task in order:
                        with dask.config.set({"daskhpc.runtime.units-per-task": per_task}):
                            dt = _timed(client, steps, a)
                        got.setdefault((workers, steps, per_task), []).append(dt)
    rows = []
    print(f"load {os.getloadavg()[0]:.2f}; {a.units} units, {a.rounds} rounds, "
          f"{8 * a.length} B messages")
    print(f"{'workers':>7} {'steps/unit':>10} {'per task':>8} {'ms/step':>8} {'ms/unit':>8}"
          f" {'unit/window':>11}")
    for (workers, steps, per_task), times in sorted(got.items()):
        med = statistics.median(times)
        ratios = [x / y for x, y in zip(times, got[(workers, steps, 0)])]
        row = {"workers": workers, "steps_per_unit": steps, "units_per_task": per_task,
               "ms_per_step": 1e3 * med / (a.units * steps),
               "ms_per_unit": 1e3 * med / a.units,
               "per_unit_over_per_window": statistics.median(ratios)}
        rows.append(row)
        print(f"{workers:>7} {steps:>10} {per_task or 'window':>8} "
              f"{row['ms_per_step']:>8.2f} {row['ms_per_unit']:>8.2f} "
              f"{row['per_unit_over_per_window']:>11.2f}")
    return _written(a, rows)


def _timed(client, steps: int, a) -> float:
    """Seconds of one run of ``a.units`` units of ``steps`` steps."""
    t = time.perf_counter()
    run_job(client, _job(steps, a.units, a.length), progress_bar=False)
    return time.perf_counter() - t


def _written(a, rows: list) -> dict:
    """The results (rows, the load and the run's size), also to ``--out`` if given."""
    out = {"load": os.getloadavg()[0], "units": a.units, "rounds": a.rounds,
           "message_bytes": 8 * a.length, "rows": rows}
    if a.out:
        with open(a.out, "w") as f:
            json.dump(out, f, indent=1)
    return out


def transports(a) -> dict:
    """Per step of a task per window, each transport on its own 2-worker cluster."""
    clients = {}
    for mode in ("socket", "dask"):
        with dask.config.set({"daskhpc.runtime.transport": mode}):
            clients[mode] = connect(n_workers=2)     # its workers keep the setting
        run_job(clients[mode], _job(2, 5, a.length), progress_bar=False)    # warm up
    got: dict = {}
    try:
        for r in range(a.rounds):
            for steps in a.steps:
                for mode in (("socket", "dask") if r % 2 == 0 else ("dask", "socket")):
                    got.setdefault((steps, mode), []).append(_timed(clients[mode], steps, a))
    finally:
        for client in clients.values():
            client.close()
    print(f"load {os.getloadavg()[0]:.2f}; {a.units} units, {a.rounds} rounds, "
          f"{8 * a.length} B messages, 2 workers, a task per window")
    print(f"{'steps/unit':>10} {'socket ms/step':>14} {'dask ms/step':>12} "
          f"{'dask/socket':>11}")
    rows = []
    for steps in a.steps:
        per = {m: 1e3 * statistics.median(got[(steps, m)]) / (a.units * steps)
               for m in ("socket", "dask")}
        ratio = statistics.median(x / y for x, y in zip(got[(steps, "dask")],
                                                          got[(steps, "socket")]))
        rows.append({"steps_per_unit": steps, "socket_ms_per_step": per["socket"],
                     "dask_ms_per_step": per["dask"], "dask_over_socket": ratio})
        print(f"{steps:>10} {per['socket']:>14.3f} {per['dask']:>12.3f} {ratio:>11.2f}")
    return _written(a, rows)


def _noop():
    return 1


def dask_floor(a) -> dict:
    """Milliseconds of Dask's own calls and of an empty run (module docstring)."""
    big = np.ones(1_300_000 // 8)
    rows = []
    with connect(n_workers=2) as client:
        w = worker_addresses(client)
        held = client.scatter(big, workers=[w[1]], direct=True)
        calls = {
            "task submit -> result": lambda: client.submit(_noop, pure=False,
                                                           workers=[w[0]]).result(),
            "scatter 8 kB": lambda: client.scatter(big[:1000], workers=[w[0]], direct=True,
                                                   hash=False),
            "gather 1.3 MB": lambda: client.gather(held),
            "scheduler identity": lambda: client.sync(client.scheduler.identity),
            "run_job of nothing": lambda: run_job(client, _job(1, 1, a.length),
                                                  progress_bar=False),
        }
        for batching in ("dask", "low_latency"):
            with (low_latency(client) if batching == "low_latency"
                  else contextlib.nullcontext()):
                for name, call in calls.items():
                    if name == "run_job of nothing" and batching == "low_latency":
                        continue              # the frame sets it itself during a run
                    for _ in range(5):
                        call()                                            # warm up
                    ts = []
                    for _ in range(a.repeats):
                        t = time.perf_counter()
                        call()
                        ts.append(1e3 * (time.perf_counter() - t))
                    rows.append({"call": name, "batching": batching,
                                 "median_ms": statistics.median(ts), "min_ms": min(ts)})
    print(f"load {os.getloadavg()[0]:.2f}; 2 workers, {a.repeats} calls each")
    print(f"{'call':>24} {'batching':>12} {'median ms':>10} {'min ms':>8}")
    for r in rows:
        print(f"{r['call']:>24} {r['batching']:>12} {r['median_ms']:>10.2f} "
              f"{r['min_ms']:>8.2f}")
    return _written(a, rows)


if __name__ == "__main__":
    main()
