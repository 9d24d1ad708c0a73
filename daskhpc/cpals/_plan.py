"""The messages of one CP-ALS iteration, and the report sections of ``plan``.

Per mode n, with Lambda_i the connectivity set of row i and mu(i) its owner: coarse
grain (Algorithm 3 line 3), one *expand* from mu(i) to the rest of Lambda_i, the km1 of
the coarse hypergraph; fine grain (Algorithm 4), a *fold* of partial rows to mu(i)
(lines 2-3) and the *expand* back (lines 5-6), 2 (km1 + displaced rows). A unit is one
factor row of R words; the Gram all-reduces (Algorithm 3 line 4, Algorithm 4 line 7)
are a separate recursive-doubling plan of R^2 + R words (+ R for the fit)."""

from __future__ import annotations

import numpy as np

from daskhpc.comm import AllreduceSchedule, Plan, expand_plan, row_volume

from ._assign import Distribution, part_counts
from ._data import Tensor


def mode_plans(X: Tensor, d: Distribution, rank: int) -> list[dict]:
    """Per mode: ``{"fold": Plan or None, "expand": Plan, "lam": (ptr, parts)}``."""
    out = []
    for n in range(X.order):
        lam = d.connectivity(X, n)
        expand = expand_plan(d.owners[n], *lam, d.nparts, name=f"expand-{n}", unit="rows",
                             words_per_unit=int(rank))
        # the fold moves the same rows between the same parts the other way (Algorithm 4
        # lines 2-3 are the duals of lines 5-6): fold_plan(...) == expand.reversed()
        fold = expand.reversed(name=f"fold-{n}") if d.grain == "fine" else None
        out.append({"fold": fold, "lam": lam, "expand": expand})
    return out


def iteration_plan(X: Tensor, d: Distribution, rank: int, plans=None) -> Plan:
    """Point-to-point messages of one iteration, one phase per fold/expand, mode order."""
    plans = plans if plans is not None else mode_plans(X, d, rank)
    seq = [p for mp in plans for p in (mp["fold"], mp["expand"]) if p is not None]
    out = Plan.concat(seq, nparts=d.nparts, unit="rows", words_per_unit=int(rank))
    out.name = f"cpals {d.grain} iteration"
    return out


def allreduce_words(rank: int, mode: int, order: int) -> int:
    """Words of mode ``mode``'s all-reduce: the new factor's Gram (R^2), column maxima (R)
    and after the last mode the fit's inner products (R)."""
    R = int(rank)
    return R * R + R + (R if mode == order - 1 else 0)


def allreduce_plan(nparts: int, rank: int, order: int) -> Plan:
    """The all-reduces of one iteration (one per mode), reported beside the p2p plan."""
    sched = AllreduceSchedule(nparts)
    plans = [sched.plan(allreduce_words(rank, n, order), name=f"allreduce-{n}")
             for n in range(order)]
    out = Plan.concat(plans, nparts=nparts)
    out.name = "cpals gram allreduce"
    return out


def mode_table(X: Tensor, d: Distribution, plans) -> list[dict]:
    """The paper's Table 2 per mode: load, volume and messages, max and average over parts."""
    K = d.nparts
    rows = []
    for n, mp in enumerate(plans):
        load = d.loads(X, n)
        vol = np.zeros(K, np.int64)
        msgs = np.zeros(K, np.int64)
        for p in (mp["fold"], mp["expand"]):
            if p is not None:
                np.add.at(vol, p.src, p.volume)
                np.add.at(msgs, p.src, 1)
        rows.append({"mode": n + 1, "load_max": int(load.max()), "load_avg": float(load.mean()),
                     "vol_max": int(vol.max()), "vol_avg": float(vol.mean()),
                     "msgs_max": int(msgs.max()), "msgs_avg": float(msgs.mean()),
                     "vol_total": int(vol.sum())})
    return rows


def _imbalance(w: np.ndarray) -> float:
    avg = w.sum() / w.size
    return float(w.max() / avg - 1.0) if avg > 0 else 0.0


def partition_section(X: Tensor, d: Distribution, plans, epsilon: float) -> dict:
    """The ``partition`` section: balance of every mode and the cut it implies."""
    K, N = d.nparts, X.order
    out = {"grain": d.grain, "method": d.method}
    if d.grain == "fine":
        # connectivity-1 of the fine-grain hypergraph (nets = rows, pins = nonzeros)
        km1 = int(sum(np.maximum(np.diff(mp["lam"][0]) - 1, 0).sum() for mp in plans))
        load = part_counts(d.nnz_parts, K)
        displaced = 0
        for n, mp in enumerate(plans):
            ptr, parts = mp["lam"]
            row = np.repeat(np.arange(ptr.size - 1), np.diff(ptr))
            has_owner = np.zeros(ptr.size - 1, bool)
            has_owner[row[parts == d.owners[n][row]]] = True
            displaced += int(np.count_nonzero(~has_owner & (np.diff(ptr) > 0)))
        out.update(imbalance=_imbalance(load), km1=km1, displaced_rows=displaced,
                   nonzeros_max=int(load.max()),
                   row_imbalance_per_mode=[_imbalance(np.bincount(o, minlength=K))
                                           for o in d.owners])
    else:
        # connectivity-1 of the coarse-grain hypergraph: the owner's vertex t_n^i is a pin
        # of n_n^i, so lambda(n_n^i) = |Lambda_i U {mu(i)}|
        km1 = int(sum(row_volume(d.owners[n], *mp["lam"]).sum() for n, mp in enumerate(plans)))
        per_mode = [_imbalance(d.loads(X, n)) for n in range(N)]
        out.update(imbalance=max(per_mode), imbalance_per_mode=per_mode, km1=km1)
    if d.method == "hp":
        out["partitioner"] = d.partitioner
        out["epsilon"] = float(epsilon)
        if d.choice is not None:
            out["auto"] = {k: d.choice[k] for k in ("backend", "options", "rule")}
    out["time_s"] = round(d.time_s, 6)
    return out
