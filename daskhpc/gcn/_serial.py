"""The plain serial reference: full-batch GCN training on the whole graph, no partition.

Each epoch (section 3.1): the forward pass with dropout (eq. (1)), the loss and G^L
(eq. (2)), the backward pass with A_hat^T (eqs. (3)-(4)), the optimiser step (eq. (5) or
Adam), and on evaluated epochs a forward pass without dropout; the final evaluation gives
the predictions."""

from __future__ import annotations

import time

import numpy as np

from ._model import (NMETRICS, Csr, backward, dropout, features, head, init_params,
                     layer_input, layer_output, pack, take_rows, unpack, update)


def _counts(setup) -> dict:
    m = setup.graph.masks
    return {k: int(v.sum()) for k, v in m.items()}


def metrics_row(setup, epoch: int, sums, evaluated: bool) -> dict:
    """History row of an epoch (or mini-batch step) from its 7 metric sums."""
    c = _counts(setup)
    mb = setup.batches
    n_train = mb["n_train"][epoch] if mb and epoch < len(mb["n_train"]) else c["train"]
    row = {"epoch": int(epoch), "train_loss": float(sums[0]) / n_train}
    if evaluated:
        for i, split in enumerate(("train", "val", "test")):
            if c[split]:
                row[f"{split}_eval_loss" if split == "train" else f"{split}_loss"] = \
                    float(sums[1 + 2 * i]) / c[split]
                row[f"{split}_acc"] = float(sums[2 + 2 * i]) / c[split]
    return row


def final_row(setup, sums) -> dict:
    """The final evaluation (weights after the last epoch) from its 6 sums."""
    c = _counts(setup)
    out = {}
    for i, split in enumerate(("train", "val", "test")):
        if c[split]:
            out[f"final_{split}_loss"] = float(sums[2 * i]) / c[split]
            out[f"final_{split}_acc"] = float(sums[1 + 2 * i]) / c[split]
    return out


def evaluate(A, X, params, transform, y, masks, n_train):
    """Forward without dropout: (logits, 6 metric sums)."""
    H = X
    for k, tf in enumerate(transform, start=1):
        W, b = params[2 * k - 2], params[2 * k - 1]
        Z = layer_output(A, layer_input(H, W, tf), W, b, tf)
        H = np.maximum(Z, 0.0)
    _, sums = head(Z, y, masks["train"], masks["val"], masks["test"], n_train, True)
    return Z, sums


def full_block(setup) -> dict:
    """The whole graph as one block (what the full-batch epochs and evaluations use)."""
    g, dt = setup.graph, setup.dtype
    A = Csr.of(g.A, dt)
    return {"A": A, "AT": A if g.symmetric else Csr.of(g.AT, dt), "X": features(g.X, dt),
            "rows": np.arange(g.n, dtype=np.int64), "y": g.y, "masks": g.masks,
            "n_train": int(g.masks["train"].sum())}


def batch_block(setup, e: int, X) -> dict:
    """Mini-batch ``e`` (``setup.batches``) as a block: its induced, renormalised A_hat."""
    mb, g = setup.batches, setup.graph
    nodes = mb["nodes"][e]
    A = Csr.of(mb["A"][e], setup.dtype)
    none = np.zeros(nodes.size, bool)
    train = g.masks["train"][nodes]
    AT = A if g.symmetric else Csr.of(mb["A"][e].T, setup.dtype)
    return {"A": A, "AT": AT, "X": take_rows(X, nodes),
            "rows": nodes, "y": g.y[nodes],
            "masks": {"train": train, "val": none, "test": none},
            "n_train": int(train.sum())}


def epochs_of(setup) -> int:
    """Units of a run: epochs, or mini-batch steps when the setup has batches."""
    return len(setup.batches["nodes"]) if setup.batches else setup.options.epochs


def run_serial(setup, *, callback=None) -> dict:
    """Train on the whole graph (or its batches): params, history, predictions, logits, final."""
    o = setup.options
    L, dims, p = setup.L, setup.dims, o.dropout
    full = full_block(setup)
    params = init_params(dims, o.seed, o.bias, setup.dtype) if o.init is None else \
        [p.copy() for p in o.init]          # a warm start (_setup.warm_params)
    state = {"t": 0, "m": [np.zeros_like(q) for q in params],
             "v": [np.zeros_like(q) for q in params]}
    history = []
    for e in range(epochs_of(setup)):
        t0 = time.perf_counter()
        blk = batch_block(setup, e, full["X"]) if setup.batches else full
        A, AT, X, rows, y, masks = (blk[k] for k in ("A", "AT", "X", "rows", "y", "masks"))
        ev = o.evaluates(e) and not setup.batches
        inputs, Zs, H = [], [], X
        for k, tf in enumerate(setup.transform, start=1):
            Ht = dropout(H, rows, o.seed, e, k - 1, p)
            W, b = params[2 * k - 2], params[2 * k - 1]
            Z = layer_output(A, layer_input(Ht, W, tf), W, b, tf)
            inputs.append(Ht)
            Zs.append(Z)
            H = np.maximum(Z, 0.0)
        G, sums = head(Zs[-1], y, masks["train"], masks["val"], masks["test"], blk["n_train"],
                       False)
        evs = evaluate(A, X, params, setup.transform, y, masks, blk["n_train"])[1] if ev \
            else [0.0] * 6
        grads = [None] * (2 * L)
        for k in range(L, 0, -1):
            dW, db, dH = backward(AT, G, G, inputs[k - 1], params[2 * k - 2], k > 1)
            grads[2 * k - 2], grads[2 * k - 1] = dW, db if o.bias else np.zeros(0, db.dtype)
            if k > 1:
                G = dropout(dH, rows, o.seed, e, k - 1, p) * (Zs[k - 2] > 0)
        grads, _ = unpack(pack(grads, sums + evs), params)
        update(params, grads, state, o)
        row = metrics_row(setup, e, np.asarray(sums + evs, float)[:NMETRICS], ev)
        row["time_s"] = time.perf_counter() - t0
        history.append(row)
        if callback is not None:
            callback(row)
    logits, fin = evaluate(full["A"], full["X"], params, setup.transform, full["y"],
                           full["masks"], full["n_train"])
    return {"params": params, "history": history, "predictions": logits.argmax(axis=1),
            "logits": logits, "final": final_row(setup, fin), "adam": state}
