"""Communication plan of BatchedSumma3D, step by step, next to Table II (no dask).

One volume-only :class:`~daskhpc.comm.Plan` per communicating step (section IV-C),
its phases the stages or batches. Units are nonzeros of ``WORDS_PER_UNIT`` words of
``WORD_BYTES`` (int32 row, float64 value); broadcasts are flat, as Dask does them.
"""

from __future__ import annotations

import math

import numpy as np

from daskhpc.comm import Plan
from daskhpc.spgemm._symbolic import GridSymbolic

WORDS_PER_UNIT = 3
WORD_BYTES = 4
STEPS = ("symbolic", "a_bcast", "b_bcast", "fiber")


def _plan(p, phase, src, dst, vol, nphases, name) -> Plan:
    return Plan(p, np.asarray(phase, np.int64), np.asarray(src, np.int64),
                np.asarray(dst, np.int64), volume=np.asarray(vol, np.int64),
                nphases=nphases, unit="nonzeros", words_per_unit=WORDS_PER_UNIT,
                word_bytes=WORD_BYTES, name=name)


def _bcast(sym: GridSymbolic, nnz_blocks, batches: int, along: str) -> tuple:
    """Stage s's messages: A(i,s,k) to P(i,:,k) or B(s,j,k) to P(:,j,k); phase ``t * q + s``."""
    g = sym.grid
    q, l = g.q, g.l
    phase, src, dst, vol = [], [], [], []
    for t in range(batches):
        for s in range(q):
            for k in range(l):
                for x in range(q):          # the fixed row (A) or column (B)
                    owner = g.rank(x, s, k) if along == "row" else g.rank(s, x, k)
                    v = nnz_blocks[t, x, s, k] if along == "row" else nnz_blocks[t, s, x, k]
                    for y in range(q):
                        if y == s:
                            continue
                        phase.append(t * q + s)
                        src.append(owner)
                        dst.append(g.rank(x, y, k) if along == "row" else g.rank(y, x, k))
                        vol.append(v)
    return phase, src, dst, vol


def step_plans(sym: GridSymbolic) -> dict[str, Plan]:
    """One Plan per communicating step of BatchedSumma3D (Algorithms 2-4)."""
    g, b = sym.grid, sym.nbatches
    a_once = sym.nnz_a[None]                              # A is the same in every batch
    sa = _bcast(sym, a_once, 1, "row")
    sb = _bcast(sym, sym.nnz_b[None], 1, "col")
    plans = {
        # Algorithm 3 lines 6-7: whole A and B blocks, once, q stages
        "symbolic": _plan(g.p, *(x + y for x, y in zip(sa, sb)), g.q, "Symbolic"),
        # Algorithm 1 lines 5-6 inside Algorithm 4 line 6: A again in every batch
        "a_bcast": _plan(g.p, *_bcast(sym, np.repeat(a_once, b, axis=0), b, "row"),
                         b * g.q, "A-Broadcast"),
        "b_bcast": _plan(g.p, *_bcast(sym, sym.nnz_b_batch, b, "col"), b * g.q,
                         "B-Broadcast"),
    }
    # AllToAll-Fiber (Algorithm 2 line 5): D~(i,j,k)[k2] goes to P(i,j,k2)
    phase, src, dst, vol = [], [], [], []
    for t in range(b):
        for (i, j, k) in g.cells():
            for k2 in range(g.l):
                if k2 != k:
                    phase.append(t)
                    src.append(g.rank(i, j, k))
                    dst.append(g.rank(i, j, k2))
                    vol.append(sym.layer[t, i, j, k, k2])
    plans["fiber"] = _plan(g.p, phase, src, dst, vol, b, "AllToAll-Fiber")
    return plans


def run_plan(plans: dict[str, Plan]) -> Plan:
    """Every step's messages one after another (the top-level plan totals of a report)."""
    return Plan.concat([plans[name] for name in STEPS], name="BatchedSumma3D")


def plan_sections(sym: GridSymbolic, cost) -> tuple[dict, dict]:
    """The report's ``plan`` and ``quality`` sections, for the actual nnz."""
    plans = step_plans(sym)
    est = {name: cost.plan_time(pl) for name, pl in plans.items()}
    plan = {**run_plan(plans).report(), "steps": {n: pl.report() for n, pl in plans.items()},
            "table2": table2(sym), "estimate_s": {**est, "total": sum(est.values()),
                                                  **cost.as_dict()}}
    quality = {"nnz_c": sym.nnz_c, "flops": sym.flops,
               "compression_factor": sym.flops / max(sym.nnz_c, 1),
               "max_unmerged_per_cell": sym.max_unmerged, "sum_layer_nnz": sym.sum_layer_nnz}
    return plan, quality


def table2(sym: GridSymbolic) -> dict[str, dict[str, float]]:
    """Table II's bandwidth and latency terms for the actual nnz, per step."""
    p, l, b = sym.grid.p, sym.grid.l, sym.nbatches
    nnz_a, nnz_b, flops = int(sym.nnz_a.sum()), int(sym.nnz_b.sum()), sym.flops
    c = math.sqrt(p / l)
    lg = math.log2(p / l) if p > l else 0.0
    rows = {
        "a_bcast": (nnz_a / p, b * c, b * nnz_a / math.sqrt(p * l), b * c * lg),
        "b_bcast": (nnz_b / (b * p), b * c, nnz_b / math.sqrt(p * l), b * c * lg),
        "fiber": (flops / (b * p), b, flops / p, b * l),
    }
    out = {k: {"per_process": v[0], "times": v[1], "total_bandwidth": v[2],
               "latency_terms": v[3]} for k, v in rows.items()}
    # the tighter AllToAll-Fiber bound of section IV-C: sum_k nnz(D^(k)) / p
    out["fiber"]["total_bandwidth_tight"] = sym.sum_layer_nnz / p
    return out


def placed_volume(plan: Plan, owner: np.ndarray, dedupe_phase_src: bool) -> dict:
    """Units, fetches and bytes between workers (broadcasts once per receiving worker)."""
    w = plan.placed(owner, broadcast=dedupe_phase_src)
    return {"units": int(w.volume.sum()) if w.words is None else
            int(w.message_bytes().sum() // plan.unit_bytes),
            "messages": w.meta["fetches"], "bytes": int(w.message_bytes().sum())}
