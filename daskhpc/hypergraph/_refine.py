"""Label-propagation refinement of a K-way partition for km1 or SOED, in numba."""

from __future__ import annotations

import numba
import numpy as np

from ._hypergraph import Hypergraph
from ._metrics import max_part_weight
from ._prepare import combined_weights
from ._simple import partition_random

# Candidate parts tried exactly per vertex (the best by small-net overlap).
_CANDIDATES = 4


@numba.njit(cache=True, nogil=True)
def _vertex_nets(net_ptr, pins, num_vertices):  # pragma: no cover - numba
    # Counting sort of the pins by vertex: nets of each vertex in increasing net order.
    vptr = np.zeros(num_vertices + 1, np.int64)
    for i in range(pins.size):
        vptr[pins[i] + 1] += 1
    for v in range(num_vertices):
        vptr[v + 1] += vptr[v]
    cursor = vptr[:-1].copy()
    vnets = np.empty(pins.size, np.int64)
    vpins = np.empty(pins.size, np.int64)
    for n in range(net_ptr.size - 1):
        for i in range(net_ptr[n], net_ptr[n + 1]):
            v = pins[i]
            vnets[cursor[v]] = n
            vpins[cursor[v]] = i
            cursor[v] += 1
    return vptr, vnets, vpins


def vertex_nets(h: Hypergraph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The transposed incidence: nets of vertex v are ``vnets[vptr[v]:vptr[v + 1]]``, and
    ``vpins`` holds the matching positions in ``h.pins`` (``h.pins[vpins[j]] == v``)."""
    return _vertex_nets(h.net_ptr, h.pins, h.num_vertices)


@numba.njit(cache=True, nogil=True, inline="always")
def _cost(lam, soed):  # pragma: no cover - numba
    # Objective of one net of unit cost with connectivity lam.
    if soed:
        return lam if lam > 1 else 0
    return lam - 1 if lam > 0 else 0


@numba.njit(cache=True, nogil=True, inline="always")
def _better(s1, q1, s2, q2):  # pragma: no cover - numba
    # Higher score first, then the lower part id.
    return s1 > s2 or (s1 == s2 and q1 < q2)


@numba.njit(cache=True, nogil=True)
def _lp(net_ptr, pins, vptr, vnets, vpins, costs, weights, parts, nparts, lmax, soed, orders,
        max_net_size, min_moves):  # pragma: no cover - numba
    M = net_ptr.size - 1
    K = nparts
    KW = (K + 63) >> 6
    phi = np.zeros(M * K, np.int32)  # pins of net n in part q
    # phi > 0 as bits (1/32 of phi): step 3's random reads mostly stay in cache
    bits = np.zeros(M * KW, np.uint64)
    lam = np.zeros(M, np.int64)
    one = np.uint64(1)
    for n in range(M):
        for i in range(net_ptr[n], net_ptr[n + 1]):
            q = parts[pins[i]]
            idx = n * K + q
            if phi[idx] == 0:
                lam[n] += 1
                bits[n * KW + (q >> 6)] |= one << np.uint64(q & 63)
            phi[idx] += 1
    # the part of every pin, kept up to date: the candidate scan reads it sequentially
    pin_part = np.empty(pins.size, np.int32)
    for i in range(pins.size):
        pin_part[i] = parts[pins[i]]
    load = np.zeros(K, np.int64)
    count = np.zeros(K, np.int64)
    for v in range(parts.size):
        load[parts[v]] += weights[v]
        count[parts[v]] += 1
    score = np.zeros(K, np.int64)
    stamp = np.full(K, -1, np.int64)  # last (vertex, net) visit that counted part q
    seen = np.full(K, -1, np.int64)  # last vertex whose candidate list holds part q
    touched = np.empty(K, np.int64)
    best = np.empty(_CANDIDATES, np.int64)
    gains = np.empty(_CANDIDATES, np.int64)
    word = np.empty(_CANDIDATES, np.int64)
    mask = np.empty(_CANDIDATES, np.uint64)
    tick = 0
    total_moves = 0
    for r in range(orders.shape[0]):
        moves = 0
        for v in orders[r]:
            a = parts[v]
            wv = weights[v]
            if count[a] == 1:  # never empty a part
                continue
            # 1. Candidates: parts already touched by v's small nets, scored by the cost
            #    of those nets (each net counts a part once).
            nt = 0
            for j in range(vptr[v], vptr[v + 1]):
                n = vnets[j]
                if net_ptr[n + 1] - net_ptr[n] > max_net_size:
                    continue
                tick += 1
                for i in range(net_ptr[n], net_ptr[n + 1]):
                    q = pin_part[i]
                    if q == a or stamp[q] == tick:
                        continue
                    stamp[q] = tick
                    if seen[q] != v:
                        seen[q] = v
                        touched[nt] = q
                        nt += 1
                    score[q] += costs[n]
            if nt == 0:
                continue
            # 2. The few best-scored parts with room for v (ties: lower part id).
            nb = 0
            for t in range(nt):
                q = touched[t]
                if load[q] + wv > lmax:
                    continue
                if nb < _CANDIDATES:
                    pos = nb
                    nb += 1
                elif _better(score[q], q, score[best[nb - 1]], best[nb - 1]):
                    pos = nb - 1
                else:
                    continue
                while pos > 0 and _better(score[q], q, score[best[pos - 1]], best[pos - 1]):
                    best[pos] = best[pos - 1]
                    pos -= 1
                best[pos] = q
            for t in range(nt):
                score[touched[t]] = 0
            # 3. Exact gain over all of v's nets for each candidate (one pass over the
            #    nets for all of them; integer sums, so the order does not matter); take
            #    the best, the first in candidate order on a tie.
            for c in range(nb):
                gains[c] = 0
                word[c] = best[c] >> 6
                mask[c] = one << np.uint64(best[c] & 63)
            for j in range(vptr[v], vptr[v + 1]):
                n = vnets[j]
                ln = lam[n]
                alone = 1 if phi[n * K + a] == 1 else 0
                for c in range(nb):
                    l2 = ln - alone
                    if bits[n * KW + word[c]] & mask[c] == 0:
                        l2 += 1
                    if l2 != ln:
                        gains[c] += costs[n] * (_cost(ln, soed) - _cost(l2, soed))
            gbest = 0
            target = -1
            for c in range(nb):
                b = best[c]
                gain = gains[c]
                # A zero-gain move is taken only when it evens the load (no cycling).
                if gain > gbest or (gain == 0 and target < 0 and gbest == 0 and
                                    load[b] + wv < load[a]):
                    gbest = gain
                    target = b
            if target < 0:
                continue
            b = target
            ma = one << np.uint64(a & 63)
            mb = one << np.uint64(b & 63)
            for j in range(vptr[v], vptr[v + 1]):
                n = vnets[j]
                ia = n * K + a
                phi[ia] -= 1
                if phi[ia] == 0:
                    lam[n] -= 1
                    bits[n * KW + (a >> 6)] &= ~ma
                ib = n * K + b
                if phi[ib] == 0:
                    lam[n] += 1
                    bits[n * KW + (b >> 6)] |= mb
                phi[ib] += 1
                pin_part[vpins[j]] = b
            parts[v] = b
            load[a] -= wv
            load[b] += wv
            count[a] -= 1
            count[b] += 1
            moves += 1
        total_moves += moves
        if moves < min_moves:
            break
    return parts, total_moves


def refine(h: Hypergraph, parts: np.ndarray, nparts: int, *, objective: str = "soed",
           epsilon: float = 0.03, seed: int = 0, passes: int = 4,
           max_net_size: int = 128, stop_fraction: float = 0.002) -> np.ndarray:
    """Improve ``parts`` by sequential label propagation (docs/partitioning.md, ``lp``).

    Single vertices move to the part that lowers the objective most, under the balance
    bound, with exact gains; ties break by index, so the result depends only on the input
    and the seed.

    Parameters
    ----------
    h : Hypergraph
    parts, nparts : array of int (num_vertices,), int
        The starting partition (left unchanged; a refined copy is returned) and K.
    objective : {"soed", "km1", "cut"}
        ``cut`` is refined as km1 (a net's km1 is zero exactly when it is uncut).
    epsilon : float
        No move may take a part above ``(1 + eps) * ceil(W / K)`` (parts that start above
        it, e.g. the part of a vertex heavier than that, only lose vertices).
    seed, passes : int
        Seed of every pass's vertex order; at most this many passes over all vertices.
    max_net_size : int
        Nets with more pins propose no candidate part (they still count in every gain).
    stop_fraction : float
        Stop when a pass moves fewer than this fraction of the vertices.

    Returns
    -------
    numpy.ndarray
        The refined partition; its objective is never higher than the start's.

    Examples
    --------
    >>> from daskhpc.hypergraph import Hypergraph, metrics, refine
    >>> h = Hypergraph.from_nets(4, [[0, 1], [2, 3], [0, 1], [2, 3]])
    >>> p = refine(h, np.array([0, 1, 0, 1]), 2, objective="km1", epsilon=0.5, seed=1)
    >>> p.tolist(), metrics(h, p, 2)["km1"]
    ([0, 0, 1, 1], 0)
    """
    w = combined_weights(h).astype(np.int64)
    lmax = int(max_part_weight(np.array([w.sum()]), nparts, epsilon)[0])
    vptr, vnets, vpins = vertex_nets(h)
    rng = np.random.default_rng([int(seed), 0x1AB])
    # the passes' vertex orders written in place (no stacked copy: 80 MB a pass at 10M)
    orders = np.empty((max(int(passes), 0), h.num_vertices), np.int64)
    for r in range(orders.shape[0]):
        orders[r] = rng.permutation(h.num_vertices)
    out, _ = _lp(h.net_ptr, h.pins, vptr, vnets, vpins, h.net_costs.astype(np.int64), w,
                 np.array(parts, dtype=np.int64), int(nparts), lmax, objective == "soed",
                 orders, int(max_net_size),
                 int(stop_fraction * h.num_vertices))
    return out


def partition_lp(h: Hypergraph, nparts: int, *, objective: str = "soed", epsilon: float = 0.03,
                 seed: int = 0, passes: int = 4, max_net_size: int = 128, **_) -> np.ndarray:
    """Seeded balanced random partition, refined by :func:`refine` (backend ``lp``)."""
    start = partition_random(h, nparts, seed=seed)
    return refine(h, start, nparts, objective=objective, epsilon=epsilon, seed=seed,
                  passes=passes, max_net_size=max_net_size)
