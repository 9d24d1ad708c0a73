"""A small workflow defined outside the package, over the Workflow protocol only: a
distributed, repeated sum of a sparse vector whose nonzeros are split over K parts.

Every iteration each part contributes the sum of its entries to a dense allreduce
(``Program.allreduce``), then damps its entries towards the mean of the total:
``x <- x / 2 + total / (2 nnz) + 0.01 t`` in iteration t. The history row is the total of each iteration.
Registered by the tests with one entry point, ``toysum = "toysum:ToySum"``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from daskhpc.comm import Program, run_local
from daskhpc.report import WorkflowResult, new_report, summarize
from daskhpc.runtime import Call, RunOptions, Workflow, option


@dataclass
class Options:
    iters: int = option(5, "iterations", modes=("run",), bounds=(1, None))
    size: int = option(1000, "length of the random vector (input 'random')", bounds=(10, None))
    seed: int = option(0, "seed of the random vector")


def vector(data, o: Options):
    """The nonzeros ``(idx, val)``: a ``.npz`` with ``idx``/``val``, or ``random``."""
    if data == "random":
        rng = np.random.default_rng(o.seed)
        idx = np.sort(rng.choice(o.size, o.size // 10, replace=False))
        return idx, rng.standard_normal(idx.size)
    with np.load(data) as f:
        return f["idx"], f["val"]


def statics(idx, val, K):
    return [{"idx": i, "val": v} for i, v in zip(np.array_split(idx, K), np.array_split(val, K))]


def _init(ctx, start):
    ctx.state["x"] = np.array(start["x"]) if start else ctx.static["val"].copy()
    ctx.state["n"] = ctx.static["n"]


def _get(ctx):
    return np.array([ctx.state["x"].sum()])


def _put(ctx, total):
    ctx.state["x"] = 0.5 * ctx.state["x"] + total[0] / (2 * ctx.state["n"]) + 0.01 * ctx.unit
    ctx.report(total=float(total[0]))


def program(K, iters, first_unit=0):
    prog = Program(K, "toysum", init=_init, final=lambda ctx: ctx.state["x"],
                   save=lambda ctx: {"x": ctx.state["x"]}, first_unit=first_unit)
    for _ in range(first_unit, iters):
        prog.allreduce(_get, _put, words=1, report=True)
    return prog


def row(unit, reports):
    return {"total": reports[0]["total"]}


def plan_report(K):
    """One iteration's messages (the allreduce rounds), in the papers' metrics."""
    return program(K, 1).plan().report()


def fit(data, nparts=None, *, iters=5, size=1000, seed=0, run=None, **run_options):
    """The distributed sum on ``run.client``'s cluster (the same bits as ``run_local``)."""
    from daskhpc.runtime import Job, connected, run_job, worker_addresses

    run = RunOptions.of(run, **run_options)
    o = Options(iters, size, seed)
    idx, val = vector(data, o)
    with connected(run) as client:
        K = nparts or len(worker_addresses(client))
        parts = [dict(s, n=idx.size) for s in statics(idx, val, K)]
        job = Job("toysum", K, iters, row=row, fingerprint={"n": int(idx.size), "K": K},
                  program=functools.partial(program, K, iters), statics=parts,
                  assemble=np.concatenate, unit_name="iterations", exchange=run.exchange)
        out = run_job(client, job, **run.frame())
        info = {"command": run.command, "input": {"nnz": int(idx.size)}, "parts": K,
                "plan": plan_report(K), "measured": out.measured, "timing": out.timing,
                "execution": out.execution, "recovery": out.recovery,
                "quality": {"total": out.history[-1]["total"]}}
        if run.check_serial:
            finals, _ = run_local(program(K, iters), parts)
            same = np.array_equal(np.concatenate(finals), out.value)
            info["serial_check"] = {"done": True, "identical": bool(same)}
        return run.finish(ToyResult(info, out.history))


class ToyResult(WorkflowResult):
    workflow = "toysum"
    COLUMNS = (("unit", "iteration", "{:>9d}"), ("total", "total", "{:<12.6g}"),
               *WorkflowResult.COLUMNS[-3:])


class ToySum(Workflow):
    name = "toysum"
    help = "a distributed repeated sum of a sparse vector (the protocol's test workflow)"
    Options = Options
    inputs = "a .npz with idx and val, or 'random'"
    kernels = "toysum"          # no numba here: an empty warm-up

    def plan(self, call: Call) -> dict:
        K = call.parts_or(None, "toysum")
        return new_report("toysum", parts=K, plan=plan_report(K))

    def run(self, call: Call, run: RunOptions) -> dict:
        o = call.options
        return fit(call.one_input("vector"), call.parts, iters=o.iters, size=o.size,
                   seed=o.seed, run=run).report()

    def summary(self, report: dict) -> str:
        return summarize(report)
