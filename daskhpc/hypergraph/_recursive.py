"""Recursive bisection that encodes SOED in net costs (SSGD paper, section V)."""

from __future__ import annotations

import math

import numpy as np

from ._hypergraph import Hypergraph
from ._prepare import combined_weights


def recursive_bisection(h: Hypergraph, nparts: int, bisect, *, epsilon: float = 0.03,
                        seed: int = 0, **options) -> np.ndarray:
    """K-way partition by recursive bisection with the 2F / F SOED net costs.

    SSGD paper, section V: nets start at cost 2F; cut nets are split into sub-nets of cost
    F, so the total cost cut over the recursion is SOED (eq. (14)). ``bisect(sub, weights,
    (max_left, max_right), epsilon=..., seed=...)`` returns 0/1 per vertex of ``sub``.

    Examples
    --------
    >>> h = Hypergraph.from_nets(4, [[0, 1], [2, 3]])
    >>> def halves(sub, w, targets, **kw):
    ...     return (np.arange(sub.num_vertices) >= sub.num_vertices // 2).astype(int)
    >>> recursive_bisection(h, 2, halves).tolist()
    [0, 0, 1, 1]
    """
    weights = combined_weights(h)
    F = h.net_costs.copy()
    # KaHyPar's adaptive imbalance: eps' per level so that (1 + eps')^levels = 1 + eps.
    levels = max(math.ceil(math.log2(nparts)), 1)
    eps_level = (1.0 + epsilon) ** (1.0 / levels) - 1.0
    parts = np.zeros(h.num_vertices, dtype=np.int64)
    root = h.with_net_costs(2 * F)
    stack = [(np.arange(h.num_vertices), root, np.arange(h.num_nets), nparts, 0)]
    step = 0
    while stack:
        verts, sub, orig_net, k, first = stack.pop()
        if k == 1 or verts.size == 0:
            parts[verts] = first
            continue
        if verts.size <= k:  # one vertex per part; parts past the vertices stay empty
            parts[verts] = first + np.arange(verts.size)
            continue
        kl = k // 2
        w = weights[verts]
        total = int(w.sum())
        targets = (math.floor((1 + eps_level) * math.ceil(total * kl / k)),
                   math.floor((1 + eps_level) * math.ceil(total * (k - kl) / k)))
        side = np.asarray(bisect(sub, w, targets, epsilon=eps_level, seed=seed + step,
                                 **options), dtype=np.int64)
        step += 1
        # A net of sub is cut when its pins fall on both sides; its sub-nets cost F from now on.
        net_of_pin = sub.net_of_pin()
        on_right = np.bincount(net_of_pin, weights=side[sub.pins], minlength=sub.num_nets)
        cut = (on_right > 0) & (on_right < sub.net_sizes)
        costs = np.where(cut, F[orig_net], sub.net_costs)
        sub = sub.with_net_costs(costs)
        for s, kk, off in ((0, kl, first), (1, k - kl, first + kl)):
            local = np.flatnonzero(side == s)
            child, kept = sub.subhypergraph(local)
            stack.append((verts[local], child, orig_net[kept], kk, off))
    return parts
