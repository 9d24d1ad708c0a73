"""The numba kernel, the serial reference and the quality target on ml-latest-small."""

from __future__ import annotations

import numpy as np

from daskhpc.ssgd import serial_fit
from daskhpc.ssgd._kernels import block_seed, init_rows, learning_rate, sgd_block, sse_block


def test_one_update_is_the_issue_formula():
    W = np.array([[0.5, 1.0]])
    H = np.array([[2.0, -1.0]])
    w0, h0 = W[0].copy(), H[0].copy()
    lr, reg, r = 0.1, 0.05, 4.0
    loss = sgd_block(W, H, np.array([0]), np.array([0]), np.array([r]), lr, reg,
                     block_seed(0, 0, 0, 0))
    e = r - w0 @ h0
    assert np.allclose(W[0], w0 + lr * (e * h0 - reg * w0))
    assert np.allclose(H[0], h0 + lr * (e * w0 - reg * h0))       # the old w_i
    assert np.isclose(loss, 0.5 * (e * e + reg * (w0 @ w0 + h0 @ h0)))


def test_update_order_is_a_seeded_permutation():
    rng = np.random.default_rng(0)
    n = 200
    li, lj, val = rng.integers(5, size=n), rng.integers(7, size=n), rng.random(n) * 5

    def run(seed):
        W, H = init_rows(1, 0, np.arange(5), 4, 0.5), init_rows(1, 1, np.arange(7), 4, 0.5)
        sgd_block(W, H, li, lj, val, 0.05, 0.1, seed)
        return W, H

    a, b, c = run(block_seed(0, 1, 2, 3)), run(block_seed(0, 1, 2, 3)), run(block_seed(0, 2, 2, 3))
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert not np.array_equal(a[0], c[0])             # another epoch, another order


def test_initial_rows_depend_only_on_the_row_id():
    a = init_rows(3, 1, np.array([5, 9, 2]), 8, 0.4)
    b = init_rows(3, 1, np.array([2, 5]), 8, 0.4)
    assert np.array_equal(a[0], b[1]) and np.array_equal(a[2], b[0])
    assert a.min() >= 0 and a.max() < 0.4
    assert not np.array_equal(init_rows(3, 0, np.array([5]), 8, 0.4), a[:1])   # W != H


def test_learning_rate_schedule():
    assert learning_rate(0.02, 0) == 0.02
    assert np.isclose(learning_rate(0.02, 4), 0.02 / (1 + 0.05 * 8))


def test_sse_clips_predictions():
    W, H = np.array([[2.0]]), np.array([[4.0]])
    i = np.array([0])
    assert sse_block(W, H, i, i, np.array([5.0]), 0.5, 5.0) == 0.0      # 8 clipped to 5


def test_rmse_beats_the_global_mean_by_ten_percent(ml_small):
    # The issue's target, with the default --lr/--reg: 10 % held out (seed 0), 20 epochs.
    # The distributed run reproduces these factors bit for bit (test_ssgd_distributed).
    res = serial_fit(ml_small, 4, partition="random", epochs=20, test_fraction=0.1)
    q = res.report()["quality"]
    assert q["final_test_rmse"] <= 0.9 * q["global_mean_rmse"]
    assert len(q["test_rmse"]) == 20 and q["test_rmse"][-1] < q["test_rmse"][0]
    assert res.train_loss[-1] < res.train_loss[0]
