"""What every part of a CP-ALS program holds (its static data), built once from a Setup:
its nonzeros in local coordinates, the global ids of the rows it owns or needs, and per
mode and peer the positions of the rows it sends and receives in the fold and expand."""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from daskhpc._narrow import index_dtype

from ._assign import part_counts


@dataclass(eq=False)
class PartStatic:
    """One part's static data: ``work[n]`` the nonzeros it processes in mode n (None: all),
    ``rows[m]`` its local rows' global ids, ``own[m]`` its owned rows among them, ``fold_*``
    and ``exp_*[n][q]`` the positions sent to / received from part q, ``U0`` given rows."""

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


@numba.njit(cache=True, nogil=True)
def _members(coords, owners, offsets, K):  # pragma: no cover - numba
    # coarse grain: per part, the nonzeros one of whose N slices it owns (the owner of
    # row i of mode n: owners[offsets[n] + i]), ascending, and per mode whether it
    # works on each of them (it owns that mode's slice); a count pass and a fill pass
    N, nnz = coords.shape
    ptr = np.zeros(K + 1, np.int64)
    for e in range(nnz):
        for n in range(N):
            p = owners[offsets[n] + coords[n, e]]
            if _first(coords, owners, offsets, n, e, p):
                ptr[p + 1] += 1
    for p in range(K):
        ptr[p + 1] += ptr[p]
    out = np.empty(ptr[K], np.int64)
    works = np.zeros((N, ptr[K]), np.bool_)
    at = ptr[:-1].copy()
    for e in range(nnz):
        for n in range(N):
            p = owners[offsets[n] + coords[n, e]]
            if _first(coords, owners, offsets, n, e, p):
                out[at[p]] = e
                at[p] += 1
            # the part's entry of e is the last one written
            works[n, at[p] - 1] = True
    return ptr, out, works


@numba.njit(cache=True, nogil=True)
def _first(coords, owners, offsets, n, e, p):  # pragma: no cover - numba
    # is p the owner of e's slice in no mode before n?
    for m in range(n):
        if owners[offsets[m] + coords[m, e]] == p:
            return False
    return True


def part_members(setup) -> tuple[list, list]:
    """Per part the nonzeros it holds (ascending), and per part and mode the positions among
    them it works on (coarse: its owned slices; None: all)."""
    X, d, K, N = setup.tensor, setup.dist, setup.K, setup.N
    if d.grain == "fine":
        return _group(d.nnz_parts, K), [[None] * N for _ in range(K)]
    # a nonzero belongs to the owners of its N slices (replicated up to N times)
    offsets = np.cumsum([0] + [o.size for o in d.owners]).astype(np.int64)
    ptr, e, works = _members(np.ascontiguousarray(X.coords, dtype=np.int64),
                             np.concatenate(d.owners).astype(np.int64), offsets, int(K))
    work = [[np.flatnonzero(works[n, ptr[p]:ptr[p + 1]]) for n in range(N)] for p in range(K)]
    # None where a part works on all its nonzeros (one part: nothing to select)
    return ([e[ptr[p]:ptr[p + 1]] for p in range(K)],
            [[None if w.size == ptr[p + 1] - ptr[p] else w for w in work[p]] for p in range(K)])


def _where_label(labels: np.ndarray, p: int, n: int) -> np.ndarray:
    """The ``n`` positions of ``labels == p``, ascending, int32 where they fit."""
    out = np.empty(n, index_dtype(labels.size))
    _fill_where(labels, p, out)
    return out


@numba.njit(cache=True, nogil=True)
def _fill_where(labels, p, out):  # pragma: no cover - numba
    k = 0
    for t in range(labels.size):
        if labels[t] == p:
            out[k] = t
            k += 1


@numba.njit(cache=True, nogil=True)
def _mark_ids(ids, nz, every, mark):  # pragma: no cover - numba
    for t in range(ids.size if every else nz.size):
        mark[ids[t] if every else ids[nz[t]]] = True


@numba.njit(cache=True, nogil=True)
def _look_up(ids, nz, every, where, out):  # pragma: no cover - numba
    for t in range(out.size):
        out[t] = where[ids[t] if every else ids[nz[t]]]


def _local(ids: np.ndarray, nz: np.ndarray, every: bool, own: np.ndarray, size: int,
           out: np.ndarray):
    """The part's rows of a mode (its nonzeros' and its own, ascending) and its own rows'
    local ids; the nonzeros' local ids go to ``out``. A mark and a lookup, no sort."""
    mark = np.zeros(size, bool)
    _mark_ids(ids, nz, every, mark)
    mark[own] = True
    rows = np.flatnonzero(mark).astype(np.int64, copy=False)
    where = np.empty(size, np.int64)
    where[rows] = np.arange(rows.size)
    _look_up(ids, nz, every, where, out)
    return rows, where[own]


def _values_of(vals: np.ndarray, nz: np.ndarray, every: bool) -> np.ndarray:
    """The values of the nonzeros ``nz`` (of a placeholder, a view)."""
    if every:
        return vals
    if vals.ndim == 1 and vals.strides == (0,):
        return vals[:nz.size]
    return vals[nz]


def statics(setup) -> list[PartStatic]:
    """Per part: its nonzeros in local coordinates, its rows and its message positions."""
    return [st for _, st in iter_statics(setup)]


def iter_statics(setup, parts=None):
    """``(part, PartStatic)`` of ``parts`` (default all), made one at a time."""
    X, d, K, N = setup.tensor, setup.dist, setup.K, setup.N
    if d.grain == "fine":        # a part's nonzeros found when it is made
        members = work = None
    else:
        members, work = part_members(setup)
    own_global = [_group(d.owners[m], K) for m in range(N)]     # [mode][part]
    grams0 = np.stack(setup.initial_grams())
    start = setup.start_factors()
    o = setup.options
    normx2 = X.norm2()
    # per mode the plan's (src, dst, ids) of the expand and of the fold, listed once
    expand = [[m[1:] for m in mp["expand"].messages()] for mp in setup.plans]
    fold = [[] if mp["fold"] is None else [m[1:] for m in mp["fold"].messages()]
            for mp in setup.plans]
    counts = part_counts(d.nnz_parts, K) if members is None else None
    for p in (range(K) if parts is None else parts):
        if members is None:
            nz = _where_label(d.nnz_parts, p, int(counts[p]))
            wk = [None] * N
        else:
            nz, wk = members[p], work[p]
        every = nz.size == X.nnz              # (one part) its nonzeros are the tensor's
        lc = np.empty((N, nz.size), index_dtype(max(X.shape)))     # int32: the raw size
        rows, own = [], []
        for m in range(N):
            r, o_m = _local(X.coords[m], nz, every, own_global[m][p], X.shape[m], lc[m])
            rows.append(r)
            own.append(o_m)
        st = PartStatic(p, d.grain, setup.R, int(setup.options.seed), normx2, grams0,
                        lc, _values_of(X.vals, nz, every), wk, rows, own,
                        [{} for _ in range(N)], [{} for _ in range(N)],
                        [{} for _ in range(N)], [{} for _ in range(N)],
                        None if start is None else [start[m][rows[m]] for m in range(N)],
                        float(o.reg), bool(o.nonnegative))
        del nz, lc
        for n in range(N):
            for a, q, ids in expand[n]:
                if a == p:
                    st.exp_send[n][q] = _positions(own_global[n][p], ids)
                if q == p:
                    st.exp_recv[n][a] = _positions(rows[n], ids)
            for a, q, ids in fold[n]:
                if a == p:
                    st.fold_send[n][q] = _positions(rows[n], ids)
                if q == p:
                    st.fold_recv[n][a] = _positions(own_global[n][p], ids)
        yield p, st
        del st                   # the caller's, once sent: not kept until the next part's
