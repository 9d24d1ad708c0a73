"""BatchedSumma3D on the workflow frame: Symbolic3D and the batches as two phases.

The phases share one part store, the checkpoint and the restart budget. A batch is
safe once its ``done`` report reached the client and its kept blocks are on a live
worker or in the checkpoint; after a loss only unsafe batches run again, and give
exactly the matrix of an undisturbed run (same blocks, kernels, order).
"""

from __future__ import annotations

import functools
import json
import os
import threading
import time

import numpy as np

from daskhpc import dashboard
from daskhpc.comm import CostModel
from daskhpc.errors import InputError
from daskhpc.runtime import (AttemptGraph, GraphJob, gather_direct, release_futures,
                             worker_addresses)

from . import _memory
from ._graph import batch_graph, kept_name, step_of_key, symbolic_graph
from ._plan import plan_sections, step_plans
from ._plugin import ensure_plugin, fetch_timeline, register_run
from ._saving import piece_name
from ._setup import fingerprint
from ._symbolic import WORKING_HEADROOM, planned_batches, planning_memory
from ._tasks import load_kept, save_piece, save_piece_from


def _owner(s, placement) -> dict:
    return {cell: placement.worker(s.grid.rank(*cell)) for cell in s.grid.cells()}


def symbolic_job(s) -> GraphJob:
    """Algorithm 3 lines 2-8 on the cluster: the largest nnz of a cell's C (one unit)."""
    lay1 = s.layout(1)

    def attempt(ctx):
        tasks, where, totals = symbolic_graph(ctx.token, lay1, _owner(s, ctx.placement),
                                              ctx.store["A"], ctx.store["B"],
                                              ctx.store.get("MK"), s.complement)
        return AttemptGraph(tasks, where, list(totals.values()), collect=max)

    return GraphJob("spgemm-symbolic", s.grid.p, 1, row=lambda u, rep: {}, attempt=attempt,
               reporters=lambda u: set(), ordered=False, part_of=lambda c: s.grid.rank(*c))


class Phases:
    """A product's two phases; b is kept in the checkpoint, so a restart cuts the same batches."""

    def __init__(self, s, *, plan: bool = True, measure_memory: bool = True, save=None):
        self.s, self.plan, self.measure_memory, self.save = s, plan, measure_memory, save
        # hashes the inputs (~10 ms on email-Enron): once, and only for a checkpoint
        self.fp = functools.cache(functools.partial(fingerprint, s))
        self.baseline, self.symbolic_info, self._sections = {}, {}, {}
        self._plans, self.runner, self.lay = None, None, None
        self.stored = False
        self.t0 = self.t_symbolic = None
        self._planning = None           # the plan's thread, while the batches run
        self._plan_started = False

    @property
    def plans(self) -> dict | None:
        """The step plans (None: no plan), once the plan's pass is over."""
        self.finish_plan()
        return self._plans

    @property
    def sections(self) -> dict:
        """The report's ``plan``, ``quality`` and ``plan_s`` (or ``plan_error``) sections."""
        self.finish_plan()
        return self._sections

    def finish_plan(self) -> None:
        """Wait for the plan's pass (started with the batches) if it still runs."""
        if self._planning is not None:
            self._planning.join()
            self._planning = None

    def _start_plan(self, client, nb: int, placement) -> None:
        """The plan's pass for ``nb`` batches in a thread of its own (once a run)."""
        if self.plan and not self._plan_started:
            self._plan_started = True
            self._planning = threading.Thread(
                target=self._make_plan, args=(client, nb, placement),
                name="daskhpc-spgemm-plan", daemon=True)
            self._planning.start()

    def _make_plan(self, client, nb: int, placement) -> None:
        """Symbolic3D's counts on the client, in a thread beside the batches.

        A failure is reported, never raised (docs/benchmarks.md, "SpGEMM's plan beside the
        batches")."""
        s, tp = self.s, time.perf_counter()
        try:
            sym = s.symbolic(nb)
            plans = step_plans(sym)
            self._sections = dict(zip(("plan", "quality"),
                                      plan_sections(sym, CostModel.from_config())))
            self._sections["plan_s"] = time.perf_counter() - tp
            self._plans = plans
            _publish_plan(client, s, sym, plans, placement,
                          symbolic=bool(self.symbolic_info))
        except Exception as e:  # noqa: BLE001 - reported in the result instead
            self._sections["plan_error"] = f"{type(e).__name__}: {e}"

    def symbolic(self, ctx):
        """The memory baseline, the operands; Symbolic3D's job if b is to be found."""
        s = self.s
        self.stored = "batches" in ctx.facts
        known = not self.stored and (s.batches != "auto" or s.mem_cell is None)
        if known:                       # b is known: plan from now on, beside the phases
            self._start_plan(ctx.client, 1 if s.batches == "auto" else int(s.batches),
                             ctx.store.placement)
        self.baseline = ctx.client.run(_memory.reset_peak) if self.measure_memory else {}
        dashboard.publish(ctx.client, "memory", budget=s.memory, baseline=self.baseline)
        _put_operands(ctx.client, s, ctx.store)
        self.t0 = time.perf_counter()
        if self.stored or known:
            return None
        return symbolic_job(s)

    def batches(self, ctx):
        """b (the checkpoint's, Symbolic3D's or the given one), the plan, the batches' job."""
        s, client = self.s, ctx.client
        if self.stored:
            nb = int(ctx.facts["batches"])
            self.symbolic_info = dict(ctx.facts.get("symbolic") or {})
        elif "symbolic" in ctx.outcomes:
            max_c = ctx.outcomes["symbolic"].value
            nb = planned_batches(max_c, s.nnz_a, s.nnz_b, s.mem_cell, s.r, str(s.grid))
            self.symbolic_info = {
                "max_nnz_c": max_c, "max_nnz_a": s.nnz_a, "max_nnz_b": s.nnz_b,
                "memory_per_cell": s.mem_cell, "r": s.r, "batches": nb,
                "working_headroom": WORKING_HEADROOM,
                "model_memory_per_cell": planning_memory(s.mem_cell)}
        else:
            nb = 1 if s.batches == "auto" else int(s.batches)
        if not self.stored:
            ctx.remember(batches=nb, symbolic=self.symbolic_info)
        self.t_symbolic = time.perf_counter()
        self.lay = s.layout(nb)
        if s.mask is not None:
            ctx.store.put("M", s.mask_operands(self.lay))
        self._start_plan(client, nb, ctx.store.placement)
        ensure_plugin(client)
        self.runner = Batches(client, s, self.lay, ctx.checkpoint,
                              (lambda: self.plans) if self.plan else None,
                              self.measure_memory, save=self.save)
        return self.runner.job(self.fp)


def _put_operands(client, s, store) -> None:
    """A's and B's cell blocks (and the row ids, the mask) on their cells' workers."""
    if s.sources:
        # collections: the blocks are built on the cells' workers, not scattered
        from distributed import wait

        from ._collect import rebuilder, route_blocks

        fa, fb = route_blocks(client, s, store.placement)
        for name, futs in (("A", fa), ("B", fb)):
            if futs is None:
                _put_blocks(store, s, name)
            else:
                wait(list(futs.values()))
                store.adopt(name, futs, rebuild=rebuilder(client, s, name))
        for nz in s.sources.values():
            nz.release()                  # the blocks hold the values now
    else:
        _put_blocks(store, s, "A")
        _put_blocks(store, s, "B")
    store.put("R", s.row_ids())
    if s.mask is not None:
        store.put("MK", s.mask_blocks())      # C<M>: every cell's piece of the mask


def _put_blocks(store, s, name: str) -> None:
    """Operand ``name``'s cell blocks cut and sent one at a time (no second copy)."""
    store.put_each(name, s.grid.cells(), functools.partial(s.block, name))


def _publish_plan(client, s, sym, plans, placement, symbolic: bool) -> None:
    """Planned bytes between workers and flops per worker, for the dashboard pages."""
    workers, owner = worker_owner(s, placement)
    matrix = sum(pl.placed(owner, len(workers), broadcast=(name != "fiber")).bytes_matrix()
                 for name, pl in plans.items() if symbolic or name != "symbolic")
    flops = np.zeros(len(workers))
    per_cell = sym.flops_cell.sum(axis=0)
    for cell in s.grid.cells():
        flops[owner[s.grid.rank(*cell)]] += per_cell[cell]
    dashboard.publish(client, "plan", matrix=matrix, workers=workers, unit="bytes")
    dashboard.publish(client, "load", planned=dict(zip(workers, flops)), unit="flops")


class Batches:
    """The batches of one product as a Job, and what they leave behind.

    ``summary``: batch -> done summary; ``kept``: batch -> [(Future, worker, name)];
    ``plans``: None or a callable returning the step plans."""

    def __init__(self, client, s, lay, checkpoint=None, plans=None, measure_memory=True,
                 save: str | None = None):
        self.client, self.s, self.lay, self.ck = client, s, lay, checkpoint
        self.plans, self.measure_memory, self.save = plans, measure_memory, save
        self.summary, self.kept, self.files, self.timeline, self.after = {}, {}, {}, {}, {}
        self.loaded, self.attempts, self.violations = [], [], []

    def job(self, fp: dict) -> GraphJob:
        s = self.s
        return GraphJob("spgemm", s.grid.p, self.lay.b, row=self.row, fingerprint=fp,
                   attempt=self.attempt, reporters=lambda t: {"done"}, ordered=False,
                   lost=self.lost, entry=self.entry, unentry=self.unentry,
                   part_of=lambda c: s.grid.rank(*c), unit_name="batches")

    def _names(self, t: int) -> list:
        if self.ck is None or not self.s.consumer.keeps:
            return []
        return sorted(name for _, _, name in self.kept.get(t, ()))

    def row(self, t: int, rep: dict) -> dict:
        summary = rep["done"]["summary"]
        self.summary[t] = summary
        if self.attempts:
            self.attempts[-1]["completed"].append(t)
        files = self._names(t)
        missing = [n for n in files if not os.path.exists(self.ck.file(t, n))]
        if missing:
            raise InputError(f"{self.ck.file(t, missing[0])}: written by a worker but not "
                             "visible to the client; --checkpoint DIR must be on a file "
                             "system that every worker and the client share")
        if files:
            self.files[t] = files
        return {"batch": t, "summary": summary, "files": files}

    def entry(self, t: int, row: dict):
        try:
            summary = json.loads(json.dumps(row["summary"]))
        except (TypeError, ValueError) as e:
            raise InputError(f"the {self.s.consumer!r} consumer's batch summary "
                             f"{row['summary']!r} cannot be checkpointed (not JSON): {e}") from e
        return t, {"nbatches": self.lay.b, "summary": summary, "files": row["files"]}

    def unentry(self, meta: dict):
        t = int(meta["step"])
        if not 0 <= t < self.lay.b or meta.get("nbatches") != self.lay.b:
            raise InputError(f"{self.ck.path}: checkpoint step {t} is not a batch of this "
                             f"run's {self.lay.b} batches")
        self.summary[t] = meta["summary"]
        self.files[t] = list(meta.get("files", []))
        self.loaded.append(t)
        return t, {"batch": t, "summary": meta["summary"], "files": self.files[t]}

    def attempt(self, ctx) -> AttemptGraph:
        if not ctx.todo:                      # everything is safe: only the collection
            return AttemptGraph({}, {}, [], collect=self.collect)
        s, lay, rid = self.s, self.lay, ctx.token
        save = self.ck.file if self.ck is not None and s.consumer.keeps else None
        tasks, where, done_keys, kept_keys = batch_graph(
            rid, lay, _owner(s, ctx.placement), ctx.store["A"], ctx.store["B"], s.consumer,
            s.ids(lay), ctx.store.get("M"), s.local, batches=ctx.todo, save=save,
            topic=ctx.topic, checkpointed=self.ck is not None, row_keys=ctx.store.get("R"),
            semiring=s.semiring, mask_keys=ctx.store.get("MK"), complement=s.complement)
        register_run(self.client, rid, lay.b, s.window, batches=ctx.todo)
        rec = {"attempt": len(self.attempts), "batches": list(ctx.todo), "completed": []}
        self.attempts.append(rec)

        def held(futures):
            for key, f in futures.items():
                self.kept.setdefault(key[1], []).append((f, where[key], kept_name(key)))

        def cleanup():
            tl = fetch_timeline(self.client, rid)
            self.violations += tl["violations"]
            for e in tl["batches"]:
                if e["batch"] in rec["completed"]:
                    self.timeline[e["batch"]] = {**e, "attempt": rec["attempt"]}

        prefix = f"spgemm-{rid}-"
        q = s.grid.q

        def planned():       # read when the bytes are measured: the plan runs meanwhile
            got = self.plans()
            return [] if got is None else [
                (got[n], (lambda ph: ph // q) if n != "fiber" else (lambda ph: ph),
                 n != "fiber") for n in ("a_bcast", "b_bcast", "fiber")]

        return AttemptGraph(tasks, where, done_keys, collect=self.collect, cleanup=cleanup,
                            hold=kept_keys, held=held,
                            plans=[] if self.plans is None else planned,
                            unit_of_key=lambda k: int(k[1]) if isinstance(k, tuple) and
                            str(k[0]).startswith(prefix) else None)

    def collect(self, values):
        """Every batch is safe: the memory peaks, then the kept blocks (workers or checkpoint)."""
        self.after["t_run"] = time.perf_counter()
        self.after["peaks"] = (self.client.run(_memory.read_peak)
                               if self.measure_memory else {})
        if not self.s.consumer.keeps:
            return None
        if self.save is not None:
            return self._to_files()
        if self.s.keep == "workers":
            return self._on_workers()
        pairs = [(f, w) for t in sorted(self.kept) for f, w, _ in self.kept[t]]
        t0 = time.perf_counter()
        blocks = gather_direct(self.client, pairs) if pairs else []
        blocks += [load_kept(path) for _, _, path, _ in self._in_checkpoint_only()]
        release_futures(f for f, _ in pairs)     # C is here now: free it on the workers
        self.kept = {}
        self.after["gather_s"] = time.perf_counter() - t0
        return blocks

    def _on_workers(self) -> list:
        """``keep="workers"``: ``(Future, worker, batch, cell)`` of every kept block."""
        from ._collect import piece_of

        out = [(f, w, *piece_of(name, t)) for t in sorted(self.kept)
               for f, w, name in self.kept[t]]
        for t, name, path, w in self._in_checkpoint_only():
            f = self.client.submit(load_kept, path, workers=[w], allow_other_workers=False,
                                   pure=False)
            out.append((f, w, *piece_of(name, t)))
        self.kept = {}          # the caller owns the futures now
        return out

    def _in_checkpoint_only(self) -> list:
        """``(batch, name, path, worker)`` of kept blocks only in the checkpoint."""
        disk = [(t, name) for t in sorted(self.files) if t not in self.kept
                for name in self.files[t]]
        workers = worker_addresses(self.client) if disk else []
        out = []
        for n, (t, name) in enumerate(disk):
            path = self.ck.file(t, name)
            if not os.path.exists(path):
                raise InputError(f"{path}: missing from the checkpoint (batch {t} is "
                                 "recorded complete)")
            out.append((t, name, path, workers[n % len(workers)]))
        return out

    def _to_files(self) -> dict:
        """``--save DIR``: every kept block written as a save_npz piece by its worker."""
        from ._collect import piece_of

        t0 = time.perf_counter()
        shape = (self.s.shape[0], self.s.shape[2])
        pieces = [(f, w, *piece_of(name, t)) for t in sorted(self.kept)
                  for f, w, name in self.kept[t]]
        writes = [(self.client.submit(save_piece, f, self.save, piece_name(t, cell), shape,
                                      workers=[w], allow_other_workers=False, pure=False), w)
                  for f, w, t, cell in pieces]
        for t, name, path, w in self._in_checkpoint_only():
            writes.append((self.client.submit(
                save_piece_from, path, self.save, piece_name(*piece_of(name, t)), shape,
                workers=[w], allow_other_workers=False, pure=False), w))
        entries = gather_direct(self.client, writes) if writes else []
        release_futures(f for f, _ in writes)
        for e in entries:
            path = os.path.join(self.save, e["file"])
            if not os.path.exists(path) or os.path.getsize(path) != e["bytes"]:
                raise InputError(f"{path}: written by a worker but not visible to the "
                                 "client; --save DIR must be on a file system that every "
                                 "worker and the client share")
        if self.s.keep == "workers":
            out = pieces + self._on_workers()[len(pieces):]   # checkpoint blocks, loaded
        else:
            release_futures(f for f, *_ in pieces)            # C is on disk now
            out = None
        self.kept = {}
        self.after["save_s"] = time.perf_counter() - t0
        return {"files": sorted(entries, key=lambda e: e["file"]), "pieces": out}

    def lost(self, workers: set, safe: set, durable: set) -> dict:
        """What died with ``workers``: kept blocks of safe and unfinished batches."""
        invalid, from_disk = [], []
        complete = safe | durable
        for t in sorted(self.kept):
            pairs = self.kept[t]
            dead = any(w in workers for _, w, _ in pairs)
            if t in complete and not dead:
                continue
            release_futures(f for f, _, _ in pairs)
            del self.kept[t]
            if t in complete:
                (from_disk if t in durable else invalid).append(t)
        for t in invalid:
            self.summary.pop(t, None)
        return {"invalidated": invalid, "batches_from_checkpoint": from_disk,
                "batches_safe": sorted(complete - set(invalid))}

    def summaries(self) -> list:
        """The done summaries in batch order (sums come out the same on a restart)."""
        return [self.summary[t] for t in range(self.lay.b)]

    def merged_timeline(self) -> dict:
        return {"window": self.s.window,
                "batches": [self.timeline[t] for t in sorted(self.timeline)],
                "violations": list(self.violations), "attempts": len(self.attempts)}


def measured_steps(ledgers) -> dict:
    """Bytes and messages per communicating step, from transfer ledgers' entries."""
    per_step: dict[str, dict] = {}
    for ledger in ledgers:
        for e in ledger.entries or ():
            steps = {step_of_key(k) for k in e["keys"]}
            step = steps.pop() if len(steps) == 1 else "mixed"
            d = per_step.setdefault(step, {"bytes": 0, "messages": 0})
            d["bytes"] += e["bytes"]
            d["messages"] += 1
    return per_step


def worker_owner(s, placement) -> tuple[list, list]:
    """(workers, worker index of every cell rank) of a placement."""
    workers = list(placement.workers)
    return workers, [workers.index(placement.worker(r)) for r in range(s.grid.p)]
