"""The frame's :class:`~daskhpc.runtime.Job` of a GCN run, and what its checkpoint holds.

Units are epochs (mini-batch steps with ``minibatch=``). The Job hands the frame the
per-part static data (``_parts.statics``), the Program of the remaining epochs
(``_program.program``), how the parts' reports become a history row (``_program.row``)
and the assembled result (``_program.assemble``). A checkpoint's step n is every part's
weights and Adam state after n epochs (``_program._save``), written by the part's worker;
the row partition is saved next to the manifest on first use (``opened``) and read back
on ``--resume``, so a resumed job uses the same rows even where the partitioner is not
reproducible run to run (Mt-KaHyPar ``large_k`` at K >= 64, docs/gcn.md).

The fingerprint covers what changes the numbers: the graph, features, labels and split,
the parts and the partition, the model and optimiser options, the order of SpMM and GEMM,
the seed and the mini-batch sampler. ``epochs`` (mini-batch ``steps``) and
``eval_every`` may change on resume: epoch e computes the same whatever the run's length.

Around it, the pieces of ``fit`` that are not the frame's: the run's Setup
(:func:`prepare_run`: the checkpoint's partition on resume, mini-batches with their SHP
partition), its plan sections, history rows and the serial check.

No dask here (the frame imports it).

Examples
--------
>>> from daskhpc.gcn._setup import prepare
>>> s = prepare_run("cora", None, None, None, 2, {"steps": 3, "shp": False}, None, False,
...                 None, {"partition": "rp", "seed": 0})
>>> minibatch_info(s)["steps"], plan_info(s)["plan"]["unit"]
(3, 'rows')
>>> job = gcn_job(prepare("cora", 2, partition="rp", epochs=3))
>>> job.units, job.unit_name, sorted(fingerprint(prepare("cora", 2, partition="rp")))[:3]
(3, 'epochs', ['bias', 'dims', 'dropout'])
"""

from __future__ import annotations

import functools
import hashlib
import json
import os

import numpy as np

from daskhpc.comm import AllreduceSchedule, Plan, run_local
from daskhpc.errors import InputError
from daskhpc.report import compare_arrays

from ._minibatch import attach_batches, shp_assignment
from ._plan import plan_sections
from ._program import assemble, program, row, statics
from ._serial import epochs_of, run_serial
from ._setup import prepare

__all__ = ["gcn_job", "fingerprint", "partition_path", "save_partition", "saved_method",
           "steps_per_epoch", "warm_up", "short_steps", "MINIBATCH", "prepare_run", "rows",
           "plan_info", "minibatch_info", "serial_check", "TEXTBOOK_RTOL"]

PARTITION = "partition.txt"
PARTITION_INFO = "partition.json"


def _digest(*arrays) -> str:
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(str((a.dtype.str, a.shape)).encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


def fingerprint(s) -> dict:
    """What must not change between a run and its resumption (see the module docstring)."""
    g, o = s.graph, s.options
    m = g.masks
    fp = {"graph": _digest(g.A.indptr, g.A.indices, g.A.data),
          "features": _digest(g.X.indptr, g.X.indices, g.X.data),
          "labels": _digest(g.y, m["train"], m["val"], m["test"]),
          "parts": s.K, "partition": _digest(s.assignment.parts),
          "dims": list(s.dims), "order": list(s.transform), "optimizer": o.optimizer,
          "lr": o.lr, "weight_decay": o.weight_decay, "dropout": o.dropout, "bias": o.bias,
          "seed": o.seed}
    if o.dtype != "float64":            # only where set: float64 checkpoints stay valid
        fp["dtype"] = o.dtype
    if o.init is not None:              # a warm start: its weights (only where set)
        fp["init"] = _digest(*o.init)
    mb = s.batches
    if mb:
        fp["minibatch"] = {"batch_size": mb["batch_size"], "sampler": mb["sampler"]}
    return fp


def partition_path(path) -> str | None:
    """The partition saved in checkpoint directory ``path``, if there is one."""
    p = os.path.join(os.fspath(path), PARTITION)
    return p if os.path.exists(p) else None


def save_partition(s, ck) -> None:
    """Write the row partition (one part id per line) and how it was made, once."""
    if partition_path(ck.path) is None:
        a = s.assignment
        np.savetxt(ck.extra(PARTITION), a.parts, fmt="%d")
        ck.write_extra(PARTITION_INFO, {"method": a.method, "partitioner": a.partitioner})


def saved_method(path) -> dict:
    """``{"method", "partitioner"}`` of the partition saved in checkpoint ``path``."""
    try:
        with open(os.path.join(os.fspath(path), PARTITION_INFO)) as f:
            return dict(json.load(f))
    except (OSError, ValueError):
        return {}


def steps_per_epoch(s) -> int:
    """Program steps of one training epoch (2L - 1 exchanges and layer steps, then the
    allreduce's rounds plus its update step; the next epoch's first exchange is fused
    into the update)."""
    return 2 * s.L - 1 + len(AllreduceSchedule(s.K).rounds) + 1


def short_steps(s, workers: int) -> bool:
    """``in_loop="auto"``: run the steps in the workers' event loops unless a part's step
    is long. A step's work is about the part's share of nnz(A_hat) x the widest exchanged
    row plus its features' nonzeros x d_1 (the layer-1 GEMM). In the direct exchange the
    hand-off of every step to a worker thread and back cost more than a fifth of a
    Facebook epoch (5-step epochs of 2-6 ms steps; docs/gcn.md); a step in the loop holds
    the worker's heartbeats and the pushes it receives until it ends, so steps above
    ~2e8 multiply-adds (a few hundred ms) go to the thread."""
    parts_per_worker = max(1, -(-s.K // max(int(workers), 1)))
    g = s.graph
    work = (g.A.nnz * max(s.widths + (s.dims[-1],)) + g.X.nnz * s.dims[1]) / s.K
    return work * parts_per_worker < 2e8


def gcn_job(s, *, in_loop: bool = False, exchange: str | None = None):
    """The frame's Job for the run prepared in ``s`` (epochs, or mini-batch steps, are its
    units). ``exchange``: ``"direct"`` (messages pushed by the sender, one task per worker
    and epoch) or ``"graph"`` (one task group per worker and step); default the kit's."""
    from daskhpc.runtime import Job

    extra = {} if exchange is None else {"exchange": exchange}
    return Job("gcn", s.K, epochs_of(s), row=functools.partial(row, s),
               fingerprint=functools.partial(fingerprint, s),
               program=functools.partial(program, s),
               statics=statics(s), assemble=functools.partial(assemble, s),
               warm_up=functools.partial(warm_up, (s.options.dtype,)),
               unit_name="steps" if s.batches else "epochs",
               opened=functools.partial(save_partition, s), in_loop=bool(in_loop), **extra)


def warm_up(dtypes=("float64",)) -> bool:
    """Prepare a worker before anything is timed: load the numba
    kernels (from numba's cache): a tiny directed graph with sparse, then dense, features
    through two epochs of the program in both orders of SpMM and GEMM, in each of ``dtypes`` (the
    client compiles the default float64 only, so that a first run or ``daskhpc demo``
    does not also compile float32; a run's workers load its own dtype). Run on every worker by the
    frame."""
    import scipy.sparse as sp

    rng = np.random.default_rng(0)
    n = 12
    A = sp.csr_array(sp.random(n, n, density=0.3, random_state=1) + sp.eye(n, k=1))
    y = rng.integers(0, 3, n)
    split = (np.arange(6), np.arange(6, 9), np.arange(9, 12))
    # sparse features (CSR kernels) and dense ones (the dense kernels; _model.features)
    for X in (sp.csr_array(sp.random(n, 6, density=0.3, random_state=2)),
              rng.random((n, 6)) + 0.1):
        for dtype in dtypes:
            for order in ("aggregate", "transform"):
                s = prepare(A, 2, X, y, split, partition="rp", epochs=2, layers=(4,),
                            order=order, dtype=dtype)
                run_local(program(s), statics(s))
    # a feature per node: no part shares one, dW^1 goes as rows (_plan.first_layer_rows)
    for dtype in dtypes:
        s = prepare(A, 2, sp.eye_array(n, format="csr"), y, split, partition="rp",
                    epochs=2, layers=(4,), order="transform", dtype=dtype)
        run_local(program(s), statics(s))
    return True


#: Defaults of ``fit(minibatch=True)``.
MINIBATCH = {"batch_size": 0.5, "steps": 200, "sampler": "node", "shp": True}


def prepare_run(graph, features, labels, split, nparts, minibatch, checkpoint, resume,
                 partition_file, options):
    """``prepare`` for ``fit``: the checkpoint's saved partition on resume, and the
    mini-batches (with the SHP partition of Algorithm 3) when asked for."""
    saved = None
    if checkpoint is not None and resume and partition_file is None:
        saved = partition_file = partition_path(checkpoint)
    mb = None
    if minibatch:
        mb = dict(MINIBATCH)
        extra = {} if minibatch is True else dict(minibatch)
        unknown = sorted(set(extra) - set(mb))
        if unknown:
            raise InputError(f"unknown minibatch option(s) {unknown}; known: {sorted(mb)}")
        mb.update(extra)
        if mb["shp"] and partition_file is None:
            options["partition"] = "rp"        # replaced by SHP below: skip partitioning
    s = prepare(graph, nparts, features, labels, split, partition_file=partition_file,
                **options)
    if saved is not None:
        info = saved_method(checkpoint)
        s.assignment.method = info.get("method", "file")
        s.assignment.partitioner = info.get("partitioner")
        s.assignment.report["from_checkpoint"] = saved
    if mb is not None:
        size = mb["batch_size"]
        if not (isinstance(size, (int, float)) and size > 0) or int(mb["steps"]) < 1 or \
                mb["sampler"] not in ("node", "uniform"):
            raise InputError(f"minibatch needs batch_size > 0 (a fraction or a count), "
                             f"steps >= 1 and sampler node or uniform, got {mb}")
        if mb["shp"] and partition_file is None and s.K > 1:
            s.assignment = shp_assignment(s, batch_size=size, sampler=mb["sampler"])
            s._patterns = None
        attach_batches(s, batch_size=size, steps=int(mb["steps"]), sampler=mb["sampler"])
        if not s.batches["nodes"]:
            raise InputError("no mini-batch holds a training node: use a larger batch_size")
    return s


def rows(history) -> list:
    """History rows; ``final_*`` only on the last (a resumed run's earlier end kept its)."""
    out = [dict(h) for h in history]
    for h in out[:-1]:
        for k in [k for k in h if k.startswith("final_")]:
            del h[k]
    return out


def plan_info(s) -> dict:
    """The run's plan sections: the paper's per-epoch totals (full batch) or the steps'
    exchanges (mini-batch), the exact volumes and the dW allreduce."""
    if not s.batches:
        return plan_sections(s, compare_rp=False, graph_model=False)
    plans = [p["forward"] for p in s.batches["plans"]] + \
        [p["backward"] for p in s.batches["plans"]]
    whole = Plan.concat([p.rephased(0) for p in plans])
    whole.word_bytes = s.word_bytes
    rep = whole.report()
    rep.update(unit="rows", words_per_unit=int(max(s.dims)),
               scope="every mini-batch step: one forward and one backward exchange pattern "
                     "each (rows; a layer's exchange moves its width in words per row)")
    return {"plan": rep}


def minibatch_info(s) -> dict:
    mb = s.batches
    return {"batch_size": mb["batch_size"], "sampler": mb["sampler"],
            "steps": len(mb["nodes"]), "steps_drawn": mb["steps_drawn"],
            "partition": s.assignment.method}


#: ``serial_check.textbook``'s relative tolerance per dtype: the dW sums are taken per
#: part, then in the allreduce's tree order, so they round differently from the textbook
#: epoch's (the differences measured: docs/gcn.md).
TEXTBOOK_RTOL = {"float64": 1e-10, "float32": 1e-4}


def serial_check(s, value) -> dict:
    """Against the partition-aware reference (bitwise, in either dtype) and the textbook
    one (within :data:`TEXTBOOK_RTOL` of the run's dtype)."""
    finals, _ = run_local(program(s), statics(s))
    ref = assemble(s, finals)
    out = compare_arrays(list(zip(value["params"], ref["params"])) +
                         [(value["logits"], ref["logits"])])
    out["reference"] = "run_local: the same Program part by part in one process"
    ser = run_serial(s)
    text = compare_arrays([(a, b) for a, b in zip(value["params"], ser["params"]) if b.size],
                          rtol=TEXTBOOK_RTOL[s.options.dtype])
    text["dtype"] = s.options.dtype
    text["predictions_identical"] = bool(np.array_equal(value["predictions"],
                                                        ser["predictions"]))
    text["reference"] = "serial_fit: the textbook epoch on the whole graph"
    out["textbook"] = text
    return out
