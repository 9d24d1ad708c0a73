"""``shuffle=False`` (``--no-shuffle``): every block's ratings in their stored order, the
same on every part as in the serial reference (CESSGD's -DNO_SHUFFLE, the
order Surprise's SVD visits)."""

from __future__ import annotations

import numpy as np
import pytest

from daskhpc.ssgd import fit, serial_fit
from daskhpc.ssgd._kernels import block_seed, sgd_block
from daskhpc.testing import workflow_call


def _stored_order(W, H, li, lj, val, lr, reg):
    """The unshuffled sweep written out in Python (eqs. (3), (4), stored order)."""
    loss = 0.0
    for r in range(val.size):
        i, j = li[r], lj[r]
        dot = ww = hh = 0.0
        for f in range(W.shape[1]):
            dot += W[i, f] * H[j, f]
            ww += W[i, f] * W[i, f]
            hh += H[j, f] * H[j, f]
        e = val[r] - dot
        loss += 0.5 * (e * e + reg * (ww + hh))
        for f in range(W.shape[1]):
            w, h = W[i, f], H[j, f]
            W[i, f] = w + lr * (e * h - reg * w)
            H[j, f] = h + lr * (e * w - reg * h)
    return loss


def test_the_kernel_visits_the_stored_order():
    rng = np.random.default_rng(0)
    W0, H0 = rng.random((5, 3)), rng.random((4, 3))
    li, lj = rng.integers(0, 5, 40), rng.integers(0, 4, 40)
    val = rng.random(40) * 5
    want_W, want_H = W0.copy(), H0.copy()
    want = _stored_order(want_W, want_H, li, lj, val, 0.05, 0.1)
    W, H = W0.copy(), H0.copy()
    got = sgd_block(W, H, li, lj, val, 0.05, 0.1, block_seed(1, 2, 3, 4), False)
    assert got == want and np.array_equal(W, want_W) and np.array_equal(H, want_H)
    # the shuffled sweep of the same ratings is another order
    Ws, Hs = W0.copy(), H0.copy()
    sgd_block(Ws, Hs, li, lj, val, 0.05, 0.1, block_seed(1, 2, 3, 4), True)
    assert not np.array_equal(Ws, W)
    # the biased kernel with zero biases, mu 0 and reg_bias 0 is the unbiased one
    Wb = np.hstack([W0, np.zeros((5, 1))])
    Hb = np.hstack([H0, np.zeros((4, 1))])
    sgd_block(Wb, Hb, li, lj, val, 0.05, 0.1, block_seed(0, 0, 0, 0), False, 0.0, 0.0, True)
    assert np.isfinite(Wb).all() and not np.array_equal(Wb[:, :3], W0)


@pytest.mark.parametrize("strategy", ["dsgd", "hc"])
def test_unshuffled_distributed_equals_serial_bit_for_bit(client2, tiny, exchange, strategy):
    kw = dict(strategy=strategy, epochs=3, partition="random", test_fraction=0.25)
    res = fit(tiny, 2, client=client2, shuffle=False, check_serial=True, **kw)
    chk = res.report()["serial_check"]
    assert chk["identical"] and chk["history_identical"]
    assert res.report()["shuffle"] is False
    ser = serial_fit(tiny, 2, shuffle=False, **kw)
    assert np.array_equal(res.W, ser.W) and np.array_equal(res.H, ser.H)
    shuffled = serial_fit(tiny, 2, **kw)                        # the default shuffles
    assert not np.array_equal(shuffled.W, ser.W)


def test_the_flag(ml_small):
    wf, call, _ = workflow_call("plan", "ssgd", [ml_small.path, "--parts", "2",
                                                 "--no-shuffle"])
    assert call.options.shuffle is False
    wf, call, _ = workflow_call("plan", "ssgd", [ml_small.path, "--parts", "2"])
    assert call.options.shuffle is True
