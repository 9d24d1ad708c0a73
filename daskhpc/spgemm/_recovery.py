"""Surviving a lost worker: re-place the cells, compute again only what was lost.

Every task of BatchedSumma3D has a hard worker restriction. When a worker dies, Dask
does not recover on its own: the scheduler parks the dead worker's tasks in
*no-worker* for ever (a nanny restarts the process on a new address) and the A, B
(and mask) blocks scattered to it are gone. Recovery therefore happens here, in the
driver, with the building blocks of :mod:`daskhpc.runtime`:

* :class:`CellInputs` keeps the cell blocks on the client for the whole run and, when
  a worker is lost, re-maps the cells (:func:`~daskhpc.runtime.replace_lost`, which
  waits briefly for the nanny's replacement) and scatters again the blocks of the cells
  that moved. Cells on surviving workers keep their blocks.
* :class:`BatchRunner` runs the batches in *attempts*. An attempt submits every batch
  that is not safe yet (under a fresh run id, with the admission plugin told the order)
  and waits with :func:`~daskhpc.runtime.gather_watching`, recording batches as they
  finish. On :class:`~daskhpc.runtime.WorkerLost` it releases what is not safe,
  re-places the cells and starts the next attempt.

A batch is *safe* when its ``done`` summary reached the client and, for consumers that
keep blocks on the workers (``keep``, ``prune``), those blocks are on a surviving
worker, or in the checkpoint: with ``checkpoint=DIR`` a pinned ``ckpt`` task per kept
block writes it from the worker's memory into ``DIR/step-<t>/`` and the batch's
``done`` task waits for the writes, so the client records batch ``t`` complete
(:meth:`CheckpointDir.complete <daskhpc.runtime.CheckpointDir.complete>`, with the
batch's summary) as soon as it sees ``done``. A later run with ``resume=True`` skips
the complete batches and reads their blocks from the files.

The numbers do not depend on which worker computes a cell (a cell's product is
computed from the same blocks, by the same kernels, in the same order), so a
recovered run gives exactly the matrix of an undisturbed one.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import time

import numpy as np

from daskhpc.errors import InputError
from daskhpc.runtime import (WorkerLost, WorkerWatch, array_digest, gather_watching,
                             release_futures, replace_lost, submit_pinned)
from daskhpc.runtime._progress import progress
from daskhpc.spgemm import _plugin
from daskhpc.spgemm import _tasks as T
from daskhpc.spgemm._graph import batch_graph, kept_name, symbolic_graph

__all__ = ["CellInputs", "Recoveries", "BatchRunner", "fingerprint", "run_symbolic",
           "stored_batches", "store_batches", "RUN_FILE"]

#: Run-wide facts next to the manifest: b and Symbolic3D's numbers (a restart or
#: a resumed job must use the b the checkpoint's batches were cut with).
RUN_FILE = "spgemm-run.json"


# -- the fingerprint of a run ---------------------------------------------------------

def matrix_digest(m) -> dict:
    """Shape, nnz and a SHA-256 of a canonical CSR matrix (what identifies an input)."""
    return {"shape": [int(x) for x in m.shape], "nnz": int(m.nnz),
            "sha256": array_digest(m.indptr.astype(np.int64), m.indices.astype(np.int64),
                                   np.asarray(m.data, dtype=np.float64))}


def fingerprint(a, b, *, grid: str, batches, memory, r: float, seed, consumer, local: str,
                mask=None) -> dict:
    """What changes the numbers of a run (a checkpoint of another run is refused).

    The inputs (by content), the grid (it decides the blocks and the order of the
    sums), b when forced, else the budget that Symbolic3D turns into b, the
    permutation seed, the consumer and the local variant. Not the workers, the
    window or the placement: they change where and when, not what is computed.

    Parameters
    ----------
    a, b : scipy.sparse.csr_array
        Canonical (summed duplicates, sorted indices), as ``check_inputs`` returns.
    grid : str
    batches : "auto" or int
    memory : int or None
        Bytes per worker (only with ``batches="auto"``).
    r : float
    seed : int or None
    consumer : Consumer
        By its repr (``Write`` includes its directory).
    local : str
    mask : scipy sparse, optional

    Returns
    -------
    dict
        JSON-serialisable; :class:`~daskhpc.runtime.CheckpointDir` compares it key
        by key and names the keys that differ.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from daskhpc.spgemm._consumers import Count
    >>> a = sp.csr_array(sp.eye(3))
    >>> fp = fingerprint(a, a, grid="1x1x1", batches=2, memory=None, r=24.0, seed=0,
    ...                  consumer=Count(), local="fused")
    >>> fp["a"]["nnz"], fp["batches"], fp["consume"]
    (3, 2, 'Count()')
    """
    fp = {"a": matrix_digest(a), "b": matrix_digest(b), "grid": str(grid),
          "batches": batches if batches != "auto" else "auto", "seed": seed,
          "consume": repr(consumer), "local": local}
    if batches == "auto":
        fp["memory_per_worker"] = None if memory is None else int(memory)
        fp["r"] = float(r)
    if mask is not None:
        fp["mask"] = matrix_digest(mask)
    return fp


def stored_batches(ck) -> dict | None:
    """The run facts (``batches``, ``symbolic``) stored in checkpoint ``ck``, or None.

    Raises
    ------
    InputError
        The file is there but unreadable (naming it).
    """
    path = ck.extra(RUN_FILE)
    if not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            data = json.load(f)
        int(data["batches"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputError(f"{path}: unreadable spgemm checkpoint facts: {e}") from e
    return data


def store_batches(ck, nb: int, symbolic: dict) -> None:
    """Record b (and Symbolic3D's numbers) in checkpoint ``ck``, atomically.

    Written before the first batch runs: a job that dies before any batch is
    complete is resumed with the same b, whatever the new cluster's budget per
    cell would give.
    """
    ck.write_extra(RUN_FILE, {"batches": int(nb), "symbolic": symbolic})


# -- the cell blocks and where they live ------------------------------------------------

class CellInputs:
    """The cell blocks of the run: on the client for its whole length, scattered to
    the worker of each cell, scattered again to a cell's new worker after a loss.

    Parameters
    ----------
    client : distributed.Client
    grid : Grid
    placement : Placement
        Part ``grid.rank(i, j, k)`` is cell ``(i, j, k)``.
    run : str
        Run id (for the scattered keys' names).
    warm_up : callable, optional
        Run on every worker that joins the placement after a loss, before it gets
        work (the numba kernels: a fresh process loads them in about a second,
        which then counts as recovery time, not as a slow batch).
    """

    def __init__(self, client, grid, placement, run: str, warm_up=None):
        self.client = client
        self.grid = grid
        self.place = placement
        self.warm_up = warm_up
        self.run_id = run
        self.blocks: dict[str, dict] = {}     # name -> cell -> block (client copy)
        self.futures: dict[str, dict] = {}    # name -> cell -> Future (on the owner)
        self.generation = 0

    @property
    def owner(self) -> dict:
        return {cell: self.place.worker(self.grid.rank(*cell)) for cell in self.grid.cells()}

    @property
    def workers(self) -> list[str]:
        """The workers that own cells, in placement order."""
        owners = set(self.owner.values())
        return [w for w in self.place.workers if w in owners]

    def add(self, name: str, blocks: dict) -> dict:
        """Scatter ``blocks`` (cell -> block) to their owners; returns cell -> Future."""
        self.blocks[name] = blocks
        self.futures[name] = self._scatter(name, blocks, self.owner)
        return self.futures[name]

    def __getitem__(self, name: str) -> dict:
        return self.futures[name]

    def get(self, name: str):
        return self.futures.get(name)

    def _scatter(self, name: str, blocks: dict, owner: dict) -> dict:
        """Send each block to its cell's worker once."""
        prefix = f"spgemm{name}-{self.run_id}" + (f"g{self.generation}" if self.generation else "")
        keys, by_worker = {}, {}
        for cell, blk in blocks.items():
            keys[cell] = f"{prefix}-{cell[0]}-{cell[1]}-{cell[2]}"
            by_worker.setdefault(owner[cell], {})[keys[cell]] = blk
        futures = {}
        for w, data in by_worker.items():
            futures.update(self.client.scatter(data, workers=[w], broadcast=False, hash=False))
        return {cell: futures[key] for cell, key in keys.items()}

    def recover(self, lost) -> tuple[list, list]:
        """Re-place the cells of ``lost`` workers and scatter their blocks again.

        Returns
        -------
        moved : list of cells
            Cells now on another worker.
        new : list of str
            Workers of the new placement that the old one did not have (the
            nannies' replacements).
        """
        before = self.owner
        old_workers = set(self.place.workers)
        self.place = replace_lost(self.client, self.place, set(lost))
        after = self.owner
        moved = [cell for cell in self.grid.cells() if after[cell] != before[cell]]
        new = [w for w in self.place.workers if w not in old_workers]
        if self.warm_up is not None and new:
            try:
                self.client.run(self.warm_up, workers=new)
            except Exception:  # noqa: BLE001 - only a head start; the tasks load them too
                pass
        self.generation += 1
        for name, blocks in self.blocks.items():
            if not moved:
                break
            # the old futures of moved cells point at data that died with its worker
            release_futures(self.futures[name][c] for c in moved)
            fresh = self._scatter(name, {c: blocks[c] for c in moved}, after)
            self.futures[name].update(fresh)
        return moved, new

    def release(self) -> None:
        """Drop the futures (the workers free the blocks); keep nothing on the client."""
        for futs in self.futures.values():
            release_futures(futs.values())
        self.futures = {}
        self.blocks = {}


# -- the recoveries of a run ---------------------------------------------------------------

class Recoveries:
    """The list of recoveries of a run, and the restart budget.

    Parameters
    ----------
    max_restarts : int
        Losses survived; one more raises :class:`~daskhpc.runtime.WorkerLost`.
    t0 : float
        ``time.perf_counter()`` at the start of the run (times are relative to it).
    """

    def __init__(self, max_restarts: int, t0: float):
        self.max_restarts = int(max_restarts)
        self.t0 = t0
        self.records: list[dict] = []

    def begin(self, lost: WorkerLost, **facts) -> dict:
        """A loss was noticed: a new record, or the error if the budget is spent."""
        if len(self.records) >= self.max_restarts:
            err = WorkerLost(lost.lost)
            err.args = (f"{err} (the run had recovered {len(self.records)} time(s) already; "
                        f"max_restarts={self.max_restarts})",)
            raise err from lost
        rec = {"lost": sorted(lost.lost), "noticed_at_s": time.perf_counter() - self.t0,
               **facts}
        self.records.append(rec)
        return rec


def run_symbolic(client, inputs: CellInputs, lay1, run: str, recoveries: Recoveries) -> int:
    """Symbolic3D (Algorithm 3, lines 2-8) on the cluster: max nnz of a cell's C.

    A lost worker restarts the step (it is one pass) on the re-placed cells.
    """
    attempt = 0
    while True:
        rid = run if attempt == 0 else f"{run}s{attempt}"
        tasks, where, totals = symbolic_graph(rid, lay1, inputs.owner, inputs["A"], inputs["B"])
        futs = submit_pinned(client, tasks, where, list(totals.values()))
        t_start = time.perf_counter()
        try:
            with WorkerWatch(client, inputs.workers) as watch:
                return max(gather_watching(client, futs, watch))
        except WorkerLost as e:
            t_notice = time.perf_counter()
            release_futures(futs)
            rec = recoveries.begin(e, phase="symbolic", attempt=attempt)
            moved, new = inputs.recover(e.lost)
            rec.update(rerun="symbolic", cells_moved=[list(c) for c in moved],
                       new_workers=new, wasted_s=t_notice - t_start,
                       recovery_s=time.perf_counter() - t_notice)
            rec["time_lost_s"] = rec["wasted_s"] + rec["recovery_s"]
            attempt += 1


# -- the batches --------------------------------------------------------------------------

class BatchRunner:
    """Run the batches of one product until every batch is safe (see the module doc).

    Parameters
    ----------
    client : distributed.Client
    inputs : CellInputs
        With ``A``, ``B`` (and ``M`` for a mask) added.
    lay : Layout
        With b batches.
    consumer : Consumer
    ids : dict
        Original ids (see :func:`~daskhpc.spgemm._graph.batch_graph`).
    local : str
    window : int
    run : str
    recoveries : Recoveries
    checkpoint : CheckpointDir, optional
    """

    def __init__(self, client, inputs: CellInputs, lay, consumer, ids: dict, local: str,
                 window: int, run: str, recoveries: Recoveries, checkpoint=None):
        self.client = client
        self.inputs = inputs
        self.lay = lay
        self.nb = lay.b
        self.consumer = consumer
        self.ids = ids
        self.local = local
        self.window = window
        self.run_id = run
        self.recoveries = recoveries
        self.ck = checkpoint
        self.summary: dict[int, object] = {}     # safe batches: t -> done summary
        self.kept: dict[int, list] = {}          # t -> [(Future, worker)] kept in memory
        self.on_disk: dict[int, list] = {}       # t -> kept files (complete in checkpoint)
        self.loaded: list[int] = []              # complete in the checkpoint at the start
        self.written: list[int] = []             # made complete by this run
        self.attempts: list[dict] = []
        self.timeline: dict[int, dict] = {}      # t -> record of the attempt that did it
        self.violations: list[str] = []
        self.duration: dict[int, float] = {}     # t -> seconds since the previous batch
        self.blocks: list = []                   # kept (block, rows, cols), after run()
        self.gather_s = 0.0
        self._progress_at = time.perf_counter()

    # -- public ------------------------------------------------------------------------
    def resume(self) -> None:
        """Take the batches the checkpoint holds as done (their summaries, their files)."""
        for meta in self.ck.steps():
            t = int(meta["step"])
            if not 0 <= t < self.nb or meta.get("nbatches") != self.nb:
                raise InputError(f"{self.ck.path}: checkpoint step {t} is not a batch of "
                                 f"this run's {self.nb} batches")
            self.summary[t] = meta["summary"]
            if self.consumer.keeps:
                self.on_disk[t] = list(meta.get("files", []))
            self.loaded.append(t)

    def run(self, batches_done=None) -> None:
        """Attempts until every batch is safe, then (``keeps``) the kept blocks.

        ``batches_done()`` is called each time every batch is safe, before the
        kept blocks are gathered (a loss during the gather runs the lost batches
        again and calls it again).
        """
        while True:
            todo = [t for t in range(self.nb) if t not in self.summary]
            try:
                if todo:
                    self._attempt(todo)
                if batches_done is not None:
                    batches_done()
                if self.consumer.keeps:
                    tg = time.perf_counter()
                    try:
                        self.blocks = self._collect()
                    finally:
                        self.gather_s += time.perf_counter() - tg
                return
            except WorkerLost as e:
                self._recover(e, todo)

    def summaries(self) -> list:
        """The done summaries in batch order (sums come out the same on a restart)."""
        return [self.summary[t] for t in range(self.nb)]

    def merged_timeline(self) -> dict:
        """Per batch the admission record of the attempt that completed it."""
        return {"window": self.window,
                "batches": [self.timeline[t] for t in sorted(self.timeline)],
                "violations": list(self.violations), "attempts": len(self.attempts)}

    # -- one attempt ---------------------------------------------------------------------
    def _attempt(self, todo: list) -> None:
        n = len(self.attempts)
        rid = self.run_id if n == 0 else f"{self.run_id}r{n}"
        save = None
        if self.ck is not None and self.consumer.keeps:
            save = self.ck.file
        opk = self.inputs.get("M")
        topic = f"daskhpc-spgemm-{rid}"
        tasks, where, done_keys, kept_keys = batch_graph(
            rid, self.lay, self.inputs.owner, self.inputs["A"], self.inputs["B"],
            self.consumer, self.ids, opk, self.local, batches=todo, save=save, topic=topic)
        # the done tasks' summaries come as events too: they arrive before the news
        # of a worker's death, while fetching a result could find its worker gone
        arrived: dict[int, object] = {}

        def on_event(event, arrived=arrived):
            msg = event[1]
            if isinstance(msg, dict) and "t" in msg:
                arrived[int(msg["t"])] = msg.get("summary")

        self.client.subscribe_topic(topic, on_event)
        _plugin.register_run(self.client, rid, self.nb, self.window, batches=todo)
        futs = submit_pinned(self.client, tasks, where, done_keys + kept_keys)
        done = dict(zip(todo, futs[:len(done_keys)]))
        kept = {t: [] for t in todo}
        for key, f in zip(kept_keys, futs[len(done_keys):]):
            kept[key[1]].append((f, where[key], kept_name(key)))
        rec = {"attempt": n, "batches": list(todo), "completed": []}
        self.attempts.append(rec)
        self._progress_at = time.perf_counter()

        def record():
            for t, f in done.items():
                if t in self.summary:
                    continue
                if t in arrived:
                    self._safe(t, arrived[t], kept[t], rec)
                elif f.status == "finished":
                    self._safe(t, f.result(), kept[t], rec)

        try:
            with WorkerWatch(self.client, self.inputs.workers) as watch, \
                    progress(list(done.values()), "spgemm batches"):
                gather_watching(self.client, list(done.values()), watch, on_poll=record)
            record()
        except WorkerLost:
            record()     # what finished before the loss was noticed is not lost
            # drop what is not safe: it waits for the dead worker for ever
            release_futures(x[0] for t in todo if t not in self.summary for x in kept[t])
            raise
        finally:
            # the summaries are here; without the done keys, a kept block has no
            # dependent left on the scheduler (see _gather_direct)
            release_futures(done.values())
            done.clear()
            kept.clear()
            try:
                self.client.unsubscribe_topic(topic)
            except Exception:  # noqa: BLE001, S110 - a closed client has nothing to drop
                pass
            tl = _plugin.fetch_timeline(self.client, rid)
            self.violations += tl["violations"]
            for entry in tl["batches"]:
                if entry["batch"] in rec["completed"]:
                    self.timeline[entry["batch"]] = {**entry, "attempt": n}

    def _safe(self, t: int, summary, kept: list, rec: dict) -> None:
        """Batch ``t`` is done: its summary is here (and its kept blocks written)."""
        self.summary[t] = summary
        now = time.perf_counter()
        self.duration[t] = now - self._progress_at
        self._progress_at = now
        rec["completed"].append(t)
        if self.consumer.keeps:
            self.kept[t] = [(f, w) for f, w, _ in kept]
        if self.ck is not None:
            files = [name for _, _, name in kept] if self.consumer.keeps else []
            missing = [n for n in files if not os.path.exists(self.ck.file(t, n))]
            if missing:
                raise InputError(
                    f"{self.ck.file(t, missing[0])}: written by a worker but not visible "
                    "to the client; --checkpoint DIR must be on a file system that every "
                    "worker and the client share")
            try:
                summary_json = json.loads(json.dumps(summary))
            except (TypeError, ValueError) as e:
                raise InputError(f"the {self.consumer!r} consumer's batch summary "
                                 f"{summary!r} cannot be checkpointed (not JSON): {e}") from e
            self.ck.complete(t, nbatches=self.nb, summary=summary_json, files=files)
            self.written.append(t)
            if files:
                self.on_disk[t] = files

    # -- after a loss ----------------------------------------------------------------------
    def _recover(self, lost: WorkerLost, todo: list) -> None:
        t_notice = time.perf_counter()
        in_flight = [t for t in todo if t not in self.summary]
        rec = self.recoveries.begin(
            lost, phase="batches" if in_flight else "gather",
            attempt=len(self.attempts) - 1, batch=min(in_flight) if in_flight else None,
            in_flight=in_flight)
        # a safe batch whose kept blocks died: from the checkpoint if it is there,
        # else computed again
        invalid, invalid_s, from_disk = [], 0.0, []
        for t in sorted(self.kept):
            pairs = self.kept[t]
            if not any(w in lost.lost for _, w in pairs):
                continue
            del self.kept[t]
            # the batch is read from disk or computed again, in full
            release_futures(f for f, _ in pairs)
            if t in self.on_disk:
                from_disk.append(t)
                continue
            invalid.append(t)
            invalid_s += self.duration.get(t, 0.0)
            del self.summary[t]
        moved, new = self.inputs.recover(lost.lost)
        rerun = [t for t in range(self.nb) if t not in self.summary]
        rec.update(batches_safe=sorted(self.summary), batches_invalidated=invalid,
                   batches_from_checkpoint=from_disk, rerun=rerun,
                   cells_moved=[list(c) for c in moved], new_workers=new,
                   workers=len(self.inputs.workers),
                   wasted_s=t_notice - self._progress_at if in_flight else 0.0,
                   invalidated_s=invalid_s, recovery_s=time.perf_counter() - t_notice)
        rec["time_lost_s"] = rec["wasted_s"] + rec["invalidated_s"] + rec["recovery_s"]
        self._progress_at = time.perf_counter()

    # -- the kept blocks ------------------------------------------------------------------
    def _collect(self) -> list:
        """Kept blocks: straight from the workers where alive, else from the files."""
        pairs = [(f, w) for t in sorted(self.kept) for f, w in self.kept[t]]
        from_disk = [t for t in sorted(self.on_disk) if t not in self.kept]
        blocks = _gather_direct(self.client, pairs) if pairs else []
        self.kept, pairs = {}, None       # C is here now: free it on the workers
        for t in from_disk:
            for name in self.on_disk[t]:
                path = self.ck.file(t, name)
                if not os.path.exists(path):
                    raise InputError(f"{path}: missing from the checkpoint (batch {t} is "
                                     "recorded complete)")
                blocks.append(T.load_kept(path))
        return blocks


def _gather_direct(client, pairs: list) -> list:
    """``client.gather(futures, direct=True)`` that raises WorkerLost, not hangs.

    ``direct``: straight from the workers (the default gather relays every byte
    through the scheduler; 2-3x slower for C). A direct gather of a block whose
    worker died waits for it to be computed again, which a pinned task never is;
    so the gather runs in a thread while this one watches the workers, and on a
    loss cancels the lost futures (the gather then ends) and raises. Cancelling
    is safe here (see :func:`~daskhpc.runtime.release_futures`): the attempts
    released their ``done`` keys before, so no task depends on a kept block any more.
    """
    futures = [f for f, _ in pairs]
    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="spgemm-gather")
    try:
        with WorkerWatch(client, {w for _, w in pairs}) as watch:
            watch.check()
            job = pool.submit(client.gather, futures, direct=True)
            last = time.monotonic()
            while True:
                try:
                    return job.result(timeout=0.1)
                except concurrent.futures.TimeoutError:
                    pass
                except Exception:
                    # a block lost with its worker can fail the gather before the
                    # loss is seen here: report the loss, which is the cause
                    time.sleep(0.2)
                    watch.refresh()
                    if not watch.lost:
                        raise
                if time.monotonic() - last > 1.0:
                    watch.refresh()
                    last = time.monotonic()
                lost = watch.lost
                if lost:
                    client.cancel([f for f, w in pairs if w in lost])
                    raise WorkerLost(lost)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
