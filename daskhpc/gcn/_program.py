"""The distributed GCN epoch as a :class:`daskhpc.comm.Program` (Algorithms 1-2).

Part m owns rows of A_hat, H^k, Z^k and G^k; the weights and Adam's moments are
replicated (W^1 with sparse features: only the rows the part's features have,
``_plan.first_layer_rows``). Steps of an epoch:

1. ``forward k``: receive the input rows the part's A_hat rows need (eq. (9)), Z_m =
   (A_mm H_m + sum_n A_mn H_nm) W^k + b^k (eq. (7)), send dropout(ReLU(Z))'s rows
   (eq. (8)); at k = L the loss and G^L (eq. (2)), sent along A_hat^T.
2. ``backward k`` (k = L .. 2): P = (A_hat^T)_m G^k, dW^k, db^k (eq. (4)), G^{k-1} =
   dropout'(P W^T) * ReLU'(Z^{k-1}) (eq. (3)); send its rows.
3. ``allreduce``: layer 1's backward, then [dW, db, metric sums] by recursive doubling
   (part-id order); the last step updates the weights and sends the next epoch's first
   exchange.

Evaluated epochs carry the rows of the pass without dropout too (messages twice as
wide); after the last epoch a forward pass without dropout gives the predictions."""

from __future__ import annotations

from functools import partial

import numpy as np

from daskhpc.comm import Plan, Program, tree_sum

from ._model import (NMETRICS, Csr, backward, dropout, head, init_params, layer_input,
                     layer_output, pack, take_rows, unpack, update)
from ._parts import statics  # noqa: F401 - the skeleton's _program.statics
from ._plan import exchange_plans, first_layer_rows, vector_words
from ._serial import epochs_of, final_row, metrics_row


# -- step functions (module level: they are pickled to workers) ---------------------------

def _init(ctx, start):
    s = ctx.static
    o = s["options"]
    params = init_params(s["dims"], o.seed, o.bias, o.dtype) if o.init is None else \
        [p.copy() for p in o.init]          # a warm start (_setup.warm_params)
    adam = {"t": 0, "m": [np.zeros_like(q) for q in params],
            "v": [np.zeros_like(q) for q in params]}
    if start is not None:
        params = [np.array(start[f"p{i}"]) for i in range(len(params))]
        n = len(params)
        adam = {"t": int(start["t"][0]), "m": [np.array(start[f"m{i}"]) for i in range(n)],
                "v": [np.array(start[f"v{i}"]) for i in range(n)]}
    ctx.state.update(params=params, adam=adam)


def _save(ctx):
    st = ctx.state
    out = {f"p{i}": p for i, p in enumerate(st["params"])}
    out.update({f"m{i}": m for i, m in enumerate(st["adam"]["m"])})
    out.update({f"v{i}": v for i, v in enumerate(st["adam"]["v"])})
    out["t"] = np.array([st["adam"]["t"]], np.int64)
    return out


def _final(ctx):
    st, w1 = ctx.state, ctx.static.get("w1")
    return {"rows": ctx.static["rows"], "logits": st["logits"], "params": st["params"],
            "keep": None if w1 is None else w1["keep"]}


def _blk(static, epoch):
    """The part's data of ``epoch``: its mini-batch, or the whole graph."""
    batches = static.get("batches")
    return batches[epoch] if batches is not None and epoch < len(batches) else static


def _outbox(send, blocks):
    """{dst: tuple of the rows ``send[dst]`` of every block}."""
    return {dst: tuple(take_rows(b, idx) for b in blocks) for dst, idx in send.items()}


def _extend(own, received):
    if isinstance(own, Csr):
        return Csr.stack([own, *received])
    return np.vstack([own, *received]) if received else own


def _start(ctx, epoch, train, evaluate):
    """Layer 1's input rows of ``epoch``: from dropout(X) (train) and X (evaluate)."""
    s, st, blk = ctx.static, ctx.state, _blk(ctx.static, epoch)
    o = s["options"]
    W1, tf = st["params"][0], s["transform"][0]
    st["inputs"] = [dropout(blk["X"], blk["rows"], o.seed, epoch, 0, o.dropout)] if train else []
    st["xin"] = layer_input(st["inputs"][0], W1, tf) if train else None
    st["xin_eval"] = layer_input(blk["X"], W1, tf) if evaluate else None
    st["Z"] = []
    blocks = [b for b in (st["xin"], st["xin_eval"]) if b is not None]
    return _outbox(blk["fsend"], blocks)


def _forward(ctx, k, epoch, train, evaluate):
    s, st, blk = ctx.static, ctx.state, _blk(ctx.static, epoch)
    o, L = s["options"], len(s["dims"]) - 1
    W, b, tf = st["params"][2 * k - 2], st["params"][2 * k - 1], s["transform"][k - 1]
    got = list(ctx.inbox.values())
    blocks = []
    if train:
        Z = layer_output(blk["A"], _extend(st["xin"], [m[0] for m in got]), W, b, tf)
        st["Z"].append(Z)
    if evaluate:
        j = 1 if train else 0
        Ze = layer_output(blk["A"], _extend(st["xin_eval"], [m[j] for m in got]), W, b, tf)
    if k < L:
        W2, tf2 = st["params"][2 * k], s["transform"][k]
        if train:
            Ht = dropout(np.maximum(Z, 0.0), blk["rows"], o.seed, epoch, k, o.dropout)
            st["inputs"].append(Ht)
            st["xin"] = layer_input(Ht, W2, tf2)
            blocks.append(st["xin"])
        if evaluate:
            st["xin_eval"] = layer_input(np.maximum(Ze, 0.0), W2, tf2)
            blocks.append(st["xin_eval"])
        return _outbox(blk["fsend"], blocks)
    y, tr, va, te = blk["y"], blk["train"], blk["val"], blk["test"]
    ev = head(Ze, y, tr, va, te, blk["n_train"], True)[1] if evaluate else [0.0] * 6
    if not train:                                   # the final evaluation
        st["logits"] = Ze
        ctx.report(final=ev)
        return None
    G, sums = head(Z, y, tr, va, te, blk["n_train"], False)
    st["G"], st["sums"] = G, sums + ev
    st["grads"] = [None] * (2 * L)
    return _outbox(blk["bsend"], [G])


def _backward_layer(ctx, k, epoch):
    """Layer k's backward from the received G^k rows; returns G^{k-1}'s own rows."""
    s, st, blk = ctx.static, ctx.state, _blk(ctx.static, epoch)
    o = s["options"]
    Gext = _extend(st["G"], [m[0] for m in ctx.inbox.values()])
    W = st["params"][2 * k - 2]
    dW, db, dH = backward(blk["AT"], Gext, st["G"], st["inputs"][k - 1], W, k > 1)
    st["grads"][2 * k - 2], st["grads"][2 * k - 1] = dW, db if o.bias else np.zeros(0, db.dtype)
    if k == 1:
        return None
    G = dropout(dH, blk["rows"], o.seed, epoch, k - 1, o.dropout) * (st["Z"][k - 2] > 0)
    st["G"] = G
    return G


def _backward(ctx, k, epoch):
    G = _backward_layer(ctx, k, epoch)
    return _outbox(_blk(ctx.static, epoch)["bsend"], [G])


def _gradients(ctx, epoch):
    """The allreduce's contribution: layer 1's backward, then [dW, db, metric sums]; with
    ``w1`` dW^1 stays out of the vector and its shared rows go to the parts keeping them."""
    st, w1 = ctx.state, ctx.static.get("w1")
    _backward_layer(ctx, 1, epoch)
    st.pop("G", None)
    grads, sums = st.pop("grads"), st.pop("sums")
    if w1 is None:
        return pack(grads, sums)
    st["dW1"] = dW1 = grads[0]
    return pack(grads[1:], sums), {n: dW1[r].ravel() for n, r in w1["send"].items()}


def _first_layer_total(ctx, own, w1):
    """dW^1's total on the part's kept rows, in place: the dense allreduce's arithmetic."""
    shared = w1["shared"]
    if shared.size:
        stack = [np.zeros((shared.size, own.shape[1]), own.dtype) for _ in range(ctx.nparts)]
        stack[ctx.part] = own[shared]
        for n, got in ctx.inbox.items():
            stack[n][w1["recv"][n]] = got.reshape(-1, own.shape[1])
        total = tree_sum(stack)
    np.add(own, 0.0, out=own)     # x + 0.0: what a zero added in the tree does to -0.0
    if shared.size:
        own[shared] = total
    return own


def _apply(ctx, total, epoch):
    """Every part takes the same optimiser step with the reduced gradients."""
    st, w1 = ctx.state, ctx.static.get("w1")
    if w1 is None:
        grads, sums = unpack(total, st["params"])
        update(st["params"], grads, st["adam"], ctx.static["options"])
    else:
        grads, sums = unpack(total, st["params"][1:])
        grads.insert(0, _first_layer_total(ctx, st.pop("dW1"), w1))
        update(st["params"], grads, st["adam"], ctx.static["options"], rows0=w1["keep"])
    ctx.report(epoch=int(epoch), sums=[float(v) for v in sums])
    st["inputs"] = st["Z"] = st["xin"] = st["xin_eval"] = None


def _words(plan: Plan, words: int, name: str, word_bytes: int) -> Plan:
    return Plan(plan.nparts, plan.phase, plan.src, plan.dst, plan.ptr, plan.indices,
                nphases=1, words_per_unit=int(words), word_bytes=word_bytes, name=name)


def program(setup, first_unit: int = 0) -> Program:
    """The steps of epochs (or mini-batch steps) ``first_unit`` .. E-1 and the final
    evaluation on the whole graph.

    Examples
    --------
    >>> from daskhpc import gcn
    >>> from daskhpc.comm import run_local
    >>> s = gcn.prepare("cora", 2, partition="rp", epochs=2)
    >>> finals, reports = run_local(gcn.program(s), gcn.statics(s))   # = local_fit
    >>> len(reports), sorted(reports[0])
    (2, [0, 1])
    """
    o, K, d, L = setup.options, setup.K, setup.dims, setup.L
    wb = setup.word_bytes                # 8 (float64) or 4 (float32) bytes a word
    E = epochs_of(setup)
    mb = setup.batches
    w = (None, *setup.widths)          # w[k]: words per row of layer k's forward exchange
    full = exchange_plans(setup)

    def plans(e):
        return mb["plans"][e] if mb and e < E else full

    def evaluates(e):
        return o.evaluates(e) and not mb
    nvec = vector_words(setup)
    w1 = first_layer_rows(setup)

    def fwd(e, width, what):
        return _words(plans(e)["forward"], width, what, wb)

    def bwd(e, width, what):
        return _words(plans(e)["backward"], width, what, wb)

    prog = Program(K, "gcn", init=_init, final=_final, save=_save, first_unit=first_unit)
    if first_unit >= E:
        # every epoch is done (a checkpoint at the end): only the final evaluation
        prog.step(_start, E, False, True, sends=fwd(E, w[1], "layer-1 rows"), label="start")
    else:
        ev0 = evaluates(first_unit)
        prog.step(_start, first_unit, True, ev0,
                  sends=fwd(first_unit, w[1] * (1 + ev0), "layer-1 rows"), label="start")
    for e in range(first_unit, E):
        ev = evaluates(e)
        for k in range(1, L + 1):
            sends = fwd(e, w[k + 1] * (1 + ev), f"layer-{k + 1} rows") if k < L else \
                bwd(e, d[L], f"G{L} rows")
            prog.step(_forward, k, e, True, ev, sends=sends, label=f"forward-{k}")
        for k in range(L, 1, -1):
            prog.step(_backward, k, e, sends=bwd(e, d[k - 1], f"G{k - 1} rows"),
                      label=f"backward-{k}")
        last = e == E - 1
        nev = (not last) and evaluates(e + 1)
        prog.allreduce(partial(_gradients, epoch=e), partial(_apply, epoch=e), words=nvec,
                       word_bytes=wb, name="dW allreduce", report=not last,
                       sends=None if w1 is None else w1["plan"])
        # the next epoch's first exchange (or the final evaluation's) in the same step
        nxt = (e + 1, False, True) if last else (e + 1, True, nev)
        prog.fuse(_start, *nxt, sends=fwd(e + 1, w[1] * (1 + nev) if not last else w[1],
                                          "layer-1 rows"), after_report=True)
    for k in range(1, L + 1):          # the final evaluation on the whole graph
        prog.step(_forward, k, E, False, True,
                  sends=fwd(E, w[k + 1], f"layer-{k + 1} rows") if k < L else None,
                  report=k == L, label=f"final-{k}")
    return prog


def row(setup, unit: int, reports: dict) -> dict:
    """The history row of epoch ``unit`` from the parts' reports."""
    first = reports[min(reports)]
    out = metrics_row(setup, unit, np.asarray(first["sums"], float)[:NMETRICS],
                      setup.options.evaluates(unit) and not setup.batches)
    if "final" in first:
        tot = np.zeros(6)
        for p in sorted(reports):
            tot = tot + np.asarray(reports[p]["final"], float)
        out.update(final_row(setup, tot))
    return out


def assemble(setup, finals) -> dict:
    """Weights (part 0's copy; every part holds the same, but for W^1's rows that only
    their parts keep), logits and predictions."""
    n, C = setup.graph.n, setup.dims[-1]
    logits = np.empty((n, C), setup.dtype)
    for f in finals:
        logits[f["rows"]] = f["logits"]
    params = list(finals[0]["params"])
    if finals[0].get("keep") is not None:
        params[0] = params[0].copy()
        for f in finals:
            params[0][f["keep"]] = f["params"][0][f["keep"]]
    return {"params": params, "logits": logits, "predictions": logits.argmax(axis=1)}
