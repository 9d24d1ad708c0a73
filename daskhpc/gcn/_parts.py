"""Per-part static data of the GCN program: rows of A_hat (and A_hat^T) with column ids
into the extended input block (own rows, then each sender's in ascending order), send
lists, features, labels; the same per mini-batch step. Entries stay in global column
order, so the kernels sum in the serial reference's order."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from daskhpc.comm import Plan

from ._model import Csr, dense_features, features
from ._plan import exchange_plans, first_layer_rows


def _block(M, own, ext_global, loc, dtype):
    """Own rows of M (entries in global column order) with columns -> extended ids."""
    loc[ext_global] = np.arange(ext_global.size)
    B = Csr.of(M[own], dtype)
    idx = loc[B[1]]
    loc[ext_global] = -1
    if idx.size and idx.min() < 0:
        raise AssertionError("a row needs an input row its plan does not deliver")
    return Csr((B[0], idx, B[2]))


def _pattern(plan: Plan, M, parts, K, dtype):
    """Per part: the block of M, and {dst: local rows to send}, for one exchange."""
    n = parts.size
    loc = np.full(n, -1, np.int64)
    owns = [np.flatnonzero(parts == p) for p in range(K)]
    blocks, sends = [], []
    for p in range(K):
        got = [plan.message(int(m))[3] for m in np.flatnonzero(plan.dst == p)]  # src asc.
        ext = np.concatenate([owns[p]] + got)
        blocks.append(_block(M, owns[p], ext, loc, dtype))
        out = {}
        for m in np.flatnonzero(plan.src == p):
            _, _, dst, rows = plan.message(int(m))
            out[int(dst)] = np.searchsorted(owns[p], rows).astype(np.int64)
        sends.append(out)
    return owns, blocks, sends


def _part_blocks(plans, A, AT, symmetric, parts, K, dtype):
    """Per part: (own rows, A block, A^T block, forward sends, backward sends)."""
    owns, Ab, fsend = _pattern(plans["forward"], A, parts, K, dtype)
    if symmetric:
        ATb, bsend = Ab, fsend
    else:
        _, ATb, bsend = _pattern(plans["backward"], AT, parts, K, dtype)
    return owns, Ab, ATb, fsend, bsend


def statics(setup) -> list[dict]:
    """Per part: its rows, A_hat and A_hat^T blocks, send lists, features, labels (and each
    mini-batch's, in ``"batches"``).

    Examples
    --------
    >>> from daskhpc import gcn
    >>> s = gcn.prepare("cora", 2, partition="rp", epochs=1)
    >>> sum(d["rows"].size for d in gcn.statics(s))
    2708
    """
    g, K, o = setup.graph, setup.K, setup.options
    parts = setup.assignment.parts
    owns, A, AT, fsend, bsend = _part_blocks(exchange_plans(setup), g.A, g.AT, g.symmetric,
                                             parts, K, setup.dtype)
    n_train = int(g.masks["train"].sum())
    # each part's rows made from the normalised CSR: the whole matrix is never densified
    dense, Xs = dense_features(g.X.nnz, *g.X.shape), sp.csr_array(g.X)

    def rows_of(r):
        return features(Xs[np.asarray(r, np.int64)], setup.dtype, dense=dense)

    out = []
    for p in range(K):
        r = owns[p]
        out.append({"rows": r, "A": A[p], "AT": AT[p], "fsend": fsend[p], "bsend": bsend[p],
                    "X": rows_of(r), "y": g.y[r], "train": g.masks["train"][r],
                    "val": g.masks["val"][r], "test": g.masks["test"][r],
                    "n_train": n_train, "dims": setup.dims, "transform": setup.transform,
                    "options": o})
    w1 = first_layer_rows(setup)
    if w1 is not None:
        # part m's rows of W^1, what it sends and receives of dW^1 (_program._apply)
        for p in range(K):
            recv = {n: w1["send"][n][p] for n in range(K) if p in w1["send"][n]}
            shared = np.unique(np.concatenate([np.zeros(0, np.int64), *recv.values()]))
            out[p]["w1"] = {"keep": w1["keep"][p], "send": w1["send"][p], "shared": shared,
                            # where each sender's rows go among the shared ones
                            "recv": {n: np.searchsorted(shared, r) for n, r in recv.items()}}
    mb = setup.batches
    if mb:
        for p in range(K):
            out[p]["batches"] = []
        for e, nodes in enumerate(mb["nodes"]):
            Ab = mb["A"][e]
            ow, Bl, BTl, fs, bs = _part_blocks(mb["plans"][e], Ab, sp.csr_array(Ab.T),
                                               g.symmetric, parts[nodes], K, setup.dtype)
            none = np.zeros(0, bool)
            for p in range(K):
                r = nodes[ow[p]]                 # global ids of the part's batch rows
                out[p]["batches"].append({
                    "rows": r, "A": Bl[p], "AT": BTl[p], "fsend": fs[p], "bsend": bs[p],
                    "X": rows_of(r), "y": g.y[r], "train": g.masks["train"][r],
                    "val": np.zeros(r.size, bool) if r.size else none,
                    "test": np.zeros(r.size, bool) if r.size else none,
                    "n_train": mb["n_train"][e]})
    return out
