"""Partitioners that ignore the nets: contiguous blocks balanced by weight (within one
vertex's weight), and seeded random (heaviest first onto the lightest part)."""

from __future__ import annotations

import numba
import numpy as np

from ._hypergraph import Hypergraph
from ._prepare import combined_weights
from daskhpc.arrays import unique_sorted


def _split_by_weight(weights: np.ndarray, nparts: int) -> np.ndarray:
    """Contiguous ranges whose cumulative weight crosses k * W / K start part k."""
    if weights.sum() == 0:
        weights = np.ones_like(weights)
    csum = np.cumsum(weights) - weights / 2.0  # vertex midpoints, so heavy vertices round well
    parts = np.floor(csum * nparts / weights.sum()).astype(np.int64)
    parts = np.clip(parts, 0, nparts - 1)
        # never leave a part empty when there are enough vertices: an equal vertex count
    if unique_sorted(parts).size < nparts <= weights.size:
        parts = (np.arange(weights.size) * nparts) // weights.size
    return parts


def partition_block(h: Hypergraph, nparts: int, **_) -> np.ndarray:
    """Vertices 0..n-1 in order, cut into K contiguous blocks of about equal weight."""
    return _split_by_weight(combined_weights(h), nparts)


@numba.njit(cache=True, nogil=True)
def _greedy_lightest(order, weights, nparts):  # pragma: no cover - numba
    parts = np.empty(order.size, np.int64)
    load = np.zeros(nparts, np.int64)
    for v in order:
        p = np.argmin(load)  # first lightest part: with unit weights, round robin
        parts[v] = p
        load[p] += weights[v]
    return parts


def partition_random(h: Hypergraph, nparts: int, *, seed: int = 0, **_) -> np.ndarray:
    """Seeded random assignment balanced by weight (randomised longest-processing-time)."""
    w = combined_weights(h)
    perm = np.random.default_rng(seed).permutation(h.num_vertices)
    order = perm[np.argsort(-w[perm], kind="stable")].astype(np.int64)
    return _greedy_lightest(order, w.astype(np.int64), nparts)
