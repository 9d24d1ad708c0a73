"""The allreduce dashboard panel draws the current run's history rows (no cluster: the
panel only reads the scheduler plugin's DashboardState)."""

from __future__ import annotations

from types import SimpleNamespace

from daskhpc.dashboard import PLUGIN_NAME, DashboardState


def scheduler_with(state):
    return SimpleNamespace(plugins={PLUGIN_NAME: SimpleNamespace(state=state)}, workers={})


def test_panel_shows_bytes_per_stage_and_time_per_call():
    from daskhpc import _workflows
    from daskhpc.allreduce._dashboard import PANELS, AllreduceStages

    assert _workflows.load("allreduce").panels()["allreduce"][0] is AllreduceStages
    assert PANELS["allreduce"][0] is AllreduceStages
    st = DashboardState()
    panel = AllreduceStages(scheduler_with(st))
    panel.update()
    assert panel.stage_source.data["stage"] == []
    st.publish("run", {"name": "allreduce", "workflow": "allreduce", "workers": ["a", "b"]})
    st.publish("history", {"rows": [
        {"unit": 0, "call": 0, "algorithm": "ssar_rec_dbl", "stage_bytes": [120, 240],
         "time_s": 0.010, "measured_bytes": 1500},
        {"unit": 1, "call": 1, "algorithm": "ssar_rec_dbl", "stage_bytes": [120, 240],
         "time_s": 0.030, "measured_bytes": 1500}]})
    panel.update()
    assert panel.stage_source.data["bytes"] == [120, 240]
    assert panel.stage_source.data["total"] == [2, 2]
    assert panel.call_source.data["ms"] == [10.0, 30.0]
    assert "ssar_rec_dbl: 2 calls, median 30.0 ms" in panel.summary.text
    # another workflow's run: the panel empties
    st.publish("run", {"name": "ssgd", "workflow": "ssgd", "workers": ["a"]})
    panel.update()
    assert panel.stage_source.data["bytes"] == [] and panel.call_source.data["ms"] == []
