"""What every part of a CP-ALS program holds (its static data), built once from a Setup.

A part gets its nonzeros in local coordinates (row ids of its own row lists), the global
ids of the rows of every mode it owns or needs, and, per mode and peer, the positions of
the rows it sends and receives in the fold and the expand, in the order of the plan's
messages (ascending global row).

Examples
--------
>>> from daskhpc.cpals._setup import prepare
>>> s = prepare(([[0, 1, 2, 0], [1, 2, 0, 0], [2, 0, 1, 0]], [1.0, 2.0, 3.0, 4.0], (3, 3, 3)),
...             2, grain="fine", partition="random", rank=2)
>>> st = statics(s)
>>> sum(p.vals.size for p in st), [p.rows[0].tolist() for p in st]
(4, [[0, 1], [0, 2]])
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from daskhpc.arrays import unique_sorted

__all__ = ["PartStatic", "statics", "part_members"]


@dataclass(eq=False)
class PartStatic:
    """One part's static data.

    ``coords`` (N x nnz_p, local row ids) and ``vals``: the part's nonzeros; ``work[n]``:
    which of them it processes in mode n (coarse grain; None = all); ``rows[m]``: global
    ids of its local rows of mode m; ``own[m]``: positions of its owned rows among them;
    ``fold_send[n][q]`` / ``fold_recv[n][q]``: positions (local / among owned) of the
    partial rows sent to / received from part q; ``exp_send[n][q]`` (among owned) /
    ``exp_recv[n][q]`` (local): the same for the expand. ``U0[m]``: the initial rows of
    its local rows (init svd or given; None: the seeded rows, made by the part itself);
    ``reg`` and ``nonnegative``: the solve's options (``_als.solve_rows``).
    """

    part: int
    grain: str
    rank: int
    seed: int
    normx2: float
    grams0: np.ndarray
    coords: np.ndarray
    vals: np.ndarray
    work: list
    rows: list
    own: list
    fold_send: list
    fold_recv: list
    exp_send: list
    exp_recv: list
    U0: list | None = None
    reg: float = 0.0
    nonnegative: bool = False


def _positions(sorted_ids: np.ndarray, ids: np.ndarray) -> np.ndarray:
    return np.searchsorted(sorted_ids, ids).astype(np.int64)


def _group(labels: np.ndarray, K: int) -> list[np.ndarray]:
    """Positions with each label 0..K-1, ascending (one stable sort, not K scans)."""
    order = np.argsort(labels, kind="stable")
    bounds = np.searchsorted(labels[order], np.arange(K + 1))
    return [order[bounds[p]:bounds[p + 1]] for p in range(K)]


def part_members(setup) -> tuple[list, list | None]:
    """Per part the nonzeros it holds (ascending), and per mode the part that works on
    every nonzero (coarse grain; None in the fine grain, where that is ``nnz_parts``)."""
    X, d, K, N = setup.tensor, setup.dist, setup.K, setup.N
    if d.grain == "fine":
        return _group(d.nnz_parts, K), None
    # a nonzero belongs to the owners of its N slices (replicated up to N times)
    wp = [d.work_parts(X, n) for n in range(N)]
    key = unique_sorted(np.concatenate([w * np.int64(X.nnz) + np.arange(X.nnz) for w in wp]))
    part, e = np.divmod(key, np.int64(X.nnz))
    return [e[g] for g in _group(part, K)], wp


def statics(setup) -> list[PartStatic]:
    """Per part: its nonzeros in local coordinates, its rows and its message positions."""
    X, d, K, N = setup.tensor, setup.dist, setup.K, setup.N
    members, wp = part_members(setup)
    own_global = [_group(d.owners[m], K) for m in range(N)]     # [mode][part]
    grams0 = np.stack(setup.initial_grams())
    start = setup.start_factors()
    o = setup.options
    normx2 = X.norm2()
    out = []
    for p in range(K):
        nz = members[p]
        gc = X.coords[:, nz]
        own_g = [own_global[m][p] for m in range(N)]
        rows = [np.union1d(gc[m], own_g[m]).astype(np.int64) for m in range(N)]
        lc = np.stack([_positions(rows[m], gc[m]) for m in range(N)]) if nz.size else \
            np.zeros((N, 0), np.int64)
        work = [None] * N if d.grain == "fine" else \
            [np.flatnonzero(wp[n][nz] == p) for n in range(N)]
        out.append(PartStatic(p, d.grain, setup.R, int(setup.options.seed), normx2, grams0,
                              lc, X.vals[nz], work, rows,
                              [_positions(rows[m], own_g[m]) for m in range(N)],
                              [{} for _ in range(N)], [{} for _ in range(N)],
                              [{} for _ in range(N)], [{} for _ in range(N)],
                              None if start is None else [start[m][rows[m]] for m in range(N)],
                              float(o.reg), bool(o.nonnegative)))
    for n, mp in enumerate(setup.plans):
        for _, s, q, ids in mp["expand"].messages():
            out[s].exp_send[n][q] = _positions(own_global[n][s], ids)
            out[q].exp_recv[n][s] = _positions(out[q].rows[n], ids)
        if mp["fold"] is not None:
            for _, s, q, ids in mp["fold"].messages():
                out[s].fold_send[n][q] = _positions(out[s].rows[n], ids)
                out[q].fold_recv[n][s] = _positions(own_global[n][q], ids)
    return out


