"""The public functions: ``multiply`` (distributed), ``serial_multiply`` (reference), ``plan``.

Examples
--------
>>> import scipy.sparse as sp
>>> a = sp.random(200, 200, density=0.05, random_state=0, format="csr")
>>> out = plan(a, a, grid="2x2x2", memory_per_worker="1MB")
>>> out["batches"], sorted(out["steps"])
(1, ['a_bcast', 'b_bcast', 'fiber', 'symbolic'])
"""

from __future__ import annotations

import os
import sys
import time
import uuid

import numpy as np
import scipy.sparse as sp

from daskhpc.comm import CostModel
from daskhpc._workflows import RunOptions
from daskhpc.errors import InputError

from ._plan import plan_sections, step_plans
from ._prep import like_input
from ._result import SpgemmResult
from ._serial import serial_check, serial_multiply
from ._saving import pieces_descriptor, prepare_save
from ._setup import Setup, fingerprint, prepare
from ._symbolic import (BYTES_PER_UNMERGED, WORKING_HEADROOM, batch_lower_bound, grid_symbolic,
                        planned_batches, planning_memory)

__all__ = ["multiply", "plan", "serial_multiply", "over_budget", "warn_over_budget"]


def multiply(a, b=None, *, client=None, grid=None, memory_per_worker=None, batches="auto",
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
        :func:`daskhpc.io.read`. C (``matrix``) is a ``csr_matrix`` when the sparse
        inputs are ``scipy.sparse.spmatrix``, else a ``csr_array``. A Dask DataFrame of
        (row, col, value) triplets (0-based ids; shape: the largest ids + 1, the inner
        dimension shared) or a Dask Array of scipy.sparse / sparse.COO chunks is read on
        the workers: its values go straight to the cells' workers, never to the client
        (docs/collections.md).
    grid : "QxQxL" or Grid, optional
        Default: one cell per worker, square layers q x q x l for any worker count
        (2 workers: 1x1x2, 4: 2x2x1, 8: 2x2x2; ``Grid.for_workers``).
        More cells than workers are dealt round robin (several cells per worker).
    memory_per_worker : bytes or str like "512MB", optional
        Budget M/W of Algorithm 3; required for ``batches="auto"`` to batch.
    batches : "auto" or int
        ``auto``: b from Symbolic3D (line 12); an int forces b.
    consume : str or Consumer
        ``keep``, ``count``, ``write:DIR``, ``prune:K``, ``threshold:X`` or an object.
    window : int
        w, batches in flight.
    seed : int or None
        Random permutation for load balance; None keeps the given order (inside a block
        rows, inner indices and columns keep their given order: locality).
    r : float
        Bytes per nonzero in the memory model (Algorithm 3's r).
    plan : bool
        Compute the plan for the actual nnz (client side) before the batches run: the
        report's plan totals, the dashboard's planned matrix, planned-vs-measured bytes.
    mask : scipy sparse, dense array or path, optional
        ``C<M> = A·B``: only the entries of C in the pattern of M (its stored entries,
        whatever their values) are formed, and every consumer sees only them; the
        batch planner counts only them (masked Symbolic3D). Must be C's shape. A
        :class:`MaskedSum`-like consumer also gets its piece as the operand.
    complement : bool
        ``C<!M>``: only the entries *not* in the pattern of M.
    semiring : {"plus_times", "min_plus", "max_plus", "max_times", "or_and", "plus_pair"}
        GraphBLAS semantics over the structural nonzeros of A and B: C(i,j) = add over
        k of mul(A(i,k), B(k,j)), and C has an entry wherever the pattern product has
        one, whatever its value (min_plus of 0 + 0 is an entry 0). ``or_and``: values
        taken as booleans (nonzero is True), a true entry is 1.0; ``plus_pair``:
        mul(a, b) = 1 (counts the terms). plus_times keeps scipy's convention (entries
        that cancel to exactly 0 are dropped by ``keep``/``count``).
    local : {"fused", "staged"}
        ``fused`` (default): all stages into one accumulator per column; ``staged`` (the
        paper's Algorithm 1): Local-Multiply per SUMMA stage, then Merge-Layer.
    keep : {"client", "workers"}
        Where a kept C (``consume`` keep, prune, threshold) ends: ``client`` gathers it
        into one CSR matrix; ``workers`` leaves it there as a ``dask.array.Array`` of
        ``scipy.sparse.csr_matrix`` chunks (one per batch piece of a cell; ``.compute()``
        gathers it, ``multiply(res.matrix, ...)`` uses it where it is).
    columns : list of str, optional
        A DataFrame input's row, column and value columns (default: its columns in order).
    run : RunOptions, optional
        How the run runs (:class:`daskhpc.runtime.RunOptions`: client, checkpoint/resume,
        max_restarts, progress, callback, check_serial), or the same names as keywords.
        ``checkpoint``: a directory every worker and the client see, where each batch,
        once done, is recorded (its summary, and the blocks a ``keep``/``prune``
        consumer keeps, written by the workers): a worker lost later costs only the
        batches not yet done. ``check_serial`` compares with scipy's single-threaded
        product (``serial_multiply``). ``save``: a directory every worker and the
        client see; with a consumer that keeps C, the workers write C there as scipy
        ``save_npz`` pieces whose sum is C and C is not gathered (``matrix`` None, or the
        dask array with ``keep="workers"``); ``daskhpc.load(save).matrix`` reads it.

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
    from daskhpc.runtime import worker_addresses

    t_start = time.perf_counter()
    from daskhpc.runtime import connected

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
            res = _run(client, s, plan=plan, measure_memory=measure_memory,
                       checkpoint=run.checkpoint, resume=run.resume,
                       max_restarts=run.max_restarts, callback=run.callback,
                       progress=run.progress, t_start=t_start, save=files)
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
    """The Dask-collection inputs (``_collect``) and, for them, the patterns ``prepare``
    takes instead (and, with ``values``, A and B gathered for the serial check)."""
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
    """``res`` with C as the kind of matrix the user gave (spmatrix in, csr_matrix out;
    :func:`~daskhpc.spgemm._prep.like_input`)."""
    kept = like_input(res.matrix, *inputs)
    if res.value is res.matrix:
        res.value = kept
    res.matrix = kept
    return res


def warn_over_budget(report: dict) -> dict:
    """The CLI's end of a run: a peak over the budget is a warning (one line; the figures
    are in the report's ``memory`` section), not a failed run: the work is done (issue
    22). The API only reports ``memory.within_budget``. Returns ``report``."""
    over = over_budget(report.get("memory") or {})
    if over:
        import warnings

        warnings.warn(over, stacklevel=2)
    return report


def over_budget(memory: dict) -> str | None:
    """One line naming the worker whose measured peak went over the budget, or None.

    Examples
    --------
    >>> print(over_budget({"peak_increase_per_worker": {"tcp://a:1": 47_362_048,
    ...                    "tcp://b:2": 39_000_000}, "budget_per_worker": 40_000_000,
    ...                    "within_budget": False}))                  # doctest: +ELLIPSIS
    spgemm: worker tcp://a:1 peaked 47.4 MB above its baseline, 1.18x the memory budget ...
    """
    if memory.get("within_budget") is not False:
        return None
    from daskhpc.report import format_bytes

    w, peak = max(memory["peak_increase_per_worker"].items(), key=lambda kv: kv[1])
    budget = memory["budget_per_worker"]
    return (f"spgemm: worker {w} peaked {format_bytes(peak)} above its baseline, "
            f"{peak / budget:.2f}x the memory budget of {format_bytes(budget)} a worker (the "
            "product is complete; more batches or a larger budget)")


def _run(client, s: Setup, *, plan, measure_memory, checkpoint, resume, max_restarts,
         callback, progress, t_start, save=None) -> SpgemmResult:
    from daskhpc import dashboard
    from distributed import LocalCluster

    from daskhpc.runtime import (CheckpointDir, PartStore, Placement, prepare_kernels, run_job,
                                 worker_addresses)

    from . import _job as D
    from ._checkpoint import store_batches, stored_batches
    from ._plugin import ensure_plugin

    g = s.grid
    workers = worker_addresses(client)
    ck = None if checkpoint is None else \
        CheckpointDir(checkpoint, "spgemm", fingerprint(s), resume=resume, keep=2**31)
    stored = stored_batches(ck) if ck is not None else None
    store = PartStore(client, Placement(g.p, workers), uuid.uuid4().hex[:10],
                      part_of=lambda c: g.rank(*c))
    t_prep = time.perf_counter()
    if isinstance(getattr(client, "cluster", None), LocalCluster):
        prepare_kernels("spgemm", file=sys.stderr)     # once here, not in every worker
    if s.semiring or s.mask is not None:   # its kernel: compiled once here, loaded there
        _memory_warm_up(s.semiring, s.mask is not None)
    # load the numba kernels before anything is timed
    client.run(_memory_warm_up, s.semiring, s.mask is not None)
    baseline = client.run(_memory_reset) if measure_memory else {}
    # dashboard pages: the run starts here (measured bytes count from now)
    dashboard.publish(client, "run", name=f"spgemm {str(g)}", workflow="spgemm",
                      workers=workers)
    dashboard.publish(client, "memory", budget=s.memory, baseline=baseline)
    if s.sources:
        # collections: the blocks are built on the cells' workers, not scattered
        from distributed import wait

        from ._collect import rebuilder, route_blocks

        fa, fb = route_blocks(client, s, store.placement)
        for name, futs, blocks in (("A", fa, s.a_blocks), ("B", fb, s.b_blocks)):
            if futs is None:
                store.put(name, blocks)
            else:
                wait(list(futs.values()))
                store.adopt(name, futs, rebuild=rebuilder(client, s, name))
        for nz in s.sources.values():
            nz.release()                  # the blocks hold the values now
    else:
        store.put("A", s.a_blocks)
        store.put("B", s.b_blocks)
    store.put("R", s.row_ids())
    if s.mask is not None:
        store.put("MK", s.mask_blocks())      # C<M>: every cell's piece of the mask
    recoveries: list = []
    t0 = time.perf_counter()
    sym_info, ledgers = {}, []
    if stored is not None:
        # a restart of this job or a resumed one: the b the checkpoint's files were cut
        # into, whatever the budget per cell is now
        nb, sym_info = int(stored["batches"]), dict(stored.get("symbolic") or {})
    elif s.batches == "auto" and s.mem_cell is not None:
        out = run_job(client, D.symbolic_job(s), store=store, max_restarts=max_restarts,
                      recoveries=recoveries, progress_bar=False, low_latency=False,
                      announce=False)
        ledgers.append(out.ledger)
        for rec in out.recovery["recoveries"]:
            rec.update(phase="symbolic", rerun="symbolic")
        max_c = out.value
        nb = planned_batches(max_c, s.nnz_a, s.nnz_b, s.mem_cell, s.r, str(g))
        sym_info = {"max_nnz_c": max_c, "max_nnz_a": s.nnz_a, "max_nnz_b": s.nnz_b,
                    "memory_per_cell": s.mem_cell, "r": s.r, "batches": nb,
                    "working_headroom": WORKING_HEADROOM,
                    "model_memory_per_cell": planning_memory(s.mem_cell)}
    else:
        nb = 1 if s.batches == "auto" else int(s.batches)
    if ck is not None and stored is None:
        store_batches(ck, nb, sym_info)
    t_sym = time.perf_counter()
    lay = s.layout(nb)
    if s.mask is not None:
        store.put("M", s.mask_operands(lay))
    info = {"input": {"shape": list(s.a.shape), "nnz": int(s.a.nnz)}, "parts": g.p,
            "seed": s.seed, "grid": str(g), "batches": nb, "workers": len(workers),
            "semiring": s.semiring_name, "mask": s.mask_report()}
    plans, sym = None, None
    if plan:                                         # plan first, then run
        tp = time.perf_counter()
        sym = grid_symbolic(s.ap, s.bp, g, nb, *_permuted_mask(s))
        plans = step_plans(sym)
        info["plan"], info["quality"] = plan_sections(sym, CostModel.from_config())
        info["plan_s"] = time.perf_counter() - tp
        _publish_plan(client, s, sym, plans, store.placement, symbolic=bool(sym_info))
    ensure_plugin(client)
    runner = D.Batches(client, s, lay, ck, plans, measure_memory, save=save)
    out = run_job(client, runner.job(fingerprint(s)), checkpoint=ck, store=store,
                  max_restarts=max_restarts, recoveries=recoveries, callback=callback,
                  progress_bar=progress, low_latency=False, announce=False)
    ledgers.append(out.ledger)
    for rec in out.recovery["recoveries"]:
        flight = rec.get("in_flight") or []
        rec.update(phase="batches" if flight else "gather",
                   batch=min(flight) if flight else None,
                   batches_invalidated=rec["invalidated"])
    for rec in recoveries:
        rec.update(cells_moved=rec.get("moved", []), workers=len(store.placement.workers))
    final_place = store.placement
    store.release()
    timeline = runner.merged_timeline()
    peaks = runner.after.get("peaks", {})
    dashboard.publish(client, "batches", run=out.recovery.get("checkpoint") or "spgemm",
                      timeline=timeline)
    dashboard.publish(client, "memory", budget=s.memory, baseline=baseline, peak=peaks)
    matrix, value, t_assemble, pieces = None, None, 0.0, None
    if s.consumer.keeps and save is not None:      # C written by the workers: no gather
        got = out.value or {"files": [], "pieces": None}
        pieces = pieces_descriptor(got["files"], (s.shape[0], s.shape[2]))
        value = {"saved": save, "files": len(got["files"]), "nnz": pieces["nnz"]}
        if s.keep == "workers":
            from daskhpc.runtime import release_futures

            from ._collect import to_dask_array

            ta = time.perf_counter()
            matrix = value = to_dask_array(client, s, lay, got["pieces"])
            release_futures(f for f, *_ in got["pieces"])
            t_assemble = time.perf_counter() - ta
    elif s.consumer.keeps and s.keep == "workers":
        from ._collect import to_dask_array

        ta = time.perf_counter()
        matrix = value = to_dask_array(client, s, lay, out.value or [])
        from daskhpc.runtime import release_futures

        release_futures(f for f, *_ in (out.value or []))   # the chunks depend on them
        t_assemble = time.perf_counter() - ta
    elif s.consumer.keeps:
        from ._consumers import assemble

        ta = time.perf_counter()
        matrix = value = assemble(out.value or [], (s.shape[0], s.shape[2]),
                                  drop_zeros=s.semiring == 0)
        t_assemble = time.perf_counter() - ta
    else:
        value = s.consumer.finalize(runner.summaries(), [])
    t_run = runner.after.get("t_run", time.perf_counter())
    multiply_s = _multiply_times(timeline, out.history)
    info["timing"] = {"prepare_s": t_prep - t_start, "symbolic_s": t_sym - t0,
                      "run_s": t_run - t0, "batches_s": t_run - t_sym,
                      "gather_s": runner.after.get("gather_s", 0.0),
                      "save_s": runner.after.get("save_s", 0.0),
                      "assemble_s": t_assemble,
                      "per_iteration_s": multiply_s}
    if "plan_s" in info:
        info["timing"]["plan_s"] = info.pop("plan_s")
    measured = {k: v for k, v in out.measured.items()}
    measured["per_step"] = D.measured_steps(ledgers)
    if plans is not None:
        from ._plan import placed_volume

        _, owner = D.worker_owner(s, final_place)
        owner = np.asarray(owner)
        measured["expected"] = {n: placed_volume(pl, owner, dedupe_phase_src=(n != "fiber"))
                                for n, pl in plans.items()}
    lost = sorted({w for rec in recoveries for w in rec["lost"]})
    if lost:
        measured["workers_lost"] = lost       # their sends are not counted
    quality = dict(info.get("quality", {}))
    quality.update(batches=nb, window=s.window)
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
                memory=_memory_section(baseline, peaks, s.memory, workers),
                symbolic=sym_info, attempts=runner.attempts, recoveries=recoveries)
    if ck is not None:
        info["checkpoint"] = {
            "dir": ck.path, "resumed": bool(resume), "batches_loaded": sorted(runner.loaded),
            "batches_written": sorted(set(runner.files) - set(runner.loaded)) if
            s.consumer.keeps else sorted(set(runner.summary) - set(runner.loaded)),
            "batches_run": sum(len(x["completed"]) for x in runner.attempts),
            "nbatches_from": "checkpoint" if stored is not None else
            ("symbolic" if sym_info else "argument"),
            "already_complete": out.recovery.get("already_complete")}
    if pieces is not None:
        info["saved"] = {"dir": save, "files": len(pieces["files"]), "nnz": pieces["nnz"],
                         "bytes": sum(e["bytes"] for e in pieces["files"]),
                         "written_by": "workers"}
    dashboard.publish(client, "end", status="finished")      # the pages stop counting
    res = SpgemmResult(value=value, matrix=matrix, info=info, history=out.history)
    if pieces is not None:
        res.pieces = (save, pieces)
    return res



def _memory_warm_up(semiring: int = 0, masked: bool = False):
    from ._memory import warm_up

    return warm_up(semiring, masked)


def _memory_reset():
    from ._memory import reset_peak

    return reset_peak()


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


def _publish_plan(client, s: Setup, sym, plans, placement, symbolic: bool) -> None:
    """Planned bytes between workers and flops per worker, for the dashboard pages."""
    from daskhpc import dashboard

    from ._job import worker_owner

    workers, owner = worker_owner(s, placement)
    matrix = sum(pl.placed(owner, len(workers), broadcast=(name != "fiber")).bytes_matrix()
                 for name, pl in plans.items() if symbolic or name != "symbolic")
    flops = np.zeros(len(workers))
    per_cell = sym.flops_cell.sum(axis=0)
    for cell in s.grid.cells():
        flops[owner[s.grid.rank(*cell)]] += per_cell[cell]
    dashboard.publish(client, "plan", matrix=matrix, workers=workers, unit="bytes")
    dashboard.publish(client, "load", planned=dict(zip(workers, flops)), unit="flops")


def _permuted_mask(s: Setup) -> tuple:
    """``(mask, complement)`` permuted like C, for grid_symbolic; () without a mask."""
    if s.mask is None:
        return ()
    return (sp.csr_array(s.mask)[s.pr][:, s.pc], s.complement)


def plan(a, b=None, *, grid="1x1x1", memory_per_worker=None, workers: int | None = None,
         batches="auto", seed: int | None = 0, r: float = BYTES_PER_UNMERGED,
         alpha: float | None = None, beta: float | None = None, semiring="plus_times",
         mask=None, complement: bool = False) -> dict:
    """The batch count and per-step communication of BatchedSumma3D, without a cluster.

    Parameters
    ----------
    a, b : scipy sparse, dense array, or path
        A and B (``b=None``: A·A); a path is read with :func:`daskhpc.io.read`.
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
        :meth:`~daskhpc.comm.CostModel.from_config` (the calibrated values).
    semiring, mask, complement
        As for :func:`multiply`: the mask restricts every count (and so b) to the
        entries it keeps; the semiring changes no count (recorded in the output).

    Returns
    -------
    dict
        The top-level plan totals of the whole run (``tot_vol``, ``sum_max_vol``, ...),
        ``grid``, ``p``, ``batches`` (what a run uses: Algorithm 3 line 12 on the budget less
        its working headroom, ``planned_batches``), ``batches_lower_bound``
        (eq. (2)), ``steps`` (one Plan report per step), ``table2``, ``estimate_s``
        (alpha-beta time per step and in total) and ``quality``.
    """
    from ._grid import Grid

    g = grid if isinstance(grid, Grid) else Grid.parse(grid)
    s = prepare(a, b, grid=g, nworkers=g.p if workers is None else int(workers),
                memory_per_worker=memory_per_worker, batches=batches, seed=seed, r=r,
                consume="count", semiring=semiring, mask=mask, complement=complement)
    pm = _permuted_mask(s)
    sym = grid_symbolic(s.ap, s.bp, g, 1, *pm)
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
        sym = grid_symbolic(s.ap, s.bp, g, nb, *pm)
    out["batches"] = nb
    cost = CostModel(alpha, beta) if alpha is not None and beta is not None else \
        CostModel.from_config()
    sections, quality = plan_sections(sym, cost)
    out.update(sections)          # unit "nonzeros": WORDS_PER_UNIT words of WORD_BYTES
    out["quality"] = quality
    return out


def _multiply_times(timeline: dict, history: list) -> list:
    """Seconds of every batch's multiply, in batch order: from its first task sent to a
    worker to its last product task done (the admission plugin's clock), also written
    as the batch's history ``time_s``. A batch read from a checkpoint ran in an earlier
    run: None. (The frame's ``time_s`` is the time between two batch reports: 0 for a
    run of one batch.)"""
    took = {int(e["batch"]): float(e["finished"] - e["started"])
            for e in timeline.get("batches", ())
            if e.get("started") is not None and e.get("finished") is not None}
    out = []
    for h in history:
        t = took.get(int(h.get("batch", h["unit"])))
        h["time_s"] = t
        out.append(t)
    return out
