"""The messages of one GCN epoch (section 4, Algorithms 1-2) and the ``plan`` report.

Forward layer k: row j of H^{k-1} goes once to every part whose A_hat rows have column j
(eqs. (8)-(9): the connectivity sets of the column-net of A_hat), d_{k-1} x km1 words.
Backward: rows of G^k, d_k words each, along A_hat^T (the row-net of A_hat). For a
symmetric A_hat an epoch moves sum_k (d_{k-1} + d_k) x km1 words (eq. (11) counts every
net twice). The dW allreduces (Algorithm 2 line 13) are reported apart."""

from __future__ import annotations

import functools
from dataclasses import replace

import numpy as np
import scipy.sparse as sp

import daskhpc.hypergraph as hg
from daskhpc.comm import AllreduceSchedule, CostModel, Plan, expand_plan
from daskhpc.report import ratio_or_none, unavailable

from ._assign import Assignment, paper_random
from ._model import dense_features

# Table 2 of the paper (P = 512): HP and GP normalised by RP (avg/max volume and messages).
PAPER_TABLE2 = {
    "soc-Slashdot0902": {"hp": {"avg_vol": 0.74, "max_vol": 0.69, "avg_msgs": 0.86,
                                "max_msgs": 0.92},
                         "gp": {"avg_vol": 0.85, "max_vol": 4.38, "avg_msgs": 0.93,
                                "max_msgs": 1.00}},
}


def _sets(A, parts, K):
    return hg.connectivity_sets(hg.column_net(A), parts, K)


def patterns(setup) -> dict:
    """Connectivity sets (CSR over rows j) of the forward and backward exchanges."""
    g, K, parts = setup.graph, setup.K, setup.assignment.parts
    fwd = _sets(g.A, parts, K)
    bwd = fwd if g.symmetric else _sets(g.AT, parts, K)
    return {"forward": fwd, "backward": bwd}


def exchange_plans(setup) -> dict:
    """The two exchange patterns as Plans of one phase and one word per row."""
    pat = setup.patterns()
    if "plans" not in pat:
        K, parts = setup.K, setup.assignment.parts
        fwd = expand_plan(parts, *pat["forward"], K, name="forward H rows")
        bwd = fwd if setup.graph.symmetric else expand_plan(parts, *pat["backward"], K,
                                                            name="backward G rows")
        pat["plans"] = {"forward": fwd, "backward": bwd}
    return pat["plans"]


def epoch_plan(setup, evaluating: float = 0.0) -> Plan:
    """One training epoch: L forward phases, then L backward phases k = L .. 1; forward rows
    ``1 + evaluating`` times as wide (an epoch that evaluates sends both passes' rows)."""
    d, L = setup.dims, setup.L
    ex = exchange_plans(setup)
    phases = [ex["forward"].rephased(0)] * L + [ex["backward"].rephased(0)] * L
    words = [round(w * (1 + evaluating)) for w in setup.widths] + \
        [d[k] for k in range(L, 0, -1)]
    p = Plan.concat(phases, words=np.concatenate(
        [np.full(q.num_messages, w, np.int64) for q, w in zip(phases, words)]))
    p.name = "gcn epoch"
    p.word_bytes = setup.word_bytes       # 8 (float64) or 4 (float32)
    p.meta["phase_words"] = words
    return p


def allreduce_words(setup) -> int:
    """Length of the reduced vector: every dW^k and b^k, plus 7 metric sums."""
    d = setup.dims
    return int(sum(d[k - 1] * d[k] + (d[k] if setup.options.bias else 0)
                   for k in range(1, len(d)))) + 7


def vector_words(setup) -> int:
    """Length of the dense allreduce's vector, less dW^1 when it travels as rows."""
    d = setup.dims
    rows = first_layer_rows(setup)
    return allreduce_words(setup) - (d[0] * d[1] if rows is not None else 0)


def _incidence(X, parts):
    """``(part, feature)`` pairs of the parts' feature supports, sorted: where part m's dW^1
    rows can be nonzero (dW^1_m = dropout(X_m)^T P_m, eq. (4) at k = 1)."""
    d = X.shape[1]
    key = np.unique(np.repeat(np.asarray(parts, np.int64), np.diff(X.indptr)) * d +
                    X.indices)
    return key // d, key % d


def _shared(part, feat):
    """``(src, dst, feature, message starts)`` of dW^1's shared rows, built per feature."""
    order = np.lexsort((part, feat))
    f, p = feat[order], part[order]
    starts = np.flatnonzero(np.r_[True, f[1:] != f[:-1]])
    counts = np.diff(np.r_[starts, f.size])
    src, dst, rows = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for c in np.unique(counts[counts > 1]):      # features held by c parts, together
        first = starts[counts == c]
        held = p[first[:, None] + np.arange(c)]  # (features, c) parts
        i, j = np.nonzero(~np.eye(c, dtype=bool))
        src.append(held[:, i].ravel())
        dst.append(held[:, j].ravel())
        rows.append(np.repeat(f[first], i.size))
    src, dst, rows = (np.concatenate(x) for x in (src, dst, rows))
    o = np.lexsort((rows, dst, src))
    src, dst, rows = src[o], dst[o], rows[o]
    new = np.flatnonzero(np.r_[True, (src[1:] != src[:-1]) | (dst[1:] != dst[:-1])]) \
        if src.size else np.zeros(0, np.int64)
    return src, dst, rows, new


def _cheaper(setup, rows_sent, messages) -> bool:
    """Whether dW^1 as rows beats its dense recursive doubling: fewer words from every
    sending part and less time for the slowest by the default alpha-beta model."""
    K, d, wb = setup.K, setup.dims, setup.word_bytes
    dense = AllreduceSchedule(K).plan(d[0] * d[1])
    dense_sent = np.bincount(dense.src, weights=dense.message_bytes() / dense.word_bytes,
                             minlength=K)
    if not np.all((rows_sent < dense_sent) | (rows_sent == 0)):
        return False
    src, dst, _, new = messages()
    first = dense.phase == 0
    partner = np.full(K, -1)
    partner[dense.src[first]] = dense.dst[first]
    extra = np.bincount(src[new], weights=dst[new] != partner[src[new]], minlength=K)
    model = CostModel()     # the defaults, not dask's config: a plan and its run agree
    t_rows = model.alpha * extra + model.beta * wb * rows_sent
    return bool(t_rows.max() < (model.beta * wb * dense_sent).max())


def first_layer_rows(setup) -> dict | None:
    """dW^1 as rows between the parts that share them (``{"keep", "send", "plan"}``), or None.

    With sparse features transformed first, part m's dW^1 is zero outside the rows S_m its
    features touch: it sends part n S_m ∩ S_n and keeps S_m; each kept row's total is the
    allreduce's tree, so the weights are bitwise the dense ones (chosen where :func:`_cheaper`)."""
    pat = setup.patterns()
    if "w1" in pat:
        return pat["w1"]
    out = None
    g, K, d = setup.graph, setup.K, setup.dims
    X = sp.csr_array(g.X) if K > 1 and setup.transform[0] else None
    if X is not None and not dense_features(X.nnz, *X.shape):
        part, feat = _incidence(X, setup.assignment.parts)
        holders = np.bincount(feat, minlength=d[0])
        rows_sent = np.bincount(part, weights=holders[feat] - 1, minlength=K) * d[1]
        messages = functools.cache(lambda: _shared(part, feat))     # built at most once
        if _cheaper(setup, rows_sent, messages):
            src, dst, rows, new = messages()
            bounds = np.searchsorted(part, np.arange(K + 1))
            keep = [feat[bounds[m]:bounds[m + 1]] for m in range(K)]
            keep[0] = np.union1d(keep[0], np.flatnonzero(holders == 0))
            ptr = np.r_[new, src.size].astype(np.int64)
            plan = Plan(K, np.zeros(new.size, np.int64), src[new], dst[new], ptr=ptr,
                        indices=rows, unit="rows", words_per_unit=int(d[1]),
                        word_bytes=setup.word_bytes, name="dW1 rows")
            send = [{} for _ in range(K)]
            for m in range(new.size):
                send[int(src[new[m]])][int(dst[new[m]])] = rows[ptr[m]:ptr[m + 1]]
            out = {"keep": keep, "send": send, "plan": plan}
    pat["w1"] = out
    return out


def graph_model_rows(A, parts) -> int:
    """The graph model's rows per exchange: 2 x cut edges of the symmetrised graph (4.3.1)."""
    G = hg.symmetric_graph(A)          # both directions of every edge are stored
    rows = np.repeat(np.arange(G.shape[0]), np.diff(G.indptr))
    parts = np.asarray(parts)
    return int(np.count_nonzero(parts[rows] != parts[G.indices]))


def _exact(setup) -> dict:
    """km1 of both patterns and the volume they imply (independent of the Plan arrays)."""
    pat = setup.patterns()
    k_f = int((np.diff(pat["forward"][0]) - 1).clip(0).sum())
    k_b = int((np.diff(pat["backward"][0]) - 1).clip(0).sum())
    d, L = setup.dims, setup.L
    return {"km1_forward": k_f, "km1_backward": k_b,
            "words_forward": sum(setup.widths) * k_f,
            "words_backward": sum(d[k] for k in range(1, L + 1)) * k_b}


def _summary(plan: Plan) -> dict:
    """Per-part average/max volume (words) and messages over the epoch (Table 2's units)."""
    vol = np.zeros(plan.nparts)
    np.add.at(vol, plan.src, plan.message_bytes() / plan.word_bytes)
    msg = np.bincount(plan.src, minlength=plan.nparts)
    return {"avg_vol": float(vol.mean()), "max_vol": float(vol.max()),
            "avg_msgs": float(msg.mean()), "max_msgs": float(msg.max())}


def plan_sections(setup, *, compare_rp: bool = True, graph_model: bool = True) -> dict:
    """The report sections of ``daskhpc plan gcn``; a run leaves out the comparisons."""
    plan = epoch_plan(setup)
    rep = plan.report()
    rep["unit"], rep["words_per_unit"] = "rows", int(max(setup.dims))
    rep["phase_words"] = plan.meta["phase_words"]
    rep["order"] = ["transform" if t else "aggregate" for t in setup.transform]
    rep["dtype"] = setup.dtype.name
    rep["words"] = int((plan.message_bytes() // plan.word_bytes).sum())
    ex = _exact(setup)
    ex["symmetric"] = setup.graph.symmetric
    ex["formula_words"] = ex["words_forward"] + ex["words_backward"]
    per = _summary(plan)
    ar = AllreduceSchedule(setup.K).plan(vector_words(setup), name="dW allreduce")
    ar.word_bytes = setup.word_bytes
    out = {"plan": rep, "volume": ex, "per_part": per,
           "allreduce": {**ar.report(), "algorithm": "recursive doubling (dense)"}}
    w1 = first_layer_rows(setup)
    if w1 is not None:
        dense = AllreduceSchedule(setup.K).plan(setup.dims[0] * setup.dims[1])
        out["allreduce"]["dW1_rows"] = {
            **w1["plan"].report(), "dense_words": setup.dims[0] * setup.dims[1],
            "dense_bytes": int(dense.message_bytes().sum()) * setup.word_bytes // 8,
            "note": "dW1 leaves the vector: its rows go to the parts that share them, "
                    "with the allreduce's first messages"}
    if graph_model:
        gm = graph_model_rows(setup.graph.A, setup.assignment.parts)
        d = setup.dims
        out["graph_model"] = {
            "cut_edges": gm // 2, "rows_per_exchange": gm,
            "words": gm * (sum(setup.widths) + sum(d[1:])),
            "true_rows_forward": ex["km1_forward"], "true_rows_backward": ex["km1_backward"],
            "note": "section 4.3.1: every cut edge of the symmetrised graph counted both ways; "
                    "over-counts the true volume (km1)"}
    if compare_rp and setup.assignment.method != "rp":
        a = Assignment(paper_random(setup.graph.n, setup.K, setup.options.seed), setup.K, "rp")
        rp_setup = replace(setup, assignment=a, _patterns=None)
        base = _summary(epoch_plan(rp_setup))
        out["vs_rp"] = {k: ratio_or_none(per[k], base[k]) for k in per}
        for k in per:
            if out["vs_rp"][k] is None:     # one part, or a graph without edges to cut
                unavailable(out["vs_rp"], k, "the random partition sends nothing")
        out["vs_rp"]["rp"] = base
        paper = PAPER_TABLE2.get(setup.graph.name, {}).get(setup.assignment.method)
        if paper:
            out["vs_rp"]["paper_table2"] = paper
    return out


def vs_rp_line(rp: dict) -> str:
    """The summary's ``vs RP`` line: Table 2's ratios to the random partition."""
    why = rp.get("unavailable") or {}
    keys = ("avg_vol", "max_vol", "avg_msgs", "max_msgs")
    if all(rp.get(k) is None for k in keys):
        return f"vs RP: n/a ({why.get(keys[0], 'not computed')})"
    bits = [f"{k.replace('_', ' ')} " + (f"{rp[k]:.3f}" if rp.get(k) is not None else
                                          f"n/a ({why.get(k, 'not computed')})")
            for k in keys]
    line = "vs RP: " + ", ".join(bits)
    if "paper_table2" in rp:
        line += (" (paper Table 2: avg vol {avg_vol}, max vol {max_vol}, avg msgs {avg_msgs}, "
                 "max msgs {max_msgs})").format(**rp["paper_table2"])
    return line
