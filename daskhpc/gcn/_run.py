"""The pieces of ``fit`` around the frame: the run's Setup (the checkpoint's partition on
resume, mini-batches with their SHP partition), its plan sections, history rows and the
serial check. No dask here.

Examples
--------
>>> s = prepare_run("cora", None, None, None, 2, {"steps": 3, "shp": False}, None, False,
...                 None, {"partition": "rp", "seed": 0})
>>> minibatch_info(s)["steps"], plan_info(s)["plan"]["unit"]
(3, 'rows')
"""

from __future__ import annotations

import numpy as np

from daskhpc.errors import InputError

from ._setup import prepare

__all__ = ["MINIBATCH", "prepare_run", "rows", "plan_info", "minibatch_info",
           "serial_check"]

#: Defaults of ``fit(minibatch=True)``.
MINIBATCH = {"batch_size": 0.5, "steps": 200, "sampler": "node", "shp": True}


def prepare_run(graph, features, labels, split, nparts, minibatch, checkpoint, resume,
                 partition_file, options):
    """``prepare`` for ``fit``: the checkpoint's saved partition on resume, and the
    mini-batches (with the SHP partition of Algorithm 3) when asked for."""
    from ._job import partition_path, saved_method

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
        from ._minibatch import attach_batches, shp_assignment

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
    from daskhpc.comm import Plan

    from ._plan import plan_sections

    if not s.batches:
        out = plan_sections(s, compare_rp=False)
        out.pop("graph_model", None)
        return out
    plans = [p["forward"] for p in s.batches["plans"]] + \
        [p["backward"] for p in s.batches["plans"]]
    rep = Plan.concat([p.rephased(0) for p in plans]).report()
    rep.update(unit="rows", words_per_unit=int(max(s.dims)),
               scope="every mini-batch step: one forward and one backward exchange pattern "
                     "each (rows; a layer's exchange moves its width in words per row)")
    return {"plan": rep}


def minibatch_info(s) -> dict:
    mb = s.batches
    return {"batch_size": mb["batch_size"], "sampler": mb["sampler"],
            "steps": len(mb["nodes"]), "steps_drawn": mb["steps_drawn"],
            "partition": s.assignment.method}


def serial_check(s, value) -> dict:
    """Against the partition-aware reference (bitwise) and the textbook one (1e-10)."""
    from daskhpc.comm import run_local
    from daskhpc.report import compare_arrays

    from ._program import assemble, program, statics
    from ._serial import run_serial

    finals, _ = run_local(program(s), statics(s))
    ref = assemble(s, finals)
    out = compare_arrays(list(zip(value["params"], ref["params"])) +
                         [(value["logits"], ref["logits"])])
    out["reference"] = "run_local: the same Program part by part in one process"
    ser = run_serial(s)
    text = compare_arrays([(a, b) for a, b in zip(value["params"], ser["params"]) if b.size],
                          rtol=1e-10)
    text["predictions_identical"] = bool(np.array_equal(value["predictions"],
                                                        ser["predictions"]))
    text["reference"] = "serial_fit: the textbook epoch on the whole graph"
    out["textbook"] = text
    return out
