"""What the native partitioners need done first: one weight per vertex, no useless nets,
and (for KaHyPar) no zero-weight vertices."""

from __future__ import annotations

import numpy as np

from ._hypergraph import Hypergraph
from daskhpc.arrays import unique_sorted


def combined_weights(h: Hypergraph) -> np.ndarray:
    """One integer weight per vertex: the sum of the constraints, each scaled to the
    largest constraint's total so every constraint counts equally."""
    w = h.vertex_weights
    if w.shape[1] == 1:
        return w[:, 0].copy()
    totals = w.sum(axis=0).astype(float)
    scale = np.where(totals > 0, totals.max() / np.maximum(totals, 1), 0.0)
    return np.rint(w @ scale).astype(np.int64)


def cuttable_nets(h: Hypergraph) -> np.ndarray:
    """Ids of nets with at least two pins (a smaller net can never be cut)."""
    return np.flatnonzero(h.net_sizes >= 2)


def nets_as_lists(h: Hypergraph, nets: np.ndarray) -> list[list[int]]:
    """Pin lists for the Python bindings (they take nested lists)."""
    starts, stops = h.net_ptr[nets], h.net_ptr[nets + 1]
    flat = h.pins[np.concatenate([np.arange(a, b) for a, b in zip(starts, stops)])] \
        if nets.size else np.zeros(0, np.int64)
    bounds = np.cumsum(stops - starts)[:-1]
    return [a.tolist() for a in np.split(flat, bounds)] if nets.size else []


def place_free_vertices(h: Hypergraph, parts: np.ndarray, free: np.ndarray) -> np.ndarray:
    """Give each vertex in ``free`` (parts[free] unset, zero weight) the part most of its
    nets already touch (the least connectivity added); vertices in no such net: part 0."""
    parts = parts.copy()
    is_free = np.zeros(h.num_vertices, dtype=bool)
    is_free[free] = True
    net_of_pin = h.net_of_pin()
    placed = ~is_free[h.pins]
    K = int(parts.max()) + 1
    # every (net, part) pair among placed pins: the parts each net already touches
    pair_net, pair_part = np.divmod(
        unique_sorted(net_of_pin[placed] * K + parts[h.pins[placed]]), K)
    free_pins = np.flatnonzero(is_free[h.pins])
    if free_pins.size:
        # for every free pin, all parts its net touches -> count (vertex, part) votes
        order = np.argsort(pair_net, kind="stable")
        pair_net, pair_part = pair_net[order], pair_part[order]
        lo = np.searchsorted(pair_net, net_of_pin[free_pins], "left")
        hi = np.searchsorted(pair_net, net_of_pin[free_pins], "right")
        counts = hi - lo
        votes_v = np.repeat(h.pins[free_pins], counts)
        idx = np.repeat(lo - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts) + np.arange(counts.sum())
        votes_p = pair_part[idx]
        keys, n = unique_sorted(votes_v * K + votes_p, return_counts=True)
        vv, pp = np.divmod(keys, K)
        best = np.lexsort((-n, vv))  # per vertex, most votes first
        first = np.concatenate([[True], vv[best][1:] != vv[best][:-1]])
        parts[vv[best][first]] = pp[best][first]
    unset = free[parts[free] < 0]
    parts[unset] = 0
    return parts
