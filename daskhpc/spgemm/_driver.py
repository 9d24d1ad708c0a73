"""BatchedSumma3D on a Dask cluster (Algorithm 4), from scipy inputs to a result.

Steps of :func:`multiply`:

1. check the inputs; permute rows and columns at random (load balance, as
   CombBLAS does; the result is mapped back to the original ids);
2. cut A and B into cell blocks (Fig. 1) and scatter each to its cell's worker;
3. Symbolic3D on the cluster (Algorithm 3) gives b unless ``batches`` is given
   (or a checkpoint being resumed holds it);
4. submit every batch at once; the batch-admission plugin holds batch t + w
   until batch t is consumed; a lost worker ends the attempt, the cells are
   re-placed and only the batches whose results were lost run again
   (:mod:`daskhpc.spgemm._recovery`);
5. collect the consumer's value, the batch timeline, the bytes that moved per
   step (next to the plan for the actual nnz), the workers' peak memory, the
   recoveries and the checkpoint.
"""

from __future__ import annotations

import time
import uuid
import warnings

import numpy as np
import scipy.sparse as sp

from daskhpc import dashboard
from daskhpc.errors import InputError
from daskhpc.runtime import CheckpointDir, Placement, TransferLedger, worker_addresses
from daskhpc.spgemm import _memory, _plugin
from daskhpc.spgemm import _recovery as R
from daskhpc.spgemm._block import CscBlock
from daskhpc.spgemm._consumers import Consumer, Keep, assemble, parse_consumer
from daskhpc.spgemm._graph import step_of_key
from daskhpc.spgemm._grid import Grid, Layout
from daskhpc.spgemm._plan import placed_volume, step_plans, table2
from daskhpc.spgemm._prep import check_inputs, localize, permutations
from daskhpc.spgemm._symbolic import BYTES_PER_UNMERGED, batches_for, grid_symbolic

__all__ = ["multiply"]


def multiply(a, b=None, *, client, grid: str | Grid | None = None,
             memory_per_worker=None, batches="auto", consume="keep", window: int = 1,
             seed: int | None = 0, r: float = BYTES_PER_UNMERGED, plan: bool = True,
             measure_memory: bool = True, mask=None, local: str = "fused",
             checkpoint=None, resume: bool = False, max_restarts: int = 3):
    """C = A·B with BatchedSumma3D on a Dask cluster, consumed batch by batch.

    Parameters
    ----------
    a, b : scipy sparse (or dense array)
        A (m x k) and B (k x n); ``b=None`` squares A.
    client : distributed.Client
    grid : "QxQxL" or Grid, optional
        Default: one cell per worker, one layer (the worker count must be a square).
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
        Random permutation for load balance; None keeps the given order. The
        permutation picks the rows, inner indices and columns of every block at
        random; inside a block they keep their given order (locality).
    r : float
        Bytes per nonzero in the memory model (Algorithm 3's r).
    plan : bool
        Also compute the plan for the actual nnz (client side) for the report.
    mask : scipy sparse, optional
        For :class:`MaskedSum`-like consumers: permuted with C and cut per cell.
    local : {"fused", "staged"}
        ``fused`` (default): all stages into one accumulator per column, no partial
        products (the same transfers as the paper; measured 1.1-1.6x faster and
        less memory, see docs/benchmarks.md; needs every stage's inputs at once).
        ``staged`` (the paper's Algorithm 1): Local-Multiply per SUMMA stage, then
        Merge-Layer.
    checkpoint : str or Path, optional
        Directory on a file system every worker and the client see: each batch,
        once done, is recorded there (its summary, and the blocks a ``keep`` /
        ``prune`` consumer keeps, written by the workers themselves). A worker
        lost later then costs only the batches not yet done.
    resume : bool
        Continue the run recorded in ``checkpoint`` (same inputs and options, see
        :func:`~daskhpc.spgemm._recovery.fingerprint`): complete batches are not
        computed again, their blocks are read from the files. Without it, a
        directory holding a checkpoint is refused.
    max_restarts : int
        Lost workers the run survives (each: re-place the cells, compute again
        what was lost); one more raises :class:`~daskhpc.runtime.WorkerLost`.

    Returns
    -------
    SpgemmResult

    Examples
    --------
    >>> from daskhpc.spgemm import multiply
    >>> res = multiply(A, client=client, grid="2x2x1", consume="count")   # doctest: +SKIP
    >>> res.value["nnz"] == (A @ A).nnz                                  # doctest: +SKIP
    True
    >>> res = multiply(A, client=client, grid="2x2x1", batches=4,
    ...                checkpoint="ck/", resume=True)                     # doctest: +SKIP
    >>> res.recoveries, res.checkpoint["batches_loaded"]                  # doctest: +SKIP
    ([], [0, 1])

    References
    ----------
    Hussain, Selvitopi, Buluç, Azad. Communication-Avoiding and Memory-Constrained
    Sparse Matrix-Matrix Multiplication at Extreme Scale. IPDPS 2021, Algorithm 4.
    """
    from daskhpc.spgemm._result import SpgemmResult

    t_start = time.perf_counter()
    a, b = check_inputs(a, a if b is None else b)
    consumer = consume if isinstance(consume, Consumer) else parse_consumer(consume)
    if local not in ("staged", "fused"):
        raise InputError(f"local must be 'staged' or 'fused', not {local!r}")
    workers = worker_addresses(client)
    g = _grid(grid, len(workers))
    if batches != "auto":
        batches = int(batches)
        if batches < 1:
            raise InputError(f"--batches must be auto or a positive integer, not {batches}")
    mem = None if memory_per_worker is None else _memory.parse_bytes(memory_per_worker)
    shape = (a.shape[0], a.shape[1], b.shape[1])
    lay1 = Layout(g, shape, 1)
    pr, pk, pc = permutations(shape, seed)
    if seed is not None:
        # keep the input's order inside every block (locality), the random sets
        # of the blocks for balance; columns down to the sub-blocks when b is known
        pr = localize(pr, lay1.row_bounds)
        pk = localize(pk, lay1.inner_bounds)
        known_b = batches if batches != "auto" else (1 if mem is None else None)
        if known_b is not None:
            pc = localize(pc, np.unique(np.concatenate(Layout(g, shape, known_b).sub_bounds)))
    ap = a[pr][:, pk]
    bp = b[pk][:, pc]
    if max_restarts < 0:
        raise InputError(f"max_restarts must be >= 0, not {max_restarts}")
    if resume and checkpoint is None:
        raise InputError("resume needs a checkpoint directory (--checkpoint DIR)")
    ck = None
    if checkpoint is not None:
        # refused before any work if the directory holds another run's checkpoint;
        # every batch stays on disk (together they are C), so nothing is pruned
        fp = R.fingerprint(a, b, grid=str(g), batches=batches, memory=mem, r=r, seed=seed,
                           consumer=consumer, local=local,
                           mask=None if mask is None else sp.csr_array(mask))
        ck = CheckpointDir(checkpoint, "spgemm", fp, resume=resume, keep=2**31)
    run = uuid.uuid4().hex[:10]
    place = Placement(g.p, workers)
    cells_per_worker = max(len(place.parts_of(w)) for w in workers)
    a_blocks, b_blocks = _cut(ap, bp, lay1)
    nnz_a = max(x.nnz for x in a_blocks.values())
    nnz_b = max(x.nnz for x in b_blocks.values())
    mem_cell = None if mem is None else mem / cells_per_worker
    if mem_cell is not None:           # fail before any work if inputs alone do not fit
        batches_for(0, nnz_a, nnz_b, mem_cell, r, str(g))
    t_prep = time.perf_counter()

    baseline = {}
    client.run(_memory.warm_up)   # load the numba kernels before anything is timed
    if measure_memory:
        baseline = client.run(_memory.reset_peak)
    # dashboard pages: the run starts here (measured bytes count from now)
    dashboard.publish(client, "run", name=f"spgemm {run}", workflow="spgemm", workers=workers)
    dashboard.publish(client, "memory", budget=mem, baseline=baseline)
    # the client keeps the blocks until the run is over: a lost worker's cells are
    # scattered again to their new worker
    inputs = R.CellInputs(client, g, place, run, warm_up=_memory.warm_up)
    inputs.add("A", a_blocks)
    inputs.add("B", b_blocks)
    del a_blocks, b_blocks
    stored = R.stored_batches(ck) if ck is not None else None

    sym_info = {}
    with warnings.catch_warnings(), TransferLedger(client, settle=0.5) as ledger:
        # a worker that died took its transfer log along; the report says so
        # (measured["workers_lost"]) instead of a warning
        warnings.filterwarnings("ignore", message="workers left during the measurement")
        t0 = time.perf_counter()
        recoveries = R.Recoveries(max_restarts, t0)
        if stored is not None:
            # a restart of this job or a resumed one: the batches the checkpoint's
            # files were cut into, whatever the budget per cell is now
            nb, sym_info = int(stored["batches"]), dict(stored.get("symbolic") or {})
        elif batches == "auto" and mem_cell is not None:
            max_c = R.run_symbolic(client, inputs, lay1, run, recoveries)
            nb = batches_for(max_c, nnz_a, nnz_b, mem_cell, r, str(g))
            sym_info = {"max_nnz_c": max_c, "max_nnz_a": nnz_a, "max_nnz_b": nnz_b,
                        "memory_per_cell": mem_cell, "r": r, "batches": nb}
        else:
            nb = 1 if batches == "auto" else batches
        if ck is not None and stored is None:
            R.store_batches(ck, nb, sym_info)
        t_sym = time.perf_counter()
        lay = Layout(g, shape, nb)
        if mask is not None:
            mp = sp.csc_array(sp.csr_array(mask)[pr][:, pc])
            inputs.add("M", _operands(consumer, mp, lay))
        ids = {"rows": [pr[slice(*lay.rows(i))] for i in range(g.q)], "cols": pc,
               "shape": (shape[0], shape[2])}
        _plugin.ensure_plugin(client)
        runner = R.BatchRunner(client, inputs, lay, consumer, ids, local, window, run,
                               recoveries, ck)
        if ck is not None and resume:
            runner.resume()
        after = {}

        def batches_done():
            # every batch is safe: the end of the compute (the kept blocks' gather
            # that follows is not part of it, nor of the memory peaks)
            after["t_run"] = time.perf_counter()
            after["peaks"] = client.run(_memory.read_peak) if measure_memory else {}

        runner.run(batches_done)
    t_run, peaks = after["t_run"], after["peaks"]
    owner = inputs.owner            # the final placement (after any recovery)
    final_workers = inputs.place.workers
    summaries = runner.summaries()
    timeline = runner.merged_timeline()
    dashboard.publish(client, "batches", run=run, timeline=timeline)
    dashboard.publish(client, "memory", budget=mem, baseline=baseline, peak=peaks)
    # dropping the last references releases the inputs on the workers
    inputs.release()

    value, matrix, t_gather, t_assemble = None, None, 0.0, 0.0
    if consumer.keeps:
        ta = time.perf_counter()
        blocks, runner.blocks = runner.blocks, []
        matrix = assemble(blocks, (shape[0], shape[2]))
        blocks = None
        t_gather, t_assemble = runner.gather_s, time.perf_counter() - ta
        value = matrix
    else:
        value = consumer.finalize(summaries, [])

    res = SpgemmResult(value=value, matrix=matrix, grid=str(g), nbatches=nb,
                       timeline=timeline, symbolic=sym_info)
    res.timing = {"prepare_s": t_prep - t_start, "symbolic_s": t_sym - t0,
                  "run_s": t_run - t0, "batches_s": t_run - t_sym, "gather_s": t_gather,
                  "assemble_s": t_assemble}
    res.memory = _memory_section(baseline, peaks, mem, workers)
    res.measured = _measured(ledger)
    lost = sorted({w for rec in recoveries.records for w in rec["lost"]})
    if lost:
        res.measured["workers_lost"] = lost       # their sends are not counted
    res.recoveries = recoveries.records
    res.attempts = runner.attempts
    if ck is not None:
        res.checkpoint = {"dir": ck.path, "resumed": bool(resume),
                          "batches_loaded": sorted(runner.loaded),
                          "batches_written": sorted(runner.written),
                          "batches_run": sum(len(x["completed"]) for x in runner.attempts),
                          "nbatches_from": "checkpoint" if stored is not None else
                          ("symbolic" if sym_info else "argument")}
    res.quality = {"batches": nb, "window": window,
                   "nnz_c": int(matrix.nnz) if matrix is not None and isinstance(consumer, Keep)
                   else _nnz_from(summaries)}
    if plan:
        tp = time.perf_counter()
        sym = grid_symbolic(ap, bp, g, nb)
        res.plan, res.measured["expected"] = _plan_section(sym, owner, g)
        res.quality.update({"nnz_c": sym.nnz_c, "flops": sym.flops,
                            "compression_factor": sym.flops / max(sym.nnz_c, 1),
                            "max_unmerged_per_cell": sym.max_unmerged})
        res.timing["plan_s"] = time.perf_counter() - tp
        _publish_plan(client, sym, owner, g, list(final_workers), symbolic=bool(sym_info))
    return res


def _grid(grid, nworkers: int) -> Grid:
    if grid is None:
        return Grid.for_workers(nworkers, 1)
    return grid if isinstance(grid, Grid) else Grid.parse(grid)


def _cut(ap, bp, lay: Layout) -> tuple[dict, dict]:
    """Cell blocks: A(i, j, k) = A[rows_i, inner_(j,k)], B(i, j, k) = B[inner_(i,k), cols_j]."""
    g = lay.grid
    a_blocks, b_blocks = {}, {}
    for i in range(g.q):
        a_i = sp.csc_array(ap[slice(*lay.rows(i))])
        for j in range(g.q):
            for k in range(g.l):
                a_blocks[(i, j, k)] = CscBlock.from_scipy(a_i[:, slice(*lay.inner(j, k))])
    bc = sp.csc_array(bp)
    for j in range(g.q):
        b_j = sp.csr_array(bc[:, slice(*lay.cols(j))])
        for i in range(g.q):
            for k in range(g.l):
                b_blocks[(i, j, k)] = CscBlock.from_scipy(b_j[slice(*lay.inner(i, k))])
    return a_blocks, b_blocks


def _operands(consumer, mp, lay: Layout) -> dict:
    out = {}
    for (i, j, k) in lay.grid.cells():
        cols = np.concatenate([lay.batch_columns(t, j, k) for t in range(lay.b)])
        out[(i, j, k)] = consumer.operand(mp, np.arange(*lay.rows(i)), cols)
    return out


def _nnz_from(summaries) -> int | None:
    if summaries and all(isinstance(s, dict) and "nnz" in s for s in summaries):
        return int(sum(s["nnz"] for s in summaries))
    return None


def _measured(ledger: TransferLedger) -> dict:
    per_step: dict[str, dict] = {}
    for e in ledger.entries:
        steps = {step_of_key(k) for k in e["keys"]}
        step = steps.pop() if len(steps) == 1 else "mixed"
        d = per_step.setdefault(step, {"bytes": 0, "messages": 0})
        d["bytes"] += e["bytes"]
        d["messages"] += 1
    return {**ledger.report(), "per_step": per_step}


def _plan_section(sym, owner: dict, g: Grid) -> tuple[dict, dict]:
    plans = step_plans(sym)
    cells = g.cells()
    workers = sorted(set(owner.values()))
    where = np.zeros(g.p, np.int64)
    for cell in cells:
        where[g.rank(*cell)] = workers.index(owner[cell])
    section = {name: pl.report() for name, pl in plans.items()}
    section["table2"] = table2(sym)
    expected = {name: placed_volume(pl, where, dedupe_phase_src=(name != "fiber"))
                for name, pl in plans.items()}
    return section, expected


def _publish_plan(client, sym, owner: dict, g: Grid, workers: list, symbolic: bool) -> None:
    """Planned bytes between workers and flops per worker, for the dashboard pages."""
    where = np.zeros(g.p, np.int64)
    for cell in g.cells():
        where[g.rank(*cell)] = workers.index(owner[cell])
    matrix = sum(dashboard.plan_matrix(pl, where, len(workers), dedupe_phase_src=(name != "fiber"))
                 for name, pl in step_plans(sym).items() if symbolic or name != "symbolic")
    flops = np.zeros(len(workers))
    per_cell = sym.flops_cell.sum(axis=0)
    for cell in g.cells():
        flops[where[g.rank(*cell)]] += per_cell[cell]
    dashboard.publish(client, "plan", matrix=matrix, workers=workers, unit="bytes")
    dashboard.publish(client, "load", planned=dict(zip(workers, flops)), unit="flops")


def _memory_section(baseline: dict, peaks: dict, budget, workers) -> dict:
    if not peaks or any(v is None for v in peaks.values()):
        return {}
    used = {w: int(peaks[w] - (baseline.get(w) or 0)) for w in workers if w in peaks}
    out = {"peak_increase_per_worker": used, "max_peak_increase": max(used.values())}
    if budget is not None:
        out["budget_per_worker"] = int(budget)
        out["within_budget"] = bool(max(used.values()) <= budget)
    return out
