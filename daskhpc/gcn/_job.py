"""The frame's :class:`~daskhpc.runtime.Job` of a GCN run, and what its checkpoint holds:
every part's weights and Adam state, and the row partition beside the manifest (read back
on resume: Mt-KaHyPar ``large_k`` is not reproducible). Also ``fit``'s pieces that are
not the frame's: :func:`prepare_run`, plan sections, history rows, the serial check."""

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
    """What must not change between a run and its resumption."""
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


def save_partition(s, ck) -> None:
    """Write the row partition (one part id per line) and how it was made, once."""
    if not os.path.exists(ck.extra(PARTITION)):
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
    """Program steps of one epoch: 2L - 1, then the allreduce's rounds and its update step."""
    return 2 * s.L - 1 + len(AllreduceSchedule(s.K).rounds) + 1


def short_steps(s, workers: int) -> bool:
    """``in_loop="auto"``: steps in the workers' event loops unless a part's step is long
    (above ~2e8 multiply-adds it would hold the worker's heartbeats)."""
    parts_per_worker = max(1, -(-s.K // max(int(workers), 1)))
    g = s.graph
    work = (g.A.nnz * max(s.widths + (s.dims[-1],)) + g.X.nnz * s.dims[1]) / s.K
    return work * parts_per_worker < 2e8


def gcn_job(s, *, in_loop: bool = False, exchange: str | None = None):
    """The frame's Job for the run prepared in ``s``."""
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
    """Load the numba kernels on a worker before anything is timed (each of ``dtypes``)."""
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
    """``prepare`` for ``fit``: the checkpoint's partition on resume, the mini-batches."""
    from daskhpc.runtime import CheckpointDir

    saved = None
    if checkpoint is not None and resume and partition_file is None:
        saved = partition_file = CheckpointDir.saved(checkpoint, PARTITION)
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
    """History rows; ``final_*`` only on the last."""
    out = [dict(h) for h in history]
    for h in out[:-1]:
        for k in [k for k in h if k.startswith("final_")]:
            del h[k]
    return out


def plan_info(s) -> dict:
    """The run's plan sections: full-batch totals, or the mini-batch steps' exchanges."""
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
    """Against the partition-aware reference (bitwise) and the textbook one."""
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
