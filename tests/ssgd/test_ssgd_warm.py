"""Warm start: ``fit(..., init=saved)`` / ``--init DIR`` starts from a saved model's rows
(matched by original id; unknown users and items start seeded), distributed == serial
bit for bit, and a model of another shape is refused with one line."""

from __future__ import annotations

import numpy as np
import pytest

from daskhpc import datasets, ssgd
from daskhpc.errors import InputError

OPTS = dict(epochs=2, partition="random", rank=8)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    d = tmp_path_factory.mktemp("mf")
    r = ssgd.serial_fit(datasets.path("ratings"), 2, **OPTS)
    r.save(d)
    return r, d


def test_a_warm_start_begins_where_the_saved_model_ended(saved):
    r, d = saved
    cold = ssgd.serial_fit(datasets.path("ratings"), 2, **OPTS)
    warm = ssgd.serial_fit(datasets.path("ratings"), 2, init=d, **OPTS)
    # the first epoch's loss of the warm run is below the cold run's last
    assert warm.history[0]["train_loss"] < cold.history[-1]["train_loss"]
    assert warm.history[-1]["test_rmse"] < cold.history[-1]["test_rmse"]


def test_distributed_warm_start_equals_serial(saved, client2):
    r, d = saved
    warm = ssgd.serial_fit(datasets.path("ratings"), 2, init=r, **OPTS)
    dist = ssgd.fit(datasets.path("ratings"), 2, init=str(d), client=client2, **OPTS)
    assert np.array_equal(warm.W, dist.W) and np.array_equal(warm.H, dist.H)


def test_unknown_users_start_seeded(saved, tmp_path):
    r, _ = saved
    f = tmp_path / "more.csv"
    f.write_text("user,item,rating\n1,1,4.0\n1,50,3.0\n424242,1,5.0\n424242,50,2.0\n")
    s = ssgd.prepare(str(f), 1, init=r, partition="random", rank=8, test_fraction=0)
    cold = ssgd.prepare(str(f), 1, partition="random", rank=8, test_fraction=0)
    W, H = s.start
    assert np.array_equal(W[0], r.W[r.index(0, [1])[0]])      # user 1: the saved row
    assert np.array_equal(W[1], cold_rows(cold)[0][1])        # user 424242: seeded
    assert np.array_equal(H[0], r.H[r.index(1, [1])[0]])


def cold_rows(s):
    from daskhpc.ssgd._serial import initial_factors

    return initial_factors(s)


def test_a_model_of_another_shape_is_refused(saved):
    _, d = saved
    with pytest.raises(InputError, match="init: the saved model has 8 columns"):
        ssgd.prepare(datasets.path("ratings"), 2, init=d, rank=16, partition="random")
