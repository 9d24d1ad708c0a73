"""The serial reference: the same strata, blocks, update order and kernel in one process.

The K blocks of a stratum share no row or column, so running them one after another
gives the distributed run's W and H bit for bit; losses and test errors are summed in
the driver's order (per part over sub-epochs, then over parts)."""

from __future__ import annotations

import time

import numpy as np

from ._kernels import (block_seed, error_sse, initial_rows, learning_rate, pair_terms,
                       sweep)
from ._data import kept as _typed
from ._setup import Setup


def initial_factors(s: Setup) -> tuple[np.ndarray, np.ndarray]:
    """The W and H every part starts from: seeded, or the state a run resumes from."""
    if s.start is not None:
        return s.start[0].copy(), s.start[1].copy()
    N, M = s.train.shape
    o = s.options
    return (initial_rows(o.seed, 0, np.arange(N), o.rank, s.init_scale, o.biased),
            initial_rows(o.seed, 1, np.arange(M), o.rank, s.init_scale, o.biased))


def assemble(s: Setup, pieces) -> tuple[np.ndarray, np.ndarray]:
    """Full W and H from the parts' pieces; rows nobody updated stay initial."""
    W, H = initial_factors(s)
    for p, f in pieces:
        W[s.layout.row_parts == p] = f["W"]
        H[f["cols"]] = f["rows"]
    return W, H


def test_sse_by_part(s: Setup, W: np.ndarray, H: np.ndarray) -> np.ndarray:
    """Squared test error of every part's test ratings (predictions clipped)."""
    out, t = np.zeros(s.K), s.test
    for p in range(s.K):
        idx = s.test_of(p)
        out[p] = error_sse(W, H, t.rows[idx], t.cols[idx], t.vals[idx], *s.clip, s.bias)
    return out


def run_serial(s: Setup) -> dict:
    """Run SSGD serially: ``W``, ``H`` (biased: biases in the last column) and ``history``."""
    K, o = s.K, s.options
    W, H = initial_factors(s)
    blocks = [s.block_ratings(p) for p in range(K)]      # [part][rows, cols, values][block]
    history, bias = [], s.bias
    evaluate = set(s.runplan.eval_epochs.tolist())
    for e in range(s.E):              # epoch e here is epoch s.epoch0 + e of the run
        t0 = time.perf_counter()
        ge = s.epoch0 + e
        lr = learning_rate(o.lr, ge)
        loss = np.zeros((K, K))
        for k in range(K):
            for p in range(K):
                b = int(s.strata.block(p, k, e))
                loss[p, k] = sweep(W, H, *(x[b] for x in blocks[p]), lr, o.reg,
                                   block_seed(o.seed, ge, p, b), bias, o.shuffle)
        # each part's sum over its sub-epochs, then over parts (the driver's order)
        row = {"epoch": ge, "lr": lr, "train_loss": _sum(_sum(r) for r in loss),
               "time_s": time.perf_counter() - t0}
        if e in evaluate:
            sse = test_sse_by_part(s, W, H)
            row["test_rmse"] = float(np.sqrt(_sum(sse) / s.test.nnz))
        history.append(row)
    return {"W": W, "H": H, "history": history}


def _sum(values) -> float:
    total = 0.0
    for v in values:
        total += float(v)
    return total


#: Ratings :func:`value_quality` takes at a time
CHUNK = 1 << 20


def value_quality(rows, cols, vals, test_vals, W, H, o, mu, clip) -> dict:
    """The final objective and train RMSE, and the global mean's test RMSE."""
    q = {}
    if W is not None:
        # one pass (pair_terms) a chunk at a time, on the ids and ratings as they are:
        # no gathered W[rows] or 64-bit copies (docs/benchmarks.md)
        rows, cols = (_typed(a, (np.int32, np.int64)) for a in (rows, cols))
        vals = _typed(vals, (np.float32, np.float64))
        W, H = np.ascontiguousarray(W), np.ascontiguousarray(H)
        obj = sq = 0.0
        for lo in range(0, vals.size, CHUNK):
            sl = slice(lo, lo + CHUNK)
            terms, c = pair_terms(W, H, rows[sl], cols[sl], vals[sl], int(o.rank),
                                  bool(o.biased), float(mu if o.biased else 0.0),
                                  float(o.reg), float(o.bias_reg if o.biased else 0.0),
                                  *map(float, clip))
            obj += float(np.sum(terms))
            sq += float(np.sum(np.square(c, out=c)))           # c * c
            del terms, c
        q["final_objective"] = 0.5 * obj
        q["final_train_rmse"] = float(np.sqrt(sq / vals.size)) if vals.size else 0.0
    if test_vals.size:
        # widened: a float32 array minus a Python float stays float32 (NEP 50)
        q["global_mean_rmse"] = float(np.sqrt(np.mean((np.asarray(test_vals, np.float64) -
                                                       mu) ** 2)))
    return q
