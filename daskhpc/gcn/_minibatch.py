"""Mini-batch training and the stochastic hypergraph model (section 4.3.3, Algorithm 3).

Batches are GraphSAINT node samples (Zeng et al. ICLR 2020): ``batch_size`` draws with
replacement, p_v proportional to ||A_hat[:, v]||^2, on the induced subgraph normalised
again by eq. (1); batch i of step t comes from ``default_rng([seed, t, i])``. SHP merges
the batches' column nets (kept distinct) and partitions them for km1 with full-batch
vertex weights; Hoeffding's bound (eqs. 12-14) sets the number of nets."""

from __future__ import annotations

import math
import time

import numpy as np
import scipy.sparse as sp

import daskhpc.hypergraph as hg
from daskhpc.comm import expand_plan, run_local

from ._assign import Assignment
from ._data import as_graph, normalized_adjacency
from ._program import assemble, program, row, statics
from ._result import GCNResult, sections
from ._serial import run_serial
from ._setup import prepare


# step numbers of the batches that build the stochastic hypergraph and of the held-out
# batches that score it (training steps are 0, 1, ...): distinct random streams
MODEL, HELDOUT = 10**9, 2 * 10**9


def hoeffding_nets(nparts: int, epsilon: float, delta: float) -> int:
    """Eq. (14): the fewest nets for ``|lambda' - lambda| < epsilon`` w.p. >= 1 - delta.

    Examples
    --------
    >>> hoeffding_nets(27, 0.5, 0.1)
    4051
    """
    return int(math.ceil((nparts - 1) ** 2 * math.log(2.0 / delta) / (2.0 * epsilon ** 2)))


def node_probabilities(A, sampler: str = "node") -> np.ndarray:
    """GraphSAINT's node sampler, p_v ~ ||A_hat[:, v]||^2 (``"node"``), or ``"uniform"``."""
    A = sp.csr_array(A)
    if sampler == "uniform":
        return np.full(A.shape[0], 1.0 / A.shape[0])
    w = np.bincount(A.indices, weights=A.data ** 2, minlength=A.shape[1])
    return w / w.sum()


def sample_batch(prob, batch_size: int, seed: int, step: int, i: int) -> np.ndarray:
    """Sorted distinct nodes of batch ``i`` of step ``step``."""
    rng = np.random.default_rng([int(seed), int(step), int(i), 0x5A1])
    return np.unique(rng.choice(prob.size, size=int(batch_size), replace=True, p=prob))


def _sub(A, nodes):
    return sp.csr_array(A[nodes][:, nodes])


def stochastic_hypergraph(A, batches, weights=None) -> hg.Hypergraph:
    """Algorithm 3 lines 2-3: every batch's column nets (global vertex ids), merged."""
    A = sp.csr_array(A)
    ptrs, pins, total = [np.zeros(1, np.int64)], [], 0
    for nodes in batches:
        S = sp.csc_array(_sub(A, nodes))
        S.sort_indices()
        counts = np.diff(S.indptr)
        ptrs.append(total + np.cumsum(counts[counts > 0]))
        pins.append(nodes[S.indices])
        total += S.nnz
    w = np.diff(A.indptr) if weights is None else weights
    return hg.Hypergraph(A.shape[0], np.concatenate(ptrs), np.concatenate(pins), w, None,
                         "stochastic", {"batches": len(batches)})


def _model_batches(prob, size: int, seed: int, need: int, rows: float) -> tuple[list, int]:
    """The stochastic hypergraph's batches: until ``need`` nets and ``rows`` drawn nodes."""
    batches, nets = [], 0
    while nets < need or len(batches) * size < rows:
        batches.append(sample_batch(prob, size, seed, MODEL, len(batches)))
        nets += batches[-1].size
    return batches, nets


def batch_volume(A, nodes, parts, nparts) -> int:
    """Rows one forward exchange of a batch moves: km1 of its column-net hypergraph."""
    h = hg.column_net(_sub(A, nodes))
    lam = hg.connectivity(h, np.asarray(parts)[nodes], nparts)
    return int(np.maximum(lam - 1, 0).sum())


def minibatch_plan(graph, nparts_list=(3, 9, 27), *, batch_size: int | float = 0.1,
                   epsilon: float = 0.5, delta: float = 0.1, heldout: int = 20,
                   coverage: float = 20.0, seed: int = 0, hp_epsilon: float = 0.03,
                   sampler: str = "node") -> dict:
    """SHP against HP on held-out batches (the paper's Figure 5 experiment).

    For every K, batches build the stochastic hypergraph (Hoeffding's count of nets, and
    every node in about ``coverage`` batches); SHP partitions it, HP the full-batch
    column-net; both are scored by the mean forward-exchange rows of ``heldout`` batches."""
    g = graph if hasattr(graph, "A") else as_graph(graph, seed=seed)
    A, n = g.A, g.n
    size = int(round(batch_size * n)) if isinstance(batch_size, float) else int(batch_size)
    prob = node_probabilities(A, sampler)
    full = hg.column_net(A)
    test = [sample_batch(prob, size, seed, HELDOUT, i) for i in range(heldout)]
    out = {"batch_size": size, "epsilon": epsilon, "delta": delta, "heldout": heldout,
           "sampler": sampler, "parts": {}}
    for K in nparts_list:
        need = hoeffding_nets(K, epsilon, delta)
        batches, nets = _model_batches(prob, size, seed, need, coverage * n)
        t0 = time.perf_counter()
        h = stochastic_hypergraph(A, batches, np.diff(A.indptr))
        shp = hg.partition(h, K, "mtkahypar", objective="km1", epsilon=hp_epsilon, seed=seed)
        t1 = time.perf_counter()
        hp = hg.partition(full, K, "mtkahypar", objective="km1", epsilon=hp_epsilon, seed=seed)
        t2 = time.perf_counter()
        v_shp = float(np.mean([batch_volume(A, b, shp.parts, K) for b in test]))
        v_hp = float(np.mean([batch_volume(A, b, hp.parts, K) for b in test]))
        out["parts"][K] = {"hoeffding_nets": need, "hoeffding_met": nets >= need,
                           "batches": len(batches), "nets": nets,
                           "shp_rows": v_shp, "hp_rows": v_hp,
                           "shp_over_hp": v_shp / v_hp if v_hp else None,
                           "shp_imbalance": shp.metrics(full)["imbalance"],
                           "shp_s": t1 - t0, "hp_s": t2 - t1}
    return out


def attach_batches(setup, *, batch_size: int | float = 0.5, steps: int = 200,
                   sampler: str = "node") -> None:
    """Draw the steps' batches (with a training node) and their plans into ``setup.batches``."""
    g, K, seed = setup.graph, setup.K, setup.options.seed
    n = g.n
    size = int(round(batch_size * n)) if isinstance(batch_size, float) else int(batch_size)
    prob = node_probabilities(g.A, sampler)
    parts = setup.assignment.parts
    out = {"nodes": [], "A": [], "plans": [], "n_train": [], "batch_size": size,
           "sampler": sampler, "steps_drawn": int(steps)}
    for t in range(int(steps)):
        nodes = sample_batch(prob, size, seed, t, 0)
        train = g.masks["train"][nodes]
        if not train.any():
            continue
        Ab = normalized_adjacency(_sub(g.A, nodes))
        owner = parts[nodes]
        fwd = expand_plan(owner, *hg.connectivity_sets(hg.column_net(Ab), owner, K), K,
                          name="batch forward rows")
        bwd = fwd if g.symmetric else expand_plan(
            owner, *hg.connectivity_sets(hg.column_net(sp.csr_array(Ab.T)), owner, K), K,
            name="batch backward rows")
        out["nodes"].append(nodes)
        out["A"].append(Ab)
        out["plans"].append({"forward": fwd, "backward": bwd})
        out["n_train"].append(int(train.sum()))
    setup.batches = out


def shp_assignment(setup, *, batch_size, epsilon: float = 0.5, delta: float = 0.1,
                   coverage: float = 20.0, sampler: str = "node"):
    """Algorithm 3: the SHP row partition (Hoeffding-many nets, full-batch weights, km1)."""
    g, K, seed = setup.graph, setup.K, setup.options.seed
    n = g.n
    size = int(round(batch_size * n)) if isinstance(batch_size, float) else int(batch_size)
    prob = node_probabilities(g.A, sampler)
    need = hoeffding_nets(K, epsilon, delta) if K > 1 else 0
    batches, nets = _model_batches(prob, size, seed, need, coverage * n)
    t0 = time.perf_counter()
    h = stochastic_hypergraph(g.A, batches, np.diff(g.A.indptr))
    p = hg.partition(h, K, "mtkahypar", objective="km1", epsilon=setup.options.epsilon,
                     seed=seed)
    a = Assignment(p.parts, K, "shp", "mtkahypar", time.perf_counter() - t0)
    a.report = {**hg.Partition(p.parts, K, "mtkahypar", "km1", setup.options.epsilon, seed,
                               hg.column_net(g.A)).report(),
                "batches": len(batches), "nets": nets, "hoeffding_nets": need}
    return a


def minibatch_fit(graph, nparts: int = 1, features=None, labels=None, split=None, *,
                  batch_size: int | float = 0.5, steps: int = 200, sampler: str = "node",
                  shp: bool = True, local: bool = False, **options):
    """Mini-batch training, one sampled batch per Adam step, evaluated on the whole graph.

    ``local=False``: the serial reference; ``local=True``: the distributed program run part
    by part in this process, on the SHP partition (``shp=True``) or ``partition``'s.

    Examples
    --------
    >>> res = minibatch_fit("cora", steps=3)
    >>> len(res.history), res.predictions.shape
    (3, (2708,))
    """
    options.setdefault("partition", "rp")
    s = prepare(graph, nparts, features, labels, split, **options)
    if shp and nparts > 1:
        s.assignment = shp_assignment(s, batch_size=batch_size, sampler=sampler)
        s._patterns = None
    attach_batches(s, batch_size=batch_size, steps=steps, sampler=sampler)
    t0 = time.perf_counter()
    if local:
        finals, reports = run_local(program(s), statics(s))
        history = [row(s, u, r) for u, r in enumerate(reports)]
        out = assemble(s, finals)
        final = {k: v for k, v in history[-1].items() if k.startswith("final_")}
    else:
        out = run_serial(s)
        history, final = out["history"], out["final"]
    info = sections(s, partitioned=bool(local))
    info["timing"]["run_s"] = time.perf_counter() - t0
    info["quality"] = dict(final)
    info["minibatch"] = {"batch_size": s.batches["batch_size"], "sampler": sampler,
                         "steps": len(s.batches["nodes"]),
                         "steps_drawn": s.batches["steps_drawn"]}
    return GCNResult(out["params"], out["predictions"], history, info, out["logits"])
