"""Cut metrics of a partitioned hypergraph, computed vectorised over pins."""

from __future__ import annotations

import numba
import numpy as np

from ._hypergraph import Hypergraph


def _check_parts(h: Hypergraph, parts: np.ndarray, nparts: int) -> np.ndarray:
    parts = np.asarray(parts)
    if parts.shape != (h.num_vertices,):
        raise ValueError(f"partition has {parts.size} entries for {h.num_vertices} vertices")
    parts = parts.astype(np.int64, copy=False)
    if parts.size and (parts.min() < 0 or parts.max() >= nparts):
        raise ValueError(f"part ids must lie in [0, {nparts})")
    return parts


def connectivity_sets(h: Hypergraph, parts, nparts: int) -> tuple[np.ndarray, np.ndarray]:
    """Lambda(n) for every net, as CSR: parts ``lam_parts[lam_ptr[n]:lam_ptr[n+1]]`` (sorted).

    Examples
    --------
    >>> h = Hypergraph.from_nets(4, [[0, 1], [1, 2, 3]])
    >>> ptr, ps = connectivity_sets(h, [0, 0, 1, 1], 2)
    >>> ptr.tolist(), ps.tolist()
    ([0, 1, 3], [0, 0, 1])
    """
    parts = _check_parts(h, parts, nparts)
    return net_parts(h.net_ptr, h.pins, parts, int(nparts))


@numba.njit(cache=True, nogil=True)
def net_parts(net_ptr, pins, parts, nparts):  # pragma: no cover - numba
    """:func:`connectivity_sets` of CSR nets ``(net_ptr, pins)`` without a
    :class:`Hypergraph` (no checks), linear in the pins.

    Examples
    --------
    >>> import numpy as np
    >>> ptr, ps = net_parts(np.array([0, 2, 5]), np.array([0, 1, 1, 2, 3]),
    ...                     np.array([0, 0, 1, 1]), 2)
    >>> ptr.tolist(), ps.tolist()
    ([0, 1, 3], [0, 0, 1])
    """
    M = net_ptr.size - 1
    stamp = np.full(nparts, -1, np.int64)
    lam_ptr = np.zeros(M + 1, np.int64)
    out = np.empty(pins.size, np.int64)
    k = 0
    for n in range(M):
        start = k
        for i in range(net_ptr[n], net_ptr[n + 1]):
            q = parts[pins[i]]
            if stamp[q] != n:
                stamp[q] = n
                out[k] = q
                k += 1
        out[start:k].sort()
        lam_ptr[n + 1] = k
    return lam_ptr, out[:k].copy()


def connectivity(h: Hypergraph, parts, nparts: int) -> np.ndarray:
    """lambda(n) for every net (0 for an empty net)."""
    return np.diff(connectivity_sets(h, parts, nparts)[0])


def part_weights(h: Hypergraph, parts, nparts: int) -> np.ndarray:
    """W_p for every part and constraint, shape (nparts, C)."""
    parts = _check_parts(h, parts, nparts)
    out = np.zeros((nparts, h.num_constraints), dtype=np.int64)
    np.add.at(out, parts, h.vertex_weights)
    return out


def max_part_weight(total: np.ndarray, nparts: int, epsilon: float) -> np.ndarray:
    """KaHyPar's bound L_max = (1 + eps) * ceil(W / K), per constraint."""
    return np.floor((1.0 + epsilon) * np.ceil(np.asarray(total) / nparts) + 1e-9).astype(np.int64)


def imbalance(weights: np.ndarray, nparts: int) -> np.ndarray:
    """max_p W_p / (W / K) - 1 per constraint (0 where a constraint has no weight)."""
    total = weights.sum(axis=0).astype(float)
    avg = total / nparts
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(avg > 0, weights.max(axis=0) / avg - 1.0, 0.0)


def metrics(h: Hypergraph, parts, nparts: int, epsilon: float | None = None) -> dict:
    """All cut and balance metrics of a partition, as a JSON-ready dict.

    For net n of cost c[n] touching lambda(n) parts: ``cut`` sums c[n] over nets with
    lambda > 1; ``km1`` sums c[n] * (lambda(n) - 1) (connectivity-1, eq. (2) of the
    hypertensor paper: the expand and fold volume); ``soed`` sums c[n] * lambda(n) over
    nets with lambda > 1 (eq. (14) of the SSGD paper: one epoch's P2P volume when c = F).
    Part p is balanced when W_p <= (1 + eps) * ceil(W / K) (KaHyPar).

    Examples
    --------
    >>> h = Hypergraph.from_nets(4, [[0, 1], [1, 2, 3], [3]])
    >>> m = metrics(h, [0, 0, 1, 1], 2)
    >>> m["cut"], m["km1"], m["soed"]
    (1, 1, 2)
    """
    lam = connectivity(h, parts, nparts)
    c = h.net_costs
    is_cut = lam > 1
    w = part_weights(h, parts, nparts)
    out = {
        "parts": int(nparts),
        "cut": int(c[is_cut].sum()),
        "km1": int((c * np.maximum(lam - 1, 0)).sum()),
        "soed": int((c[is_cut] * lam[is_cut]).sum()),
        "cut_nets": int(is_cut.sum()),
        "max_connectivity": int(lam.max()) if lam.size else 0,
        "imbalance": float(imbalance(w, nparts).max()) if nparts else 0.0,
        "imbalance_per_constraint": [float(x) for x in imbalance(w, nparts)],
        "part_weights": w.tolist(),
        "empty_parts": int((w.sum(axis=1) == 0).sum()) if h.vertex_weights.any() else None,
    }
    if epsilon is not None:
        out.update(balance_report(h, w, nparts, epsilon))
    return out


def balance_report(h: Hypergraph, weights: np.ndarray, nparts: int, epsilon: float) -> dict:
    """Whether each constraint respects epsilon, and whether it could at all.

    A balanced partition cannot exist when one vertex alone is heavier than L_max; then the
    report says so instead of blaming the partitioner.
    """
    total = h.total_weight()
    lmax = max_part_weight(total, nparts, epsilon)
    heaviest = h.vertex_weights.max(axis=0) if h.num_vertices else np.zeros_like(total)
    possible = heaviest <= lmax
    ok = (weights <= lmax).all(axis=0)
    notes = [
        f"constraint {c}: a single vertex weighs {int(heaviest[c])} > L_max = {int(lmax[c])}; "
        "no partition can respect epsilon" for c in np.flatnonzero(~possible)
    ]
    return {
        "epsilon": float(epsilon),
        "max_part_weight": lmax.tolist(),
        "balanced": bool(ok.all()),
        "balance_possible": bool(possible.all()),
        "balance_notes": notes,
    }
