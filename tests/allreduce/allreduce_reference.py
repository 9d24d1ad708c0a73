"""An independent simulation of every algorithm's messages, from the thesis's definitions.

Written without the package's streams or algorithm classes: a rank's partial is a range
[lo, hi) and either a Python set of indices (sparse) or None (dense). Rules (Renggli
2017): a stream with n items over d is dense when n (c + isize) >= d isize (4.1.2); a
merge of two sparse streams is dense when (n1 + n2)(c + isize) >= d isize (Listing 4.3);
a concatenation is sparse only if both parts are (4.1.3 case 2). Returns the messages
as (stage, src, dst, items, dense), sorted by stage, src, dst.

Also the tests' seeded inputs (:func:`vectors`) and :func:`run_recorded`, a run_local
that records every message a Program really sends.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from daskhpc.comm import run_local

C = 4


def _dense_if(n, d, isize):
    return n * (C + isize) >= d * isize


def _canon(lo, hi, s, isize):
    if s is not None and _dense_if(len(s), hi - lo, isize):
        return (lo, hi, None)
    return (lo, hi, s)


def _merge(a, b, isize):
    lo, hi, x = a
    y = b[2]
    if x is not None and y is not None and not _dense_if(len(x) + len(y), hi - lo, isize):
        return (lo, hi, x | y)
    return (lo, hi, None)


def _part(a, lo, hi, isize):
    s = a[2]
    if s is None:
        return (lo, hi, None)
    return _canon(lo, hi, {i for i in s if lo <= i < hi}, isize)


def _cat(a, b):
    if a[1] == b[0]:
        first, second = a, b
    else:
        first, second = b, a
    assert first[1] == second[0]
    s = None if first[2] is None or second[2] is None else first[2] | second[2]
    return (first[0], second[1], s)


def _items(a):
    return a[1] - a[0] if a[2] is None else len(a[2])


def _bounds(nb, N):
    b = [i * (N // nb) for i in range(nb + 1)]
    b[-1] = N
    return b


def simulate(name, sets, N, isize=8, group=8):
    """Messages of algorithm ``name`` for index ``sets`` (one set, or None = dense, per rank)."""
    P = len(sets)
    cur = [_canon(0, N, None if s is None else set(int(i) for i in s), isize) for s in sets]
    msgs = []
    if name == "dense_ring":
        return _ring(P, N, msgs)
    Q = 1
    while Q * 2 <= P:
        Q *= 2
    stage = 0
    if P > Q:                                  # fold: rank Q + j -> j
        for j in range(P - Q):
            msgs.append((0, Q + j, j, _items(cur[Q + j]), cur[Q + j][2] is None))
            cur[j] = _merge(cur[j], cur[Q + j], isize)
        stage = 1
    cur = cur[:Q]
    L = Q.bit_length() - 1
    if name in ("ssar_rec_dbl", "dense_rec_dbl"):
        if name == "dense_rec_dbl":
            cur = [(0, N, None) for _ in cur]
        for t in range(L):
            new = list(cur)
            for p in range(Q):
                q = p ^ (1 << t)
                msgs.append((stage, p, q, _items(cur[p]), cur[p][2] is None))
                new[q] = _merge(cur[q], cur[p], isize)
            cur, stage = new, stage + 1
    elif name in ("ssar_split_allgather", "dsar_split_allgather") and Q > 1:
        b = _bounds(Q, N)
        own = []
        for q in range(Q):
            parts = [_part(cur[p], b[q], b[q + 1], isize) for p in range(Q)]
            for p in range(Q):
                if p != q:
                    msgs.append((stage, p, q, _items(parts[p]), parts[p][2] is None))
            acc = parts[0]
            for p in range(1, Q):
                acc = _merge(acc, parts[p], isize)
            if name.startswith("dsar"):
                acc = (acc[0], acc[1], None)
            own.append(acc)
        cur, stage = own, stage + 1
        for t in range(L):
            new = list(cur)
            for p in range(Q):
                q = p ^ (1 << t)
                msgs.append((stage, p, q, _items(cur[p]), cur[p][2] is None))
                new[q] = _cat(cur[q], cur[p])
            cur, stage = new, stage + 1
    elif name in ("dsar_split_allgather",):
        cur = [(0, N, None) for _ in cur]
    elif name in ("dsar_early_switch", "dense_rabenseifner"):
        m = 0 if name == "dense_rabenseifner" else min(group.bit_length() - 1, L)
        b = _bounds(Q, N)
        rng = [(0, Q) for _ in range(Q)]       # (first block, number of blocks)
        if m == 0 or L == 0:
            cur = [(0, N, None) for _ in cur]
        for t in range(L):
            if t == m:
                cur = [(c[0], c[1], None) for c in cur]
            new_cur, new_rng = list(cur), list(rng)
            for p in range(Q):
                q = p ^ (1 << t)
                start, n = rng[p]
                half = n // 2
                ks = start + half if (q >> t) & 1 else start      # the half q keeps
                sent = _part(cur[p], b[ks], b[ks + half], isize)
                msgs.append((stage, p, q, _items(sent), sent[2] is None))
            for q in range(Q):
                p = q ^ (1 << t)
                start, n = rng[q]
                half = n // 2
                ks = start + half if (q >> t) & 1 else start
                mine = _part(cur[q], b[ks], b[ks + half], isize)
                got = _part(cur[p], b[ks], b[ks + half], isize)
                new_cur[q] = _merge(mine, got, isize)
                new_rng[q] = (ks, half)
            cur, rng, stage = new_cur, new_rng, stage + 1
        cur = [(c[0], c[1], None) for c in cur]
        for u in range(L):
            d = 1 << (L - 1 - u)
            new = list(cur)
            for p in range(Q):
                q = p ^ d
                msgs.append((stage, p, q, _items(cur[p]), True))
                new[q] = _cat(cur[q], cur[p])
            cur, stage = new, stage + 1
    if P > Q:                                  # unfold: rank j -> Q + j
        for j in range(P - Q):
            msgs.append((stage, j, Q + j, _items(cur[j]), cur[j][2] is None))
    return sorted(msgs)


def _ring(P, N, msgs):
    b = _bounds(P, N)
    for s in range(2 * (P - 1)):
        for p in range(P):
            blk = (p - s) % P if s < P - 1 else (p + 1 - (s - (P - 1))) % P
            msgs.append((s, p, (p + 1) % P, b[blk + 1] - b[blk], True))
    return sorted(msgs)



PARTS = (2, 3, 4, 5, 8)
DENSITIES = (0.0, 1e-3, 1e-2, 0.3, 1.0)


def vectors(N, P, density, seed, integer):
    """Per rank a dense array with round(density N) uniform nonzeros (no zero values)."""
    rng = np.random.default_rng(seed)
    k = int(round(density * N))
    out = []
    for _ in range(P):
        v = np.zeros(N, np.int64 if integer else np.float64)
        idx = rng.choice(N, size=k, replace=False)
        if integer:
            vals = rng.integers(1, 1000, size=k) * rng.choice([-1, 1], size=k)
        else:
            vals = rng.standard_normal(k) * 10.0 ** rng.integers(-3, 4, size=k)
            vals[vals == 0] = 1.0
        v[idx] = vals
        out.append(v)
    return out


def _recording(ctx, fn, args, log):
    out = fn(ctx, *args)
    for dst, payload in (out or {}).items():
        items = payload[0].size if len(payload) == 1 else payload[1].size
        nbytes = sum(a.nbytes for a in payload)
        log.append((ctx.step, ctx.part, dst, items, len(payload) == 1, nbytes))
    return out


def run_recorded(program, statics):
    """run_local, also returning every message actually sent:
    (step, src, dst, items, dense, payload bytes)."""
    log: list = []
    program.steps[:] = [replace(s, fn=_recording, args=(s.fn, s.args, log))
                        for s in program.steps]
    finals, reports = run_local(program, statics)
    return finals, reports, sorted(log)
