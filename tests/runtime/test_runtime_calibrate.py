"""calibrate(): alpha-beta from ping-pong transfers."""

from __future__ import annotations

import numpy as np
import pytest

from daskhpc.runtime import calibrate
from daskhpc.runtime._calibrate import _fit


def test_fit_recovers_a_known_model():
    m = np.array([8, 1 << 12, 1 << 16, 1 << 20, 1 << 22])
    alpha, beta = _fit(m, 5e-4 + 2e-10 * m)
    assert alpha == pytest.approx(5e-4, rel=1e-6)
    assert beta == pytest.approx(2e-10, rel=1e-6)


def test_fit_never_goes_negative():
    # Noisy times that fall with size would give a negative beta unconstrained.
    alpha, beta = _fit([8, 1 << 20], [2e-3, 1e-3])
    assert alpha > 0 and beta > 0


def test_fit_gives_a_positive_beta_where_noise_hides_the_bandwidth():
    # scheduling noise of ms against a bandwidth term of 0.4 ms at 1 MiB (the graph
    # exchange on a quiet machine printed "beta = 0.000e+00 s/byte")
    m = [8, 1 << 12, 1 << 16, 1 << 20]
    t = [5.6e-3, 5.2e-3, 5.9e-3, 5.4e-3]
    alpha, beta = _fit(m, t)
    assert beta > 0 and alpha > 0
    assert beta <= t[-1] / m[-1]          # no more than the largest message's time per byte


def test_fit_prices_large_messages_at_the_rate_behind_a_burst():
    # a 100 Mbit/s link shaped by a token bucket of 50 kB (virtual cluster, direct
    # exchange): 64 KiB goes at the wire's speed, 1 and 4 MiB at the rate (7.6e-8 s/byte)
    m = [8, 1 << 12, 1 << 16, 1 << 20, 1 << 22]
    t = [2.18e-3, 1.01e-3, 2.81e-3, 7.77e-2, 0.3166]
    alpha, beta = _fit(m, t)
    assert beta == pytest.approx((t[4] - t[3]) / (m[4] - m[3]))
    assert alpha + beta * m[4] == pytest.approx(t[4], rel=0.01)
    assert 0 < alpha < 3e-3


def test_calibrate_on_two_workers(client3, workers3):
    fit = calibrate(client3, workers=workers3[1:])
    assert fit["alpha"] > 0
    assert 1e-12 < fit["beta"] < 1e-6
    assert [s["bytes"] for s in fit["samples"]] == [8, 1 << 12, 1 << 16, 1 << 20, 1 << 22]
    for s in fit["samples"]:
        assert len(s["times"]) == 5 and all(t > 0 for t in s["times"])
        assert s["median"] == np.median(s["times"])
        assert s["bytes"] < s["wire_bytes"] < s["bytes"] + 1024


def test_calibrate_needs_two_workers(client3):
    with pytest.raises(ValueError, match="two workers"):
        calibrate(client3, workers=["tcp://127.0.0.1:1"])


def test_program_messages_cost_less_pushed_than_scheduled(client3):
    from daskhpc.runtime import calibrate_exchange, worker_addresses

    pair = worker_addresses(client3)[:2]
    graph = calibrate_exchange(client3, "graph", sizes=(1024,), steps=30, workers=pair)
    direct = calibrate_exchange(client3, "direct", sizes=(1024,), steps=30, workers=pair)
    g, d = graph["samples"][0]["seconds"], direct["samples"][0]["seconds"]
    # a pushed message skips the scheduler round trip and the get_data request
    assert 0 < d < g, (d, g)
