"""The public functions: ``multiply`` (distributed), ``serial_multiply``, ``plan``."""

from __future__ import annotations

import functools
import os
import time
import warnings

import numpy as np
import scipy.sparse as sp

from daskhpc.comm import CostModel
from daskhpc._workflows import RunOptions
from daskhpc.errors import InputError

from ._grid import Grid
from ._layouts import grids, multiply_cost
from ._memory import warm_up
from ._plan import plan_sections
from ._data import like_input
from ._result import SpgemmResult
from ._serial import serial_check
from ._saving import pieces_descriptor, prepare_save
from ._setup import Setup, prepare
from ._symbolic import (BYTES_PER_UNMERGED, WORKING_HEADROOM, batch_lower_bound,
                        planned_batches)


def multiply(a, b=None, *, grid=None, memory_per_worker=None, batches="auto",
             consume="keep", window: int = 1, seed: int | None = 0,
             r: float = BYTES_PER_UNMERGED, plan: bool = True, measure_memory: bool = True,
             mask=None, local: str = "fused", keep: str = "client", columns=None,
             semiring: str = "plus_times", complement: bool = False,
             run: RunOptions | None = None, **run_options) -> SpgemmResult:
    """C = A·B with BatchedSumma3D on a Dask cluster, consumed batch by batch.

    Parameters
    ----------
    a, b : scipy sparse, dense array, path, or Dask collection
        A (m x k) and B (k x n); ``b=None`` squares A. A path is read with
        :func:`daskhpc.io.read`. C is a ``csr_matrix`` for ``spmatrix`` inputs, else a
        ``csr_array``. A Dask DataFrame of (row, col, value) triplets or a Dask Array of
        sparse chunks is read on the workers (docs/collections.md).
    grid : "QxQxL" or Grid, optional
        Default :meth:`Grid.for_workers`; more cells than workers are dealt round robin.
    memory_per_worker : bytes or str like "512MB", optional
        Budget M/W of Algorithm 3; required for ``batches="auto"`` to batch.
    batches : "auto" or int
        ``auto``: b from Symbolic3D (line 12); an int forces b.
    consume : str or Consumer
        ``keep``, ``count``, ``write:DIR``, ``prune:K``, ``threshold:X`` or an object.
    window : int
        w, batches in flight.
    seed : int or None
        Random permutation for load balance; None keeps the given order.
    r : float
        Bytes per nonzero in the memory model (Algorithm 3's r).
    plan : bool
        Compute the plan for the actual nnz on the client while the batches run.
    mask : scipy sparse, dense array or path, optional
        ``C<M> = A·B``: only the entries of C in M's pattern are formed, counted and
        consumed. Must be C's shape.
    complement : bool
        ``C<!M>``: only the entries *not* in the pattern of M.
    semiring : {"plus_times", "min_plus", "max_plus", "max_times", "or_and", "plus_pair"}
        GraphBLAS semantics over the structural nonzeros: C has an entry wherever the
        pattern product has one, whatever its value. plus_times keeps scipy's convention
        (entries that cancel to exactly 0 are dropped by ``keep``/``count``).
    local : {"fused", "staged"}
        ``fused``: all stages into one accumulator per column; ``staged`` (Algorithm 1):
        Local-Multiply per SUMMA stage, then Merge-Layer.
    keep : {"client", "workers"}
        Where a kept C ends: one CSR matrix on the client, or a ``dask.array.Array`` of
        ``csr_matrix`` chunks left on the workers (compute it with the run's client).
    columns : list of str, optional
        A DataFrame input's row, column and value columns (default: its columns in order).
    run : RunOptions, optional
        :class:`daskhpc.runtime.RunOptions`, or its fields as keywords. ``save``: the
        workers write C as ``save_npz`` pieces (``daskhpc.load(save).matrix`` reads it).

    Returns
    -------
    SpgemmResult

    Examples
    --------
    >>> res = multiply(A, client=client, grid="2x2x1", consume="count")   # doctest: +SKIP
    >>> res.value["nnz"] == (A @ A).nnz                                  # doctest: +SKIP
    True

    References
    ----------
    Hussain, Selvitopi, Buluç, Azad. Communication-Avoiding and Memory-Constrained
    Sparse Matrix-Matrix Multiplication at Extreme Scale. IPDPS 2021, Algorithm 4.
    """
    from daskhpc.runtime import connected, worker_addresses

    t_start = time.perf_counter()
    run = RunOptions.of(run, **run_options)
    with connected(run) as client:
        sources, given = _sources(client, a, b, columns, run.check_serial)
        pa, pb = (a, b) if not sources else given["patterns"]
        s = prepare(pa, pb, grid=grid, nworkers=len(worker_addresses(client)),
                    memory_per_worker=memory_per_worker, batches=batches, consume=consume,
                    window=window, seed=seed, r=r, local=local, mask=mask, keep=keep,
                    semiring=semiring, complement=complement)
        s.sources = sources or None
        files = prepare_save(run.save) if run.save and s.consumer.keeps else None
        try:
            res = _run(client, s, run, plan=plan, measure_memory=measure_memory,
                       t_start=t_start, save=files)
        finally:
            for nz in sources.values():
                nz.release()
        if sources:
            res.info["input"]["collections"] = {n: {"pieces": int(nz.offsets.size - 1),
                                                    "columns": nz.columns}
                                                for n, nz in sources.items()}
        if run.check_serial:
            res.info["serial_check"] = serial_check(s, res, *given.get("values", ()))
        if isinstance(a, (str, os.PathLike)):
            res.info["input"]["path"] = os.fspath(a)
        return run.finish(as_given(res, a, b))


def _sources(client, a, b, columns, values: bool) -> tuple[dict, dict]:
    """The collection inputs and the patterns ``prepare`` takes (with ``values``, A and B)."""
    from daskhpc.io import is_collection

    if not any(x is not None and is_collection(x) for x in (a, b)):
        if columns is not None:
            raise InputError("columns= is for a Dask DataFrame input")
        return {}, {}
    from ._collect import pattern, read_inputs, shapes

    sources = read_inputs(client, a, b, columns)
    sa, sb = shapes(sources, a, b)
    pa = pattern(sources["A"], sa) if "A" in sources else a
    pb = None if b is None else (pattern(sources["B"], sb) if "B" in sources else b)
    given = {"patterns": (pa, pb)}
    if values:
        def full(name, x, shape):
            if name not in sources:
                return x
            nz = sources[name]
            m = sp.csr_array((nz.gather_values(client), (nz.pins[0], nz.pins[1])),
                             shape=shape)
            m.sum_duplicates()
            return m
        fa = full("A", a, sa)
        given["values"] = (fa, fa if b is None else full("B", b, sb))
    return sources, given


def as_given(res: SpgemmResult, *inputs) -> SpgemmResult:
    """``res`` with C as the kind of matrix the user gave (:func:`._data.like_input`)."""
    kept = like_input(res.matrix, *inputs)
    if res.value is res.matrix:
        res.value = kept
    res.matrix = kept
    return res


def warn_over_budget(report: dict) -> dict:
    """The CLI's end of a run: a peak over the budget is a warning, not a failure."""
    over = over_budget(report.get("memory") or {})
    if over:
        warnings.warn(over, stacklevel=2)
    return report


def over_budget(memory: dict) -> str | None:
    """One line naming the worker whose measured peak went over the budget, or None."""
    if memory.get("within_budget") is not False:
        return None
    from daskhpc.report import format_bytes

    w, peak = max(memory["peak_increase_per_worker"].items(), key=lambda kv: kv[1])
    budget = memory["budget_per_worker"]
    return (f"spgemm: worker {w} peaked {format_bytes(peak)} above its baseline, "
            f"{peak / budget:.2f}x the memory budget of {format_bytes(budget)} a worker (the "
            "product is complete; more batches or a larger budget)")


def _run(client, s: Setup, run: RunOptions, *, plan, measure_memory, t_start,
         save=None) -> SpgemmResult:
    from daskhpc import dashboard
    from daskhpc.runtime import Phase, release_futures, run_phases, worker_addresses

    from . import _job as D

    g, workers = s.grid, worker_addresses(client)
    if s.semiring or s.mask is not None:   # its kernel: compiled once here, loaded there
        warm_up(s.semiring, s.mask is not None)
    t_prep = time.perf_counter()
    ph = D.Phases(s, plan=plan, measure_memory=measure_memory, save=save)
    outs = run_phases(
        client, [Phase("symbolic", ph.symbolic, checkpointed=False, shown=False, plan=False),
                 Phase("batches", ph.batches, plan=False)],
        name="spgemm", nparts=g.p, part_of=lambda c: g.rank(*c), fingerprint=ph.fp,
        label=f"spgemm {g}", checkpoint=run.checkpoint, resume=run.resume, keep=2**31,
        warm_up=functools.partial(warm_up, s.semiring, s.mask is not None),
        max_restarts=run.max_restarts, callback=run.callback, progress_bar=run.progress,
        low_latency=False)
    out, runner, nb = outs["batches"], ph.runner, ph.lay.b
    if "plan_error" in ph.sections:
        warnings.warn(f"spgemm: the plan's pass failed ({ph.sections['plan_error']}); the "
                      "product is complete, its report has no plan", stacklevel=3)
    recoveries = [rec for o in outs.values() for rec in o.recovery["recoveries"]]
    for rec in recoveries:
        if rec["phase"] == "symbolic":
            rec["rerun"] = "symbolic"
            rec.pop("rerun_count", None)
        else:
            flight = rec.get("in_flight") or []
            rec.update(phase="batches" if flight else "gather",
                       batch=flight[0][0] if flight else None,
                       batches_invalidated=rec["invalidated"])
        rec.update(cells_moved=rec.get("moved", []), workers=len(out.placement.workers))
    info = {"input": {"shape": list(s.a.shape), "nnz": int(s.a.nnz)}, "parts": g.p,
            "seed": s.seed, "grid": str(g), "batches": nb, "workers": len(workers),
            "semiring": s.semiring_name, "mask": s.mask_report(), **ph.sections}
    timeline = runner.merged_timeline()
    peaks = runner.after.get("peaks", {})
    dashboard.publish(client, "batches", run=out.recovery["checkpoint"] or "spgemm",
                      timeline=timeline)
    dashboard.publish(client, "memory", budget=s.memory, baseline=ph.baseline, peak=peaks)
    matrix, value, pieces = None, None, None
    ta = time.perf_counter()
    kept = out.value
    if s.consumer.keeps and save is not None:      # C written by the workers: no gather
        got = out.value or {"files": [], "pieces": None}
        pieces = pieces_descriptor(got["files"], (s.shape[0], s.shape[2]))
        value = {"saved": save, "files": len(got["files"]), "nnz": pieces["nnz"]}
        kept = got["pieces"]
    if s.consumer.keeps and s.keep == "workers":
        from ._collect import to_dask_array

        matrix = value = to_dask_array(client, s, ph.lay, kept or [])
        release_futures(f for f, *_ in (kept or []))   # the chunks depend on them
    elif s.consumer.keeps and save is None:
        from ._consumers import assemble

        matrix = value = assemble(out.value or [], (s.shape[0], s.shape[2]),
                                  drop_zeros=s.semiring == 0)
    elif not s.consumer.keeps:
        value = s.consumer.finalize(runner.summaries(), [])
    t_assemble = time.perf_counter() - ta if matrix is not None else 0.0
    t_run = runner.after.get("t_run", time.perf_counter())
    info["timing"] = {"prepare_s": t_prep - t_start, "symbolic_s": ph.t_symbolic - ph.t0,
                      "run_s": t_run - ph.t0, "batches_s": t_run - ph.t_symbolic,
                      "gather_s": runner.after.get("gather_s", 0.0),
                      "save_s": runner.after.get("save_s", 0.0), "assemble_s": t_assemble,
                      "per_iteration_s": _multiply_times(timeline, out.history)}
    if "plan_s" in info:
        info["timing"]["plan_s"] = info.pop("plan_s")
    measured = dict(out.measured)
    measured["per_step"] = D.measured_steps([o.ledger for o in outs.values()])
    if ph.plans is not None:
        from ._plan import placed_volume

        owner = np.asarray(D.worker_owner(s, out.placement)[1])
        measured["expected"] = {n: placed_volume(pl, owner, dedupe_phase_src=(n != "fiber"))
                                for n, pl in ph.plans.items()}
    lost = sorted({w for rec in recoveries for w in rec["lost"]})
    if lost:
        measured["workers_lost"] = lost       # their sends are not counted
    quality = {**info.get("quality", {}), "batches": nb, "window": s.window}
    if matrix is not None and type(s.consumer).__name__ == "Keep" and sp.issparse(matrix):
        quality["nnz_c"] = int(matrix.nnz)
    elif pieces is not None and type(s.consumer).__name__ == "Keep":
        quality["nnz_c"] = pieces["nnz"]            # disjoint pieces: their nnz add up
    elif isinstance(value, dict) and "structural_nnz" in value:     # count: both counts
        quality.update(nnz_c=int(value["nnz"]), structural_nnz_c=int(value["structural_nnz"]))
    elif "nnz_c" not in quality:
        nnz = _nnz_from(runner.summaries())
        if nnz is not None:
            quality["nnz_c"] = nnz
    info.update(quality=quality, measured=measured, timeline=timeline,
                memory=_memory_section(ph.baseline, peaks, s.memory, workers),
                symbolic=ph.symbolic_info, attempts=runner.attempts,
                recovery={"recoveries": recoveries})
    if out.recovery["checkpoint"] is not None:
        info["checkpoint"] = {
            "dir": out.recovery["checkpoint"], "resumed": bool(run.resume),
            "batches_loaded": sorted(runner.loaded),
            "batches_written": sorted(set(runner.files) - set(runner.loaded)) if
            s.consumer.keeps else sorted(set(runner.summary) - set(runner.loaded)),
            "batches_run": sum(len(x["completed"]) for x in runner.attempts),
            "nbatches_from": "checkpoint" if ph.stored else
            ("symbolic" if ph.symbolic_info else "argument"),
            "already_complete": out.recovery.get("already_complete")}
    if pieces is not None:
        info["saved"] = {"dir": save, "files": len(pieces["files"]), "nnz": pieces["nnz"],
                         "bytes": sum(e["bytes"] for e in pieces["files"]),
                         "written_by": "workers"}
    res = SpgemmResult(value=value, matrix=matrix, info=info, history=out.history)
    if pieces is not None:
        res.pieces = (save, pieces)
    return res


def _nnz_from(summaries) -> int | None:
    if summaries and all(isinstance(s, dict) and "nnz" in s for s in summaries):
        return int(sum(s["nnz"] for s in summaries))
    return None


def _memory_section(baseline: dict, peaks: dict, budget, workers) -> dict:
    if not peaks or any(v is None for v in peaks.values()):
        return {}
    used = {w: int(peaks[w] - (baseline.get(w) or 0)) for w in workers if w in peaks}
    out = {"peak_increase_per_worker": used, "max_peak_increase": max(used.values())}
    if budget is not None:
        out["budget_per_worker"] = int(budget)
        out["within_budget"] = bool(max(used.values()) <= budget)
        out["peak_over_budget"] = round(max(used.values()) / budget, 4) if budget else None
        out["working_headroom"] = WORKING_HEADROOM
    return out


def plan(a, b=None, *, grid="1x1x1", memory_per_worker=None, workers: int | None = None,
         batches="auto", seed: int | None = 0, r: float = BYTES_PER_UNMERGED,
         alpha: float | None = None, beta: float | None = None, semiring="plus_times",
         mask=None, complement: bool = False, network=None) -> dict:
    """The batch count and per-step communication of BatchedSumma3D, without a cluster.

    Parameters
    ----------
    a, b : scipy sparse, dense array, or path
        A and B (``b=None``: A·A).
    grid : "QxQxL" or Grid
        Any size: thousands of cells are fine.
    memory_per_worker : bytes or "512MB", optional
        Without it b = 1 (unless ``batches`` is given).
    workers : int, optional
        Workers the cells are dealt to; default one cell per worker.
    batches : "auto" or int
    seed : int or None
        The random permutation the run would use.
    alpha, beta : float, optional
        Message latency (s) and inverse bandwidth (s/byte); default
        :meth:`~daskhpc.comm.CostModel.from_config`.
    semiring, mask, complement
        As for :func:`multiply` (the mask restricts every count).
    network : daskhpc.comm.CostModel, optional
        Also predict one multiply on this network (``prediction``).

    Returns
    -------
    dict
        Plan totals (``tot_vol``, ...), ``grid``, ``p``, ``batches`` (Algorithm 3 line
        12), ``batches_lower_bound`` (eq. (2)), ``steps``, ``table2``, ``estimate_s``
        and ``quality``.
    """
    g = grid if isinstance(grid, Grid) else Grid.parse(grid)
    s = prepare(a, b, grid=g, nworkers=g.p if workers is None else int(workers),
                memory_per_worker=memory_per_worker, batches=batches, seed=seed, r=r,
                consume="count", semiring=semiring, mask=mask, complement=complement)
    sym = s.symbolic(1)
    out = {"grid": str(g), "p": g.p, "workers": s.nworkers, "semiring": s.semiring_name}
    if s.mask is not None:
        out["mask"] = s.mask_report()
    if s.batches == "auto":
        nb = 1 if s.memory is None else planned_batches(
            sym.max_unmerged, int(sym.nnz_a.max()), int(sym.nnz_b.max()), s.mem_cell, r,
            str(g))
    else:
        nb = int(s.batches)
    if s.memory is not None:
        out["memory_per_worker"] = s.memory
        out["batches_lower_bound"] = batch_lower_bound(sym, s.memory * s.nworkers, r)
    out["symbolic"] = {"max_nnz_c": sym.max_unmerged, "max_nnz_a": int(sym.nnz_a.max()),
                       "max_nnz_b": int(sym.nnz_b.max()), "r": r}
    if nb > 1:
        sym = s.symbolic(nb)
    out["batches"] = nb
    cost = CostModel(alpha, beta) if alpha is not None and beta is not None else \
        CostModel.from_config()
    sections, quality = plan_sections(sym, cost)
    out.update(sections)          # unit "nonzeros": WORDS_PER_UNIT words of WORD_BYTES
    out["quality"] = quality
    if network is not None:       # one multiply on the network, a cell per host
        out.update(multiply_cost(sym, network).section(network))
    return out


def choose_grid(a, b, K: int, network, candidates=None, **plan_options):
    """The grid of K cells predicted fastest for ``a @ b`` on ``network``, and every row."""
    rows = []
    for g in candidates or grids(int(K)):
        got = plan(a, b, grid=g, network=network, **plan_options)
        rows.append({"layout": str(g), **got["prediction"],
                     "predicted_s_per_step": got["predicted_s_per_step"]})
        rows[-1].pop("network", None)
    rows.sort(key=lambda r: r["predicted_s_per_step"])
    return Grid.parse(rows[0]["layout"]), rows


def _multiply_times(timeline: dict, history: list) -> list:
    """Seconds of every batch's multiply (None: from a checkpoint), also its history ``time_s``."""
    took = {int(e["batch"]): float(e["finished"] - e["started"])
            for e in timeline.get("batches", ())
            if e.get("started") is not None and e.get("finished") is not None}
    out = []
    for h in history:
        t = took.get(int(h.get("batch", h["unit"])))
        h["time_s"] = t
        out.append(t)
    return out
