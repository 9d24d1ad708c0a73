"""The linear dashboard panel draws the accuracy curve of the current run's history rows
(no cluster: the panel only reads the scheduler plugin's DashboardState)."""

from __future__ import annotations

import math
from types import SimpleNamespace

from daskhpc.dashboard import PLUGIN_NAME, DashboardState


def scheduler_with(state):
    return SimpleNamespace(plugins={PLUGIN_NAME: SimpleNamespace(state=state)}, workers={})


def test_panel_follows_the_accuracy_of_a_linear_run():
    from daskhpc.linear._dashboard import PANELS, AccuracyCurve

    assert PANELS["linear"][0] is AccuracyCurve
    st = DashboardState()
    panel = AccuracyCurve(scheduler_with(st))
    panel.update()
    assert panel.source.data["epoch"] == []
    st.publish("run", {"name": "linear K=4", "workflow": "linear", "workers": ["a", "b"]})
    st.publish("history", {"rows": [
        {"unit": 0, "epoch": 0, "train_accuracy": 0.81, "test_accuracy": 0.82,
         "sent_bytes": 1000, "time_s": 1.0},
        {"unit": 1, "epoch": 1, "train_accuracy": 0.84, "sent_bytes": 900}]})
    panel.update()
    d = panel.source.data
    assert d["epoch"] == [0, 1] and d["train"] == [0.81, 0.84] and d["total"] == [2, 2]
    assert d["test"][0] == 0.82 and math.isnan(d["test"][1])
    assert "epoch 1: train 0.8400" in panel.summary.text
    st.publish("run", {"name": "gcn", "workflow": "gcn", "workers": ["a"]})
    st.publish("history", {"rows": [{"unit": 0, "epoch": 0, "train_accuracy": 0.3}]})
    panel.update()
    assert panel.source.data["epoch"] == []
