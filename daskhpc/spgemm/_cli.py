"""SpGEMM as a :class:`~daskhpc.runtime.Workflow`: ``daskhpc plan|run spgemm``, the demo."""

from __future__ import annotations

import time
import scipy.sparse as sp

from daskhpc._workflows import Call, RunOptions, Workflow
from daskhpc.errors import InputError
from daskhpc.report import new_report

from ._setup import Options, parse_batches


class Spgemm(Workflow):
    """Memory-constrained batched 2D/3D SUMMA SpGEMM (Hussain et al., IPDPS 2021)."""

    name = "spgemm"
    help = "batched 2D/3D sparse SUMMA SpGEMM (C = A·B, A·Aᵀ) with a memory budget"
    Options = Options
    inputs = "A (and B) as MatrixMarket, SNAP, LIBSVM or ratings files"
    exchange = False

    def check(self, call: Call) -> None:
        """Every option and the inputs, before a cluster starts."""
        import os

        from ._consumers import Write, parse_consumer
        from ._data import check_inputs

        consumer = parse_consumer(call.options.consume)
        if isinstance(consumer, Write):          # the workers write there: it must exist
            try:
                os.makedirs(consumer.directory, exist_ok=True)
            except OSError as e:
                raise InputError(f"--consume write:{consumer.directory}: cannot create the "
                                  f"directory ({e.strerror})") from e
        a, b, info = call.data = _inputs(call)
        try:                    # shapes, NaN, empty: before the cluster starts
            check_inputs(a, b)
        except InputError as e:
            names = [info["path"]] + ([info["b"]["path"]] if "b" in info else [])
            raise InputError(f"{' and '.join(names)}: {e}") from None
        _mask(call.options, a, b)

    def plan(self, call: Call) -> dict:
        """Symbolic only: b, per-step volumes, Table II, alpha-beta estimate; no cluster."""
        from daskhpc.comm import network_model, plan_network

        from ._api import choose_grid, plan

        o = call.options
        a, b, info = call.data or _inputs(call)
        t0 = time.perf_counter()
        model = rows = None
        if call.network is not None or o.grid == "auto":
            model = network_model(plan_network(call.network), exchange="graph")
        kw = dict(memory_per_worker=o.memory_per_worker, batches=parse_batches(o.batches),
                  seed=_seed(o), alpha=o.alpha, beta=o.beta, semiring=o.semiring,
                  mask=_mask(o, a, b), complement=o.mask_complement)
        if o.grid == "auto":
            if not call.parts:
                raise InputError("--grid auto chooses among the grids of --parts cells: "
                                 "give --parts")
            grid, rows = choose_grid(a, b, call.parts, model, workers=call.parts, **kw)
        else:
            grid = _grid(o, call.parts or 1, call.parts)
        out = plan(a, b, grid=grid, workers=call.parts or grid.p, network=model, **kw)
        quality = out.pop("quality")
        quality["batches"] = out["batches"]
        return new_report(self.name, input=info, parts=grid.p, seed=_seed(o),
                          grid=out.pop("grid"), plan=out, layouts=rows,
                          timing={"plan_s": time.perf_counter() - t0}, quality=quality)

    def run(self, call: Call, run: RunOptions) -> dict:
        """Multiply on the connected cluster and report."""
        from daskhpc.runtime import worker_addresses

        from ._api import multiply, warn_over_budget

        o = call.options
        a, b, info = call.data or _inputs(call)
        rows = None
        if o.grid == "auto":      # the fastest grid on this cluster (calibrate by default)
            grid, rows, model = _auto_grid(o, a, b, call.parts, run)
        else:
            grid = _grid(o, len(worker_addresses(run.client)), call.parts)
            if run.network is not None:       # the given grid's prediction
                _, rows, model = _auto_grid(o, a, b, call.parts, run, [grid])
        res = multiply(a, b, grid=grid, memory_per_worker=o.memory_per_worker,
                       local=o.local, batches=parse_batches(o.batches), consume=o.consume,
                       window=o.window, seed=_seed(o), semiring=o.semiring,
                       mask=_mask(o, a, b), complement=o.mask_complement, run=run)
        res.info["input"] = info
        if rows is not None:
            if o.grid == "auto":
                res.info["layouts"] = rows
            chosen = next(r for r in rows if r["layout"] == str(grid))
            res.info.setdefault("plan", {}).update(
                predicted_s_per_step=chosen["predicted_s_per_step"],
                prediction={**{k: v for k, v in chosen.items() if k != "layout"},
                            "network": model.as_dict()})
        if res.info.get("mask"):
            res.info["mask"]["path"] = o.mask
        return warn_over_budget(res.report())     # over the budget: a warning, exit 0

    def summary(self, report: dict) -> str:
        """The common summary; where ``--save DIR`` put C when the workers wrote it."""
        from daskhpc.report import format_bytes, summarize

        saved = report.get("saved")
        if not (isinstance(saved, dict) and "files" in saved):
            return summarize(report)
        return summarize({k: v for k, v in report.items() if k != "saved"}) + (
            f"\n  saved      C as {saved['files']} save_npz piece(s) written by the "
            f"workers, {format_bytes(saved['bytes'])}, in {saved['dir']}")

    def demo(self, client) -> dict:
        return demo(client)

    def small_run(self) -> list:
        from daskhpc import datasets

        return [datasets.path("ratings"), "--aat", "--grid", "1x1x3", "--batches", "3",
                "--consume", "count", "--check-serial"]


def _read(path):
    from daskhpc.io import read

    m = read(path).matrix
    if m is None:
        raise InputError(f"{path}: a matrix is needed, not a tensor")
    return m


def _inputs(call: Call):
    o, inputs = call.options, call.inputs
    if not inputs:
        raise InputError("give the matrix A")
    if len(inputs) > 2 or (len(inputs) == 2 and o.b):
        raise InputError("give A (and B with --b, or as a second input), not more")
    a = _read(inputs[0])
    b_path = o.b or (inputs[1] if len(inputs) == 2 else None)
    if b_path and o.aat:
        raise InputError("--b and --aat exclude each other")
    b = sp.csr_array(a.T) if o.aat else _read(b_path) if b_path else a
    info = {"path": inputs[0], "shape": list(a.shape), "nnz": int(a.nnz)}
    if b_path:
        info["b"] = {"path": b_path, "shape": list(b.shape), "nnz": int(b.nnz)}
    if o.aat:
        info["product"] = "A·Aᵀ"
    return a, b, info


def _mask(o: Options, a, b):
    """The mask of ``--mask FILE`` (read like A, C's shape), or None."""
    if not o.mask:
        return None
    from daskhpc import datasets

    from ._setup import check_mask

    return check_mask(datasets.resolve(o.mask), (a.shape[0], b.shape[1]))


def _grid(o: Options, nworkers: int, parts: int | None = None):
    """``--grid``; else ``--parts`` cells (one per part); else the worker count's grid."""
    from ._grid import Grid

    if o.grid:
        return Grid.parse(o.grid)
    return Grid.one_per_part(parts, o.layers) if parts else \
        Grid.for_workers(nworkers, o.layers)


def _auto_grid(o: Options, a, b, parts, run, candidates=None):
    """``--grid auto``: ``(grid, rows, model)``, priced on ``--network`` or this cluster."""
    from daskhpc.runtime import network_for, worker_addresses

    from ._api import choose_grid

    workers = worker_addresses(run.client)
    # a multiply is a task graph: its messages cost what the graph exchange's do
    model = network_for(run.network, run.client, "graph", auto=True)
    grid, rows = choose_grid(a, b, parts or len(workers), model, candidates,
                             workers=len(workers), memory_per_worker=o.memory_per_worker,
                             batches=parse_batches(o.batches), seed=_seed(o),
                             semiring=o.semiring, mask=_mask(o, a, b),
                             complement=o.mask_complement)
    return grid, rows, model


def _seed(o: Options):
    return o.seed if o.permute else None


def demo(client) -> dict:
    """Cora (bundled, 2,708 nodes): A·A on a 1x1x2 grid in 2 batches, counted, checked."""
    from daskhpc.datasets import cora
    from daskhpc.spgemm._api import multiply

    a = cora().adjacency
    t0 = time.perf_counter()
    res = multiply(a, a, client=client, grid="1x1x2", memory_per_worker="2MB",
                   consume="count", check_serial=True)
    res.info.update(command="daskhpc demo", demo_s=time.perf_counter() - t0,
                    input={"path": "daskhpc.datasets.cora", "shape": list(a.shape),
                           "nnz": int(a.nnz)})
    return res.report()
