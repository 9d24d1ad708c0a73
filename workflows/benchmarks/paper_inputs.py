"""Inputs of the papers' sizes, seeded and power-law, as the files the CLI reads and as Parquet.

Four inputs, each at ``--scale`` times the papers' size (1 = the papers'; 0.01 for tests):

* ``ratings``: 100M ratings in Netflix's shape (480,189 users x 17,770 movies), user
  activity and movie popularity power-law, half-star values from a rank-8 model plus
  noise. ``ratings.csv`` (``userId,movieId,rating``, what ``daskhpc run ssgd`` reads) and
  ``ratings.parquet/`` (int32, int32, float32; ``dask.dataframe.read_parquet``).
* ``tensor``: 100M nonzeros in the Netflix tensor's shape (user x movie x day, 2,182
  days): the ratings' (user, movie) pairs, each with a power-law day. ``tensor.tns``
  (FROSTT, 1-based) and ``tensor.parquet/`` (0-based ids, then the value).
* ``graph``: Reddit's size (232,965 nodes, 114,615,892 directed edges, no two alike),
  out-degrees power-law and capped, targets power-law; 602 random features (float32,
  uniform) and 41 random classes. ``graph.npz`` (the Planetoid layout
  ``daskhpc run gcn`` reads, with a 20-per-class / 500 / 1000 split), and for the
  collections ``edges.parquet/`` (src, dst), ``features.npy`` and ``labels.npy``.
* ``matrix``: a square power-law matrix whose product A·A takes about 1e9 flops (a
  multiply and an add counted as one, as SpGEMM papers count them: sum over k of
  nnz(A[:, k]) * nnz(A[k, :])). ``matrix.mtx`` and ``matrix.parquet/`` (row, col, value).

Each input is made in row blocks (users, nodes), so the generator's memory is a block's
and not the input's (the graph's npz is the exception: its CSR is built whole). Before an
input is made, ``MemAvailable`` (/proc/meminfo) is checked against what it needs and the
script stops with one line when it would not fit. Written through the public API where
it has a writer (``daskhpc.datasets`` for the split); the files are plain formats.

    python workflows/benchmarks/paper_inputs.py --scale 0.01 --dir /tmp/paper-0.01
    python workflows/benchmarks/paper_inputs.py --dir /tmp/paper ratings tensor

Prints one JSON object: per input its shape, nonzeros, raw bytes (12 a rating, 16 a
tensor nonzero, 8 an edge plus 4 a feature, 12 a matrix nonzero), files and seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

NETFLIX = (480_189, 17_770)
NETFLIX_NNZ = 100_000_000
NETFLIX_DAYS = 2_182
REDDIT_NODES, REDDIT_EDGES = 232_965, 114_615_892
REDDIT_FEATURES, REDDIT_CLASSES = 602, 41
# n and nnz of A whose A·A takes about 1e9 flops: row and column ids independent, so the
# flops are about nnz^2 / n
MATRIX_N, MATRIX_NNZ = 100_000, 10_000_000
FILES = 16                      # Parquet files (and generator blocks) per input
ALL = ("ratings", "tensor", "graph", "matrix")


def mem_available() -> int:
    """``MemAvailable`` of /proc/meminfo in bytes (what can be allocated without swapping)."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("/proc/meminfo has no MemAvailable line")


def guard(need: int, what: str) -> None:
    """Stop with one line when ``need`` bytes exceed ``MemAvailable`` (a step that
    would otherwise be killed by the kernel, taking its neighbours' memory with it)."""
    have = mem_available()
    if need > have:
        raise SystemExit(f"{what}: needs about {need / 2**30:.1f} GiB, MemAvailable is "
                         f"{have / 2**30:.1f} GiB; not started (try a smaller --scale)")


def degrees(rng, n: int, total: int, alpha: float, cap: int) -> np.ndarray:
    """``n`` power-law degrees (weights ``(i + 1) ** -alpha``, ids shuffled), each in
    ``[1, cap]``, summing to ``total`` exactly."""
    if not n <= total <= n * cap:
        raise ValueError(f"{total} cannot be split into {n} degrees in [1, {cap}]")
    w = (np.arange(n) + 1.0) ** -alpha
    lo, hi = 0.0, float(total) / w[-1] + 1.0
    for _ in range(100):                     # the scale c with sum(clip(c w)) ~ total
        c = 0.5 * (lo + hi)
        s = np.clip(np.floor(c * w), 1, cap).sum()
        lo, hi = (c, hi) if s < total else (lo, c)
    d = np.clip(np.floor(lo * w), 1, cap).astype(np.int64)
    short = total - int(d.sum())             # >= 0: give one more to the first rows below cap
    room = np.flatnonzero(d < cap)[:short]
    d[room] += 1
    if int(d.sum()) != total:
        raise ValueError(f"could not reach {total} with degrees capped at {cap}")
    return d[rng.permutation(n)]


def zipf_ids(rng, n: int, alpha: float, size: int, perm: np.ndarray) -> np.ndarray:
    """``size`` ids in [0, n) with density ~ (x + 1) ** -alpha (the continuous law's
    inverse CDF), popularity moved off the index order by ``perm``."""
    u = rng.random(size)
    b = 1.0 - alpha
    x = (1.0 + u * ((n + 1.0) ** b - 1.0)) ** (1.0 / b) - 1.0
    return perm[np.minimum(x.astype(np.int64), n - 1)]


def distinct_pairs(rng, r0: int, deg: np.ndarray, ncols: int, draw) -> np.ndarray:
    """Keys ``row * ncols + col``, sorted, row ``r0 + i`` with exactly ``deg[i]`` distinct
    columns from ``draw(size)``; rows still short are drawn again (only they), rows
    over are cut at random."""
    rows = r0 + np.arange(deg.size, dtype=np.int64)
    done, have = [], np.zeros(0, np.int64)
    pend, ask = rows, deg.copy()
    for _ in range(10_000):
        if not pend.size:
            break
        k = np.repeat(pend, ask) * ncols + draw(int(ask.sum()))
        have = np.unique(np.concatenate([have, k]))
        r = have // ncols
        cnt = np.bincount(r - r0, minlength=deg.size)[pend - r0]
        full = cnt >= deg[pend - r0]
        sel = np.isin(r, pend[full])
        if sel.any():
            fk, fr = have[sel], r[sel]
            o = np.lexsort((rng.random(fk.size), fr))
            fk, fr = fk[o], fr[o]
            start = np.searchsorted(fr, fr, side="left")
            keep = np.arange(fk.size) - start < deg[fr - r0]
            done.append(np.sort(fk[keep]))
        have = have[~sel]
        pend = pend[~full]
        miss = deg[pend - r0] - cnt[~full]
        ask = 2 * miss + 4          # a short row is one with hot columns: ask for more
    else:
        raise ValueError(f"rows {pend[:3].tolist()} did not get their {deg[pend[0] - r0]} "
                         "distinct columns: the draw reaches too few of them")
    out = np.concatenate(done) if done else np.zeros(0, np.int64)
    out.sort()
    return out


def row_blocks(deg: np.ndarray, blocks: int) -> list:
    """Row ranges with about the same number of nonzeros each."""
    cum = np.concatenate([[0], np.cumsum(deg)])
    cuts = np.searchsorted(cum, np.linspace(0, cum[-1], blocks + 1))
    cuts[0], cuts[-1] = 0, deg.size
    return [(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:]) if b > a]


def _write_parquet(path, columns: dict) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table(columns), path, row_group_size=1 << 20)


def _write_text(fh, columns: dict, delimiter: str = ",") -> None:
    import pyarrow as pa
    import pyarrow.csv as pc

    pc.write_csv(pa.table(columns), fh,
                 pc.WriteOptions(include_header=False, delimiter=delimiter, quoting_style="none"))


def _pairs(rng, shape, nnz, alpha_rows, alpha_cols, cap, blocks):
    """Yield ``(rows, cols)`` blocks of distinct power-law pairs (rows ascending)."""
    n, m = shape
    deg = degrees(rng, n, nnz, alpha_rows, cap)
    perm = rng.permutation(m)
    for a, b in row_blocks(deg, blocks):
        keys = distinct_pairs(rng, a, deg[a:b], m,
                              lambda size: zipf_ids(rng, m, alpha_cols, size, perm))
        yield keys // m, keys % m


def ratings(out: str, scale: float, seed: int) -> dict:
    """Netflix-shaped ratings: ``ratings.csv`` and ``ratings.parquet/``."""
    n, m = (max(10, round(s * scale ** 0.5)) for s in NETFLIX)
    nnz = int(NETFLIX_NNZ * scale)
    guard(int(48 * nnz / FILES * 4) + (n + m) * 64, "ratings")
    rng = np.random.default_rng([seed, 1])
    U = rng.normal(0.0, 1.0 / np.sqrt(8), (n, 8)).astype(np.float32)
    V = rng.normal(0.0, 1.0, (m, 8)).astype(np.float32)
    pq_dir = os.path.join(out, "ratings.parquet")
    os.makedirs(pq_dir, exist_ok=True)
    with open(os.path.join(out, "ratings.csv"), "wb") as csv:
        csv.write(b"userId,movieId,rating\n")
        for k, (r, c) in enumerate(_pairs(rng, (n, m), nnz, 0.6, 0.9, m // 4, FILES)):
            v = 3.5 + np.einsum("ir,ir->i", U[r], V[c]) + rng.normal(0, 0.5, r.size)
            v = np.clip(np.round(v * 2.0) / 2.0, 0.5, 5.0).astype(np.float32)
            cols = {"userId": r.astype(np.int32), "movieId": c.astype(np.int32), "rating": v}
            _write_text(csv, cols)
            _write_parquet(os.path.join(pq_dir, f"part-{k:03d}.parquet"), cols)
    return {"shape": [n, m], "nnz": nnz, "raw_bytes": 12 * nnz,
            "files": ["ratings.csv", "ratings.parquet"]}


def tensor(out: str, scale: float, seed: int) -> dict:
    """The Netflix tensor's shape (user x movie x day): ``tensor.tns``, ``tensor.parquet/``."""
    n, m = (max(10, round(s * scale ** 0.5)) for s in NETFLIX)
    days = max(10, round(NETFLIX_DAYS * scale ** 0.5))
    nnz = int(NETFLIX_NNZ * scale)
    guard(int(56 * nnz / FILES * 4) + (n + m) * 64, "tensor")
    rng = np.random.default_rng([seed, 2])
    F = [rng.random((s, 8)).astype(np.float32) for s in (n, m, days)]
    dperm = rng.permutation(days)
    pq_dir = os.path.join(out, "tensor.parquet")
    os.makedirs(pq_dir, exist_ok=True)
    with open(os.path.join(out, "tensor.tns"), "wb") as tns:
        for k, (r, c) in enumerate(_pairs(rng, (n, m), nnz, 0.6, 0.9, m // 4, FILES)):
            d = zipf_ids(rng, days, 0.3, r.size, dperm)
            v = np.einsum("ir,ir,ir->i", F[0][r], F[1][c], F[2][d])
            v = np.clip(np.rint(1.0 + 4.0 * v / 2.0 + rng.normal(0, 0.5, r.size)), 1, 5)
            ids = [x.astype(np.int32) for x in (r, c, d)]
            _write_text(tns, {"i": ids[0] + 1, "j": ids[1] + 1, "k": ids[2] + 1,
                              "v": v.astype(np.int8)}, delimiter=" ")
            _write_parquet(os.path.join(pq_dir, f"part-{k:03d}.parquet"),
                           {"user": ids[0], "movie": ids[1], "day": ids[2],
                            "value": v.astype(np.float32)})
    return {"shape": [n, m, days], "nnz": nnz, "raw_bytes": 16 * nnz,
            "files": ["tensor.tns", "tensor.parquet"]}


def graph(out: str, scale: float, seed: int) -> dict:
    """Reddit's size: ``graph.npz`` (Planetoid layout), ``edges.parquet/``,
    ``features.npy``, ``labels.npy``."""
    from daskhpc.datasets import class_split

    n = max(100, round(REDDIT_NODES * scale ** 0.5))
    e = int(REDDIT_EDGES * scale)
    f = REDDIT_FEATURES
    # the npz's CSR is built whole: indices (int32) and the features (values and column
    # indices) on top of a block's working set
    guard(8 * e + 12 * n * f + int(48 * e / FILES * 4), "graph")
    rng = np.random.default_rng([seed, 3])
    pq_dir = os.path.join(out, "edges.parquet")
    os.makedirs(pq_dir, exist_ok=True)
    indices = np.empty(e, np.int32)
    count = np.zeros(n, np.int64)
    at = 0
    for k, (r, c) in enumerate(_pairs(rng, (n, n), e, 0.7, 0.6, max(2, n // 10), FILES)):
        indices[at:at + r.size] = c
        count += np.bincount(r, minlength=n)
        at += r.size
        _write_parquet(os.path.join(pq_dir, f"part-{k:03d}.parquet"),
                       {"src": r.astype(np.int32), "dst": c.astype(np.int32)})
    indptr = np.concatenate([[0], np.cumsum(count)])
    X = np.lib.format.open_memmap(os.path.join(out, "features.npy"), "w+", np.float32, (n, f))
    for a in range(0, n, 16384):
        X[a:a + 16384] = rng.random((min(16384, n - a), f), dtype=np.float32)
    X.flush()
    y = rng.integers(0, REDDIT_CLASSES, n)
    np.save(os.path.join(out, "labels.npy"), y)
    tr, va, te = class_split(y, per_class=20, val=500, test=1000, seed=seed)
    np.savez(os.path.join(out, "graph.npz"), adj_indptr=indptr, adj_indices=indices,
             adj_shape=np.array([n, n]), feat_indptr=np.arange(0, n * f + 1, f),
             feat_indices=np.tile(np.arange(f, dtype=np.int32), n),
             feat_data=np.asarray(X).ravel(), feat_shape=np.array([n, f]), labels=y,
             idx_train=tr, idx_val=va, idx_test=te)
    return {"shape": [n, n], "nnz": e, "features": f, "classes": REDDIT_CLASSES,
            "raw_bytes": 8 * e + 4 * n * f,
            "files": ["graph.npz", "edges.parquet", "features.npy", "labels.npy"]}


def matrix(out: str, scale: float, seed: int) -> dict:
    """A square power-law matrix, A·A about 1e9 * scale flops: ``matrix.mtx``,
    ``matrix.parquet/``."""
    n = max(100, int(MATRIX_N * scale))
    nnz = max(n, int(MATRIX_NNZ * scale))
    guard(int(48 * nnz / FILES * 4) + n * 64, "matrix")
    rng = np.random.default_rng([seed, 4])
    pq_dir = os.path.join(out, "matrix.parquet")
    os.makedirs(pq_dir, exist_ok=True)
    rowcount, colcount = np.zeros(n, np.int64), np.zeros(n, np.int64)
    with open(os.path.join(out, "matrix.mtx"), "wb") as mtx:
        mtx.write(f"%%MatrixMarket matrix coordinate real general\n{n} {n} {nnz}\n".encode())
        for k, (r, c) in enumerate(_pairs(rng, (n, n), nnz, 0.5, 0.5, max(2, n // 4),
                                          FILES)):
            v = rng.random(r.size, dtype=np.float32)
            rowcount += np.bincount(r, minlength=n)
            colcount += np.bincount(c, minlength=n)
            _write_text(mtx, {"i": (r + 1).astype(np.int32), "j": (c + 1).astype(np.int32),
                              "v": v}, delimiter=" ")
            _write_parquet(os.path.join(pq_dir, f"part-{k:03d}.parquet"),
                           {"row": r.astype(np.int32), "col": c.astype(np.int32), "value": v})
    flops = int(np.dot(colcount, rowcount))    # sum_k nnz(A[:, k]) nnz(A[k, :])
    return {"shape": [n, n], "nnz": nnz, "flops_AA": flops, "raw_bytes": 12 * nnz,
            "files": ["matrix.mtx", "matrix.parquet"]}


MAKERS = {"ratings": ratings, "tensor": tensor, "graph": graph, "matrix": matrix}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="*", metavar="INPUT",
                    help=f"which inputs (default all: {' '.join(ALL)})")
    ap.add_argument("--scale", type=float, default=1.0,
                    help="fraction of the papers' sizes (nonzeros scale with it)")
    ap.add_argument("--dir", default="/tmp/daskhpc-paper-inputs")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    bad = [x for x in args.inputs if x not in ALL]
    if bad:
        ap.error(f"unknown input {bad[0]!r}; choose from {', '.join(ALL)}")
    if not 0 < args.scale <= 1:
        ap.error("--scale must be in (0, 1]")
    os.makedirs(args.dir, exist_ok=True)
    out = {"scale": args.scale, "seed": args.seed, "dir": args.dir, "inputs": {}}
    for name in args.inputs or ALL:
        t0 = time.perf_counter()
        row = MAKERS[name](args.dir, args.scale, args.seed)
        row["seconds"] = round(time.perf_counter() - t0, 1)
        out["inputs"][name] = row
        print(f"{name}: {row['nnz']:,} nonzeros, shape {row['shape']}, "
              f"{row['seconds']} s", file=sys.stderr, flush=True)
    index = os.path.join(args.dir, "inputs.json")     # inputs made earlier stay listed
    if os.path.exists(index):
        with open(index) as fh:
            before = json.load(fh)
        if (before.get("scale"), before.get("seed")) == (args.scale, args.seed):
            out["inputs"] = {**before.get("inputs", {}), **out["inputs"]}
    with open(index, "w") as fh:
        json.dump(out, fh, indent=1)
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
