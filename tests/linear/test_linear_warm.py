"""Warm start: ``fit(..., init=saved)`` / ``--init DIR`` starts from a saved model's
weights, the cluster equals ``fit_local`` bit for bit, and a model of other classes or
width is refused with one line."""

from __future__ import annotations

import numpy as np
import pytest

from daskhpc import datasets, linear
from daskhpc.errors import InputError

OPTS = dict(epochs=1, batch=64)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    d = tmp_path_factory.mktemp("lin")
    r = linear.serial_fit(datasets.path("libsvm"), nparts=2, **OPTS)
    r.save(d)
    return r, d


def test_a_warm_start_begins_with_the_saved_weights(saved):
    r, d = saved
    cold = linear.serial_fit(datasets.path("libsvm"), nparts=2, **OPTS)
    warm = linear.serial_fit(datasets.path("libsvm"), nparts=2, init=d, **OPTS)
    assert warm.history[0]["train_loss"] < cold.history[0]["train_loss"]
    assert not np.array_equal(warm.w, r.w)                # it trained on


def test_the_cluster_warm_start_equals_fit_local(saved, client2):
    r, d = saved
    local = linear.fit_local(datasets.path("libsvm"), nparts=2, init=r, **OPTS)
    dist = linear.fit(datasets.path("libsvm"), nparts=2, init=str(d), client=client2, **OPTS)
    assert np.array_equal(local.w, dist.w)


def test_a_model_of_another_width_is_refused(saved, tmp_path):
    r, _ = saved
    f = tmp_path / "narrow.libsvm"
    f.write_text("+1 1:1 2:1\n-1 3:1\n")
    with pytest.raises(InputError, match="init: the saved model has 124 weights"):
        linear.serial_fit(str(f), nparts=1, init=r, epochs=1)
