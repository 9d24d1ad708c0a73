"""Table 3.1's alpha-beta times, and the ``auto`` choice made from them (no dask).

Expected bandwidth under the uniform model (k indices per rank drawn from N, section
3.2.1), with the expected union of P such sets ``f(k, N, P) = N (1 - (1 - k/N)^P)``.
Per algorithm over Q = 2^floor(log2 P) ranks, in bytes (sparse item ``s = c + isize``):

==================== ============================ ==============================================
algorithm            latency                      bandwidth (expected)
==================== ============================ ==============================================
ssar_rec_dbl         log2(Q) alpha                sum_{i=1}^{log2 Q} s f(k, N, 2^(i-1))
ssar_split_allgather (Q - 1 + log2 Q) alpha       (Q-1)/Q s k + (Q - 1) s f(k/Q, N/Q, Q)
dsar_split_allgather (Q - 1 + log2 Q) alpha       (Q-1)/Q (s k + isize N)
dense_rabenseifner   2 log2(Q) alpha              2 (Q-1)/Q isize N
dense_ring           2 (P - 1) alpha              2 (P-1)/P isize N
dense_rec_dbl        log2(Q) alpha                log2(Q) isize N
dsar_early_switch    2 log2(Q) alpha              sum_{i<=m} s f(k/2^(i-1), N/2^(i-1), 2^(i-1))/2
                                                  + sum_{i>m} isize N/2^i + (Q-1)/Q isize N
==================== ============================ ==============================================

Each sparse term is capped at its dense size. The early-switch row is ours (the thesis
gives none): m = log2(group) sparse halvings, each sending half its partial's expected
union, then dense. A folded P adds the fold (alpha + s k, capped) and the unfold.
"""

from __future__ import annotations

import math

from ._registry import ALGORITHMS, DEFAULT_GROUP, DENSE, SPARSE
from ._stream import INDEX_BYTES

#: what ``auto`` chooses among
CANDIDATES = SPARSE + DENSE


def expected_union(k: float, N: float, P: int) -> float:
    """f(k, N, P): expected size of the union of P uniform k-subsets of [0, N)."""
    if N <= 0 or k <= 0:
        return 0.0
    d = min(k / N, 1.0)
    return float(N) if d >= 1.0 else float(N) * -math.expm1(P * math.log1p(-d))


def _bandwidth(name: str, Q: int, N: int, k: float, isize: int, group: int) -> float:
    s = INDEX_BYTES + isize
    L = Q.bit_length() - 1

    def cap(items, dim):                       # the dynamic switch: never above dense
        return min(s * items, isize * dim)

    if name == "ssar_rec_dbl":
        return sum(cap(expected_union(k, N, 2 ** (i - 1)), N) for i in range(1, L + 1))
    if name == "ssar_split_allgather":
        return ((Q - 1) * cap(k / Q, N / Q) +
                (Q - 1) * cap(expected_union(k / Q, N / Q, Q), N / Q))
    if name == "dsar_split_allgather":
        return (Q - 1) * cap(k / Q, N / Q) + (Q - 1) / Q * isize * N
    if name == "dense_rabenseifner":
        return 2 * (Q - 1) / Q * isize * N
    if name == "dense_rec_dbl":
        return L * isize * N
    if name == "dsar_early_switch":
        m = min(int(group).bit_length() - 1, L)
        b = 0.0
        for i in range(1, L + 1):
            if i <= m:
                span = N / 2 ** (i - 1)
                b += cap(expected_union(k / 2 ** (i - 1), span, 2 ** (i - 1)) / 2, span / 2)
            else:
                b += isize * N / 2 ** i
        return b + (Q - 1) / Q * isize * N
    raise ValueError(f"no Table 3.1 formula for {name!r}")


def _latency(name: str, P: int, Q: int) -> int:
    L = Q.bit_length() - 1
    return {"ssar_rec_dbl": L, "dense_rec_dbl": L, "ssar_split_allgather": Q - 1 + L,
            "dsar_split_allgather": Q - 1 + L, "dense_rabenseifner": 2 * L,
            "dsar_early_switch": 2 * L, "dense_ring": 2 * (P - 1)}[name]


def predicted_times(P: int, N: int, k: float, isize: int, cost, *,
                    group: int = DEFAULT_GROUP, candidates=CANDIDATES) -> dict:
    """Expected seconds of every candidate algorithm (Table 3.1 with the folds).

    Parameters
    ----------
    P, N : int
    k : float
        Items per rank (the thesis takes ``k = max_i |H_i|``).
    isize : int
        Bytes per value.
    cost : daskhpc.comm.CostModel
        ``alpha`` s per message, ``beta`` s per byte, ``floor_s`` per message.

    Examples
    --------
    >>> from daskhpc.comm import CostModel
    >>> t = predicted_times(8, 2**20, 1000, 8, CostModel(alpha=1e-3, beta=1e-9))
    >>> min(t, key=t.get)
    'ssar_rec_dbl'
    """
    P, N = int(P), int(N)
    Q = 1 << (P.bit_length() - 1)
    floor = getattr(cost, "floor_s", 0.0)     # every message is a step of its own
    s = INDEX_BYTES + isize
    out = {}
    for name in candidates:
        if name not in ALGORITHMS:
            raise ValueError(f"unknown allreduce algorithm {name!r}")
        if name == "dense_ring":
            out[name] = _latency(name, P, Q) * (cost.alpha + floor) + \
                cost.beta * 2 * (P - 1) / P * isize * N
            continue
        lat, bw = _latency(name, P, Q), _bandwidth(name, Q, N, k, isize, group)
        if P > Q:                               # fold in front, unfold at the end
            dense_result = name in DENSE or name.startswith("dsar")
            res = isize * N if dense_result else min(s * expected_union(k, N, P), isize * N)
            lat += 2
            bw += min(s * k, isize * N) + res
        out[name] = lat * (cost.alpha + floor) + bw * cost.beta
    return out


def choose(P: int, N: int, k: float, isize: int, cost, *, group: int = DEFAULT_GROUP,
           candidates=CANDIDATES) -> dict:
    """The ``auto`` choice: the candidate with the least predicted time.

    Returns ``{"algorithm", "predicted_s", "candidates", "alpha", "beta", "floor_s", "k"}``.
    Ties go to a dense algorithm (sparse bookkeeping only adds: a9a's batches ran
    0.58-0.91x as fast with ssar_rec_dbl as with dense_rec_dbl), then ``candidates`` order."""
    times = predicted_times(P, N, k, isize, cost, group=group, candidates=candidates)
    best = min(times, key=lambda n: (times[n], n not in DENSE, list(times).index(n)))
    return {"algorithm": best, "predicted_s": times[best], "candidates": times,
            "alpha": cost.alpha, "beta": cost.beta, "floor_s": cost.floor_s, "k": float(k)}


def cost_model(alpha: float | None = None, beta: float | None = None,
               floor: float | None = None):
    """The CostModel to decide with: the given numbers, else ``CostModel.from_config()``.

    With both ``alpha`` and ``beta`` given, the configuration (and dask) is not touched."""
    from daskhpc.comm import CostModel

    if alpha is not None and beta is not None:      # nothing to read (no dask.config)
        return CostModel(alpha=float(alpha), beta=float(beta), floor_s=float(floor or 0.0))
    base = CostModel.from_config()
    return base.replace(alpha=base.alpha if alpha is None else float(alpha),
                        beta=base.beta if beta is None else float(beta),
                        floor_s=base.floor_s if floor is None else float(floor))

