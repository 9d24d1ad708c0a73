"""Training: the partition-aware program (run_local) against the serial reference, the
exact gradient on directed graphs, dropout masks, checkpoints, and accuracy."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from daskhpc.comm import run_local
from daskhpc.gcn import _kernels as kn
from daskhpc.gcn._model import Csr, backward, head, init_params, layer, update
from daskhpc.gcn._program import _save, assemble, program, row, statics
from daskhpc.gcn._serial import run_serial
from daskhpc.gcn._setup import prepare


def run_program(s, prog=None, starts=None):
    prog = prog or program(s)
    finals, reports = run_local(prog, statics(s), starts)
    return assemble(s, finals), [row(s, prog.first_unit + u, r) for u, r in enumerate(reports)]


def rel(a, b):
    return max(float(np.abs(x - y).max() / max(np.abs(y).max(), 1e-300))
               for x, y in zip(a, b) if y.size)


@pytest.fixture(scope="module")
def cora_serial():
    s = prepare("cora", 1, epochs=30)
    return run_serial(s)


@pytest.mark.parametrize("K, partition", [(1, "rp"), (2, "hp"), (4, "gp"), (8, "rp")])
def test_program_matches_serial(cora_serial, K, partition):
    s = prepare("cora", K, partition=partition, epochs=30)
    out, hist = run_program(s)
    ser = cora_serial
    assert rel(out["params"], ser["params"]) < 1e-10
    assert np.array_equal(out["predictions"], ser["predictions"])
    assert len(hist) == 30
    assert [h.get("test_acc") for h in hist] == [h.get("test_acc") for h in ser["history"]]
    if K == 1:    # the same arithmetic in the same order: the same bits
        assert all(np.array_equal(a, b) for a, b in zip(out["params"], ser["params"]))
        assert hist[-1]["final_test_acc"] == ser["final"]["final_test_acc"]


def test_rerun_is_bitwise_identical():
    s = prepare("cora", 4, partition="hp", epochs=5)
    a, ha = run_program(s)
    b, hb = run_program(s)
    assert all(np.array_equal(x, y) for x, y in zip(a["params"], b["params"]))
    assert np.array_equal(a["logits"], b["logits"]) and ha == hb


def directed_problem(n=40, seed=1):
    rng = np.random.default_rng(seed)
    A = sp.random_array((n, n), density=0.08, random_state=rng, format="csr")
    X = rng.random((n, 5))
    y = rng.integers(0, 3, n)
    return A, X, y, (np.arange(0, n // 2), np.arange(n // 2, 3 * n // 4),
                     np.arange(3 * n // 4, n))


def test_directed_program_matches_serial_and_plans_both_patterns():
    A, X, y, split = directed_problem()
    s = prepare(A, 3, features=X, labels=y, split=split, partition="random", epochs=8,
                layers=(6, 4))
    assert not s.graph.symmetric
    out, _ = run_program(s)
    ser = run_serial(s)
    assert rel(out["params"], ser["params"]) < 1e-10
    assert np.array_equal(out["predictions"], ser["predictions"])
    sym = prepare(A, 3, features=X, labels=y, split=split, partition="random", epochs=2,
                  symmetrize=True)
    assert sym.graph.symmetric


def test_exact_gradient_on_a_directed_graph():
    """Backward with A_hat^T is the gradient of the loss: central differences agree."""
    A, X, y, split = directed_problem(n=25, seed=4)
    s = prepare(A, 1, features=X, labels=y, split=split, epochs=1, layers=(4,), dropout=0.0)
    g = s.graph
    Ac, ATc, Xc = Csr.of(g.A), Csr.of(g.AT), Csr.of(g.X)
    params = init_params(s.dims, 3)
    params[1][:] = 0.1
    tr, va, te = g.masks["train"], g.masks["val"], g.masks["test"]
    n_train = int(tr.sum())

    def loss(ps):
        Z1 = layer(Ac, Xc, ps[0], ps[1])
        Z2 = layer(Ac, np.maximum(Z1, 0), ps[2], ps[3])
        return head(Z2, g.y, tr, va, te, n_train, False)[1][0] / n_train, Z1, Z2

    _, Z1, Z2 = loss(params)
    G2, _ = head(Z2, g.y, tr, va, te, n_train, False)
    dW2, db2, dH = backward(ATc, G2, G2, np.maximum(Z1, 0), params[2], True)
    G1 = dH * (Z1 > 0)
    dW1, db1, _ = backward(ATc, G1, G1, Xc, params[0], False)
    h = 1e-6
    for which, grad in ((0, dW1), (2, dW2), (3, db2)):
        for idx in [(0, 0), (1, 2), (2, 1)][: 3 if grad.ndim == 2 else 0] or [(0,), (1,)]:
            pp = [p.copy() for p in params]
            pm = [p.copy() for p in params]
            pp[which][idx] += h
            pm[which][idx] -= h
            num = (loss(pp)[0] - loss(pm)[0]) / (2 * h)
            assert abs(num - grad[idx]) < 1e-6 * max(1.0, abs(num))
    # and with A_hat (not transposed) the gradient would be wrong on this graph
    wrong = backward(Ac, G2, G2, np.maximum(Z1, 0), params[2], True)[0]
    assert np.abs(wrong - dW2).max() > 1e-6


def test_dropout_masks_do_not_depend_on_the_partition():
    rows = np.arange(50, dtype=np.int64)
    full = kn.keep_dense(7, 3, 1, rows, 16, 0.5)
    some = kn.keep_dense(7, 3, 1, rows[[40, 3, 17]], 16, 0.5)
    assert np.array_equal(full[[40, 3, 17]], some)
    assert 0.4 < full.mean() < 0.6
    assert not np.array_equal(full, kn.keep_dense(7, 4, 1, rows, 16, 0.5))   # per epoch
    assert not np.array_equal(full, kn.keep_dense(7, 3, 0, rows, 16, 0.5))   # per layer


def test_resume_from_a_checkpoint_is_bitwise_the_same():
    whole = prepare("cora", 3, partition="rp", epochs=6)
    ref, href = run_program(whole)
    first = prepare("cora", 3, partition="rp", epochs=3)
    prog = program(first)
    prog.final = _save                      # the checkpoint after epoch 2's update
    saved, _ = run_local(prog, statics(first))
    out, hist = run_program(whole, program(whole, first_unit=3), saved)
    assert all(np.array_equal(a, b) for a, b in zip(out["params"], ref["params"]))
    assert hist == href[3:]


def _update_in_numpy(params, grads, state, opts):
    """The optimiser step as array expressions (PyTorch's Adam order), the reference."""
    wd, (b1, b2) = opts.weight_decay, (0.9, 0.999)
    grads = [g + wd * p if (i < 2 and wd) else g for i, (p, g) in enumerate(zip(params, grads))]
    if opts.optimizer == "sgd":
        for p, g in zip(params, grads):
            p -= opts.lr * g
        return
    state["t"] += 1
    c1, c2 = 1.0 - b1 ** state["t"], 1.0 - b2 ** state["t"]
    for p, g, m, v in zip(params, grads, state["m"], state["v"]):
        m *= b1
        m += (1.0 - b1) * g
        v *= b2
        v += (1.0 - b2) * (g * g)
        p -= (opts.lr / c1) * (m / (np.sqrt(v) / math.sqrt(c2) + 1e-8))   # Python floats


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("optimizer, wd", [("adam", 5e-4), ("adam", 0.0), ("sgd", 5e-4)])
def test_fused_optimiser_step_equals_the_array_expressions(dtype, optimizer, wd):
    from types import SimpleNamespace

    opts = SimpleNamespace(weight_decay=wd, optimizer=optimizer, lr=0.01)
    ours = init_params([50, 8, 3], 0, True, dtype) + [np.zeros(0, dtype)]
    ref = [p.copy() for p in ours]
    states = [{"t": 0, "m": [np.zeros_like(p) for p in ps],
               "v": [np.zeros_like(p) for p in ps]} for ps in (ours, ref)]
    rng = np.random.default_rng(3)
    for _ in range(20):
        grads = [rng.standard_normal(p.shape).astype(dtype) for p in ours]
        update(ours, [g.copy() for g in grads], states[0], opts)
        _update_in_numpy(ref, grads, states[1], opts)
    for a, b in zip(ours + states[0]["m"] + states[0]["v"], ref + states[1]["m"] + states[1]["v"]):
        assert a.dtype == b.dtype and np.array_equal(a, b)


def test_sgd_option_trains():
    s = prepare("cora", 2, partition="rp", epochs=20, optimizer="sgd", lr=5.0, dropout=0.0)
    out, hist = run_program(s)
    assert hist[-1]["train_loss"] < hist[0]["train_loss"]
    assert rel(out["params"], run_serial(s)["params"]) < 1e-10


# Cora: the target (PyG: 0.819 +- 0.004). Facebook: PyG on this split (the
# datasets.class_split draw) reached 0.664 over 5 seeds (docs/gcn.md); the 0.678 was
# measured on another draw of 20 per class / 500 / 1000.
@pytest.mark.slow
@pytest.mark.parametrize("name, target", [("cora", 0.815), ("facebook", 0.664)])
def test_accuracy_over_ten_seeds(graphs, name, target, capsys):
    """200 epochs, 10 seeds: the final model's mean test accuracy (and, as PyG's example
    reports it, the test accuracy at the best validation epoch)."""
    from daskhpc.gcn._result import best_val

    g = graphs(name)
    final, selected = [], []
    for seed in range(10):
        out = run_serial(prepare(g, 1, seed=seed))
        final.append(out["final"]["final_test_acc"])
        selected.append(best_val(out["history"])["test_acc_at_best_val"])
    with capsys.disabled():
        print(f"\n{name}: final test accuracy over 10 seeds {np.mean(final):.4f} +- "
              f"{np.std(final):.4f}; at the best validation epoch {np.mean(selected):.4f} +- "
              f"{np.std(selected):.4f}")
    assert np.mean(final) >= target
