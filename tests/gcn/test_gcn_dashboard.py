"""The GCN dashboard panel draws the current run's history rows (no cluster: the panel
only reads the scheduler plugin's DashboardState), and fit's one-line errors."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from daskhpc.dashboard import PLUGIN_NAME, DashboardState
from daskhpc.errors import InputError


def scheduler_with(state):
    return SimpleNamespace(plugins={PLUGIN_NAME: SimpleNamespace(state=state)}, workers={})


def test_panel_follows_the_history_of_a_gcn_run():
    from daskhpc.gcn._dashboard import PANELS, AccuracyCurve

    assert PANELS["gcn"][0] is AccuracyCurve
    st = DashboardState()
    panel = AccuracyCurve(scheduler_with(st))
    panel.update()
    assert panel.source.data["epoch"] == []                      # nothing yet
    st.publish("run", {"name": "gcn K=2", "workflow": "gcn", "workers": ["a", "b"]})
    st.publish("history", {"rows": [
        {"unit": 0, "epoch": 0, "train_loss": 1.9, "train_acc": 0.2, "val_acc": 0.3,
         "test_acc": 0.31, "val_loss": 1.8, "time_s": 0.004},
        {"unit": 1, "epoch": 1, "train_loss": 1.7, "time_s": 0.005}]})    # not evaluated
    panel.update()
    d = panel.source.data
    assert d["epoch"] == [0, 1] and d["total"] == [2, 2]
    assert d["val_acc"][0] == 0.3 and math.isnan(d["val_acc"][1])
    assert d["time_ms"] == [4.0, 5.0]
    assert "epoch 0: validation accuracy 0.3000, test 0.3100" in panel.summary.text
    st.publish("history", {"rows": [{"unit": 2, "epoch": 2, "train_loss": 1.5,
                                     "val_acc": 0.5, "test_acc": 0.52}]})
    panel.update()
    assert panel.source.data["epoch"] == [0, 1, 2] and "epoch 2" in panel.summary.text
    # another workflow's run: the panel shows nothing of it
    st.publish("run", {"name": "ssgd", "workflow": "ssgd", "workers": ["a"]})
    st.publish("history", {"rows": [{"unit": 0, "epoch": 0, "train_loss": 9.0}]})
    from daskhpc.gcn._dashboard import curves

    assert curves(st)["epoch"] == []


def test_fit_refuses_bad_arguments_in_one_line():
    from daskhpc.gcn import fit

    with pytest.raises(InputError, match="nparts="):
        fit("cora", 4)
    with pytest.raises(InputError, match="--max-restarts must be at least 0, not -1"):
        fit("cora", nparts=2, max_restarts=-1)
    with pytest.raises(InputError, match="in_loop"):
        fit("cora", nparts=2, in_loop="sometimes")


def test_fit_refuses_bad_minibatch_options():
    from daskhpc.gcn._job import prepare_run

    with pytest.raises(InputError, match="unknown minibatch option"):
        prepare_run("cora", None, None, None, 2, {"batchsize": 3}, None, False, None, {})
    with pytest.raises(InputError, match="batch_size > 0"):
        prepare_run("cora", None, None, None, 2, {"batch_size": -1, "shp": False}, None,
                    False, None, {"partition": "rp"})


def test_worker_warm_up_runs_the_program():
    """What every worker runs first: a tiny directed graph through both orders of the
    program."""
    from daskhpc.gcn._job import warm_up

    assert warm_up() is True
