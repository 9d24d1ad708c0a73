"""Mt-KaHyPar backend: direct k-way multilevel partitioning for km1, SOED and cut (its
thread pool is global: initialised once per process, by the first call's thread count)."""

from __future__ import annotations

import numpy as np

from ._auto import mtkahypar_preset
from ._hypergraph import Hypergraph
from ._prepare import combined_weights, cuttable_nets, nets_as_lists

_INIT = None


def _initializer(threads: int):
    global _INIT
    if _INIT is None:
        import mtkahypar

        _INIT = mtkahypar.initialize(max(int(threads), 1), False)
    return _INIT


def _context(init, nparts, objective, epsilon, preset):
    import mtkahypar

    presets = {"default": mtkahypar.PresetType.DEFAULT, "quality": mtkahypar.PresetType.QUALITY,
               "deterministic": mtkahypar.PresetType.DETERMINISTIC,
               "large_k": mtkahypar.PresetType.LARGE_K}
    if preset not in presets:
        raise ValueError(f"unknown Mt-KaHyPar preset {preset!r}; choose one of {sorted(presets)}")
    ctx = init.context_from_preset(presets[preset])
    objectives = {"km1": mtkahypar.Objective.KM1, "soed": mtkahypar.Objective.SOED,
                  "cut": mtkahypar.Objective.CUT}
    ctx.set_partitioning_parameters(int(nparts), float(epsilon), objectives[objective])
    ctx.logging = False
    return ctx


def capped_weights(weights: np.ndarray, nparts: int) -> np.ndarray:
    """Vertex weights capped at the average part weight ``ceil(W / K)``: a heavier vertex
    fills its part alone anyway, and uncapped Mt-KaHyPar keeps trying to rebalance it."""
    cap = -(-int(weights.sum()) // max(int(nparts), 1))
    return np.minimum(weights, cap) if weights.size and weights.max() > cap else weights


def partition_mtkahypar(h: Hypergraph, nparts: int, *, objective: str = "km1",
                        epsilon: float = 0.03, seed: int = 0, threads: int = 1,
                        preset: str = "deterministic", **_) -> np.ndarray:
    """Partition with Mt-KaHyPar.

    ``preset``: ``deterministic`` (same seed and threads, same partition), ``default``
    (about 4x faster, differs run to run), ``quality``, ``large_k``, or ``auto``
    (:func:`~daskhpc.hypergraph._auto.mtkahypar_preset`). Nets of fewer than two pins are
    left out, constraints combined into one weight and heavy vertices capped.
    """
    import mtkahypar

    if preset == "auto":
        preset = mtkahypar_preset(h, nparts)
    init = _initializer(threads)
    ctx = _context(init, nparts, objective, epsilon, preset)
    mtkahypar.set_seed(int(seed))
    nets = cuttable_nets(h)
    hg = init.create_hypergraph(ctx, h.num_vertices, int(nets.size), nets_as_lists(h, nets),
                                capped_weights(combined_weights(h), nparts).tolist(),
                                h.net_costs[nets].tolist())
    return np.asarray(hg.partition(ctx).get_partition(), dtype=np.int64)

