"""The CP-ALS dashboard panel: registered, and drawing the current CP-ALS run's history
rows (the live version on a cluster is in test_cpals_cluster.py::test_demo_...)."""

from __future__ import annotations

from types import SimpleNamespace

from daskhpc.dashboard import PLUGIN_NAME, DashboardState


def panel():
    from daskhpc.cpals._dashboard import FitCurve

    state = DashboardState()
    scheduler = SimpleNamespace(plugins={PLUGIN_NAME: SimpleNamespace(state=state)},
                                workers={})
    return FitCurve(scheduler), state


def test_panel_is_registered():
    from daskhpc.dashboard._pages import workflow_panels

    name, cls, title = workflow_panels()["cpals-fit"]
    assert name == "cpals" and cls.__name__ == "FitCurve" and "fit" in title


def test_panel_draws_the_cpals_run_only():
    comp, state = panel()
    comp.update()
    assert comp.source.data["fit"] == [] and "No CP-ALS run" in comp.summary.text
    rows = [{"unit": 1, "iteration": 1, "fit": 0.31, "time_s": 0.020},
            {"unit": 0, "iteration": 0, "fit": 0.20, "time_s": 0.010},
            {"unit": 2, "iteration": 2, "fit": 0.33, "time_s": 0.030}]
    state.publish("run", {"name": "cpals K=4", "workflow": "cpals", "workers": []}, now=0.0)
    state.publish("history", {"rows": rows})
    comp.update()
    d = comp.source.data
    assert d["iteration"] == [0, 1, 2] and d["fit"] == [0.20, 0.31, 0.33]
    assert [round(t, 6) for t in d["time_ms"]] == [10.0, 20.0, 30.0] and d["total"] == [3] * 3
    assert "3 iterations, fit 0.330000, median 20.0 ms" in comp.summary.text
    # another workflow's run: nothing of it is drawn here
    state.publish("run", {"name": "ssgd", "workflow": "ssgd", "workers": []}, now=1.0)
    state.publish("history", {"rows": [{"unit": 0, "epoch": 0, "fit": 1.0}]})
    comp.update()
    assert comp.source.data["fit"] == [] and "No CP-ALS run" in comp.summary.text
