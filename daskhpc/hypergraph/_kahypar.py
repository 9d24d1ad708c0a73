"""KaHyPar backend with the configuration files we ship; ``objective="soed"`` runs the SSGD
paper's recursive-bisection net-cost scheme. Zero-weight vertices (KaHyPar exits on them)
are placed afterwards where their nets already are."""

from __future__ import annotations

from importlib import resources

import numpy as np

from ._hypergraph import Hypergraph
from ._prepare import combined_weights, cuttable_nets, place_free_vertices
from ._recursive import recursive_bisection


def _config(objective: str) -> str:
    name = "kahypar_km1.ini" if objective == "km1" else "kahypar_cut.ini"
    return str(resources.files("daskhpc.hypergraph").joinpath(name))


def _run(h: Hypergraph, weights: np.ndarray, nparts: int, objective: str, epsilon: float,
         seed: int, max_weights=None) -> np.ndarray:
    import kahypar

    heavy = np.flatnonzero(weights > 0)
    if heavy.size < weights.size:
        sub, kept = h.subhypergraph(heavy)
        inner = _run(sub, weights[heavy], nparts, objective, epsilon, seed, max_weights) \
            if heavy.size >= nparts else np.arange(heavy.size) % nparts
        parts = np.full(h.num_vertices, -1, dtype=np.int64)
        parts[heavy] = inner
        return place_free_vertices(h, parts, np.flatnonzero(weights == 0)) if heavy.size \
            else np.arange(h.num_vertices) % nparts
    nets = cuttable_nets(h)
    nets = nets[h.net_costs[nets] > 0]
    sizes = h.net_sizes[nets]
    index = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    pins = h.pins[np.concatenate([np.arange(h.net_ptr[n], h.net_ptr[n + 1]) for n in nets])] \
        if nets.size else np.zeros(0, np.int64)
    hg = kahypar.Hypergraph(h.num_vertices, int(nets.size), index.tolist(), pins.tolist(),
                            int(nparts), h.net_costs[nets].tolist(), weights.tolist())
    ctx = kahypar.Context()
    ctx.loadINIconfiguration(_config(objective))
    ctx.setK(int(nparts))
    ctx.setEpsilon(float(epsilon))
    ctx.setSeed(int(seed))
    ctx.suppressOutput(True)
    if max_weights is not None:
        ctx.setCustomTargetBlockWeights([int(t) for t in max_weights])
    kahypar.partition(hg, ctx)
    return np.array([hg.blockID(v) for v in range(h.num_vertices)], dtype=np.int64)


def partition_kahypar(h: Hypergraph, nparts: int, *, objective: str = "km1",
                      epsilon: float = 0.03, seed: int = 0, **_) -> np.ndarray:
    """Partition with KaHyPar; SOED goes through recursive bisection (2F, then F)."""
    if objective == "soed":
        return recursive_bisection(h, nparts, bisect_kahypar, epsilon=epsilon, seed=seed)
    return _run(h, combined_weights(h), nparts, objective, epsilon, seed)


def bisect_kahypar(h: Hypergraph, weights: np.ndarray, targets: tuple[int, int], *,
                   epsilon: float, seed: int, **_) -> np.ndarray:
    """2-way cut partition with maximum block weights ``targets``."""
    return _run(h, weights, 2, "cut", epsilon, seed, max_weights=targets)
