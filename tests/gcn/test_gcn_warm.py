"""Warm start: ``fit(..., init=saved)`` / ``--init DIR`` starts from a saved model's
weights, distributed == the serial reference bit for bit, and weights of other widths are refused
with one line."""

from __future__ import annotations

import numpy as np
import pytest

from daskhpc import gcn
from daskhpc.errors import InputError

OPTS = dict(epochs=3)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    d = tmp_path_factory.mktemp("gcn")
    r = gcn.serial_fit("cora", **OPTS)
    r.save(d)
    return r, d


def test_a_warm_start_begins_where_the_saved_model_ended(saved):
    r, d = saved
    warm = gcn.serial_fit("cora", init=d, **OPTS)
    assert warm.history[0]["train_loss"] < r.history[0]["train_loss"]
    assert warm.history[0]["train_eval_loss"] == pytest.approx(
        r.history[-1]["train_loss"], rel=0.5)            # the saved weights, not new ones


def test_distributed_warm_start_equals_serial(saved, client2):
    r, d = saved
    warm = gcn.serial_fit("cora", init=r, **OPTS)
    dist = gcn.fit("cora", nparts=2, init=str(d), client=client2, check_serial=True, **OPTS)
    # the partition-aware serial reference bit for bit, the textbook one to rounding (as
    # every GCN run: test_gcn_cluster.py)
    assert dist.report()["serial_check"]["identical"] is True
    assert all(np.allclose(a, b, rtol=0, atol=1e-10) for a, b in zip(warm.params, dist.params))


def test_weights_of_other_widths_are_refused(saved):
    _, d = saved
    with pytest.raises(InputError, match=r"init: the saved model's weights have shapes"):
        gcn.serial_fit("cora", init=d, layers=(32,), epochs=1)
