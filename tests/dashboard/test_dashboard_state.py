"""DashboardState and plan_matrix: the arithmetic behind the pages, without a cluster."""

from __future__ import annotations

import numpy as np
import pytest

import daskhpc.dashboard
from daskhpc.comm import Plan
from daskhpc.dashboard import TOPICS, DashboardState, plan_matrix


def test_public_namespace_is_pinned():
    assert sorted(daskhpc.dashboard.__all__) == [
        "Component", "DashboardPlugin", "DashboardState", "EMPTY", "PAGES", "PLUGIN_NAME",
        "TOPICS", "TransferCounter", "UPDATE_MS", "bytes_text", "ensure_plugin", "format_bytes", "install",
        "plan_fields", "plan_matrix", "publish", "sent_now", "serve", "update_source",
        "worker_label"]
    for name in daskhpc.dashboard.__all__:
        assert getattr(daskhpc.dashboard, name) is not None
    assert set(daskhpc.dashboard.PAGES) >= {     # and every registered workflow's panels
        "/daskhpc", "/individual-daskhpc-comm", "/individual-daskhpc-load",
        "/individual-daskhpc-spgemm", "/individual-daskhpc-strata"}


def test_measured_counts_from_the_run_start_in_a_stable_order():
    st = DashboardState()
    st.publish("run", {"name": "r", "workers": ["b", "a"]}, now=1.0,
               sent={"a": {"b": 10}, "b": {"a": 5}})
    workers, m = st.measured_matrix({"a": {"b": 25}, "b": {"a": 5, "c": 7}, "c": {}})
    assert workers == ["b", "a", "c"]          # the run's order, then newcomers
    assert m.tolist() == [[0, 0, 7], [15, 0, 0], [0, 0, 0]]
    assert st.run["started"] == 1.0


def test_plan_matrix_follows_the_run_order():
    st = DashboardState()
    st.publish("run", {"workers": ["a", "b", "c"]})
    st.publish("plan", {"matrix": [[0, 4], [2, 0]], "workers": ["c", "a"]})
    workers, m = st.planned_matrix()
    assert workers == ["a", "b", "c"]
    assert m.tolist() == [[0, 0, 2], [0, 0, 0], [4, 0, 0]]


def test_a_new_run_forgets_the_last_one():
    st = DashboardState()
    st.publish("plan", {"matrix": [[0]], "workers": ["a"]})
    st.record_task("a", 1.5)
    st.merge_batches("r1", {"batches": []}, now=0.0)
    st.publish("run", {"workers": ["a"]})
    assert set(st.topics) == {"run"}
    assert st.busy == {} and st.batches == {}
    with pytest.raises(ValueError, match="unknown dashboard topic"):
        st.publish("nope", {})


def test_load_shares_and_memory_peaks():
    st = DashboardState()
    st.publish("load", {"planned": {"a": 1, "b": 3}, "unit": "flops"})
    st.record_task("a", 1.0)
    st.record_task("b", 1.0)
    st.record_task("b", 2.0)
    d = st.load(["a", "b"])
    assert d["planned_share"] == [0.25, 0.75]
    assert d["busy_share"] == [0.25, 0.75] and d["tasks"] == [1, 2]
    for v in (10, 30, 20):
        st.record_memory("a", v)
    assert st.memory_peak == {"a": 30}


def test_strata_rows_merge_and_survive_their_source_forgetting_them():
    st = DashboardState()
    row = {"run": "r", "task": 0, "worker": "a", "substep": 0, "start": 1.0, "stop": None}
    assert st.merge_rows("src", [row])
    assert not st.merge_rows("src", [row])                  # nothing new
    assert st.merge_rows("src", [{**row, "stop": 2.0}])     # the step finished
    assert st.merge_rows("src", []) is False                # the source forgot it
    assert st.strata_rows() == [{**row, "stop": 2.0}]
    # the same step published by the workflow (a tuple key comes back as a list)
    tupled = {**row, "task": None, "key": ("ssgd-step-r", 0, 0, 0, 0, 0), "stop": 2.0}
    st.merge_rows("plugin", [tupled])
    st.merge_rows("published", [{**tupled, "key": list(tupled["key"])}])
    assert len(st.strata_rows()) == 2
    st.publish("run", {"name": "next"})                     # other runs leave them be
    later = {**row, "run": "r2", "start": 5.0}
    st.merge_rows("src", [later])
    assert st.strata_rows() == [later]                      # the latest run only


def test_a_long_runs_timeline_is_thinned_by_epoch_and_says_so():
    """4,000 epochs of 8 sweeps (32,000 rows, over MAX_ROWS): the timeline keeps every
    2nd epoch from epoch 0, each kept epoch whole, and says what it shows."""
    from daskhpc.dashboard._state import MAX_ROWS
    from daskhpc.ssgd._dashboard import shown_text

    st = DashboardState()
    epochs, sweeps = 4000, 8
    for e in range(epochs):               # epoch by epoch, as the workers report them
        st.merge_rows("event", [{"run": "r", "key": [e % 2, e, k], "epoch": e, "subepoch": k,
                                 "worker": "ab"[e % 2], "start": e + k / 10,
                                 "stop": e + (k + 1) / 10} for k in range(sweeps)])
    rows = st.strata_rows()
    kept = sorted({r["epoch"] for r in rows})
    assert len(rows) <= MAX_ROWS
    assert kept[0] == 0 and kept[-1] >= epochs - 2      # the whole run, not its last part
    assert kept == list(range(0, epochs, 2))
    assert all(sum(r["epoch"] == e for r in rows) == sweeps for e in kept[:3])
    assert st.strata_thinning() == {"stride": 2, "dropped": 0, "span": (0, epochs - 0.2),
                                     "limit": MAX_ROWS}
    text = shown_text(st)
    assert "every 2nd epoch shown" in text and "of a run of 3999.80 s" in text
    # a row of an epoch the thinning leaves out is not taken back in
    assert not st.merge_rows("event", [{"run": "r", "key": [1, 3, 0], "epoch": 3,
                                        "start": 3.0, "stop": 3.1}])
    # without epochs the oldest go, and the text says so
    st2 = DashboardState()
    st2.merge_rows("s", [{"run": "q", "task": i, "start": float(i), "stop": i + 0.5}
                         for i in range(MAX_ROWS + 5)])
    assert len(st2.strata_rows()) == MAX_ROWS and st2.strata_thinning()["dropped"] == 5
    assert "(5 older ones dropped)" in shown_text(st2)


def test_stale_batch_runs_stop_growing():
    st = DashboardState()
    st.merge_batches("r", {"batches": []}, now=10.0)
    assert st.batches_clock("r", now=11.0) == 11.0
    assert st.batches_clock("r", now=30.0) == 10.0


def test_plan_matrix_counts_cross_worker_bytes_and_dedupes_broadcasts():
    # parts 0, 1 on worker 0, part 2 on worker 1; part 2 sends to parts 0 and 1 in
    # one phase (a broadcast: worker 0 fetches the block once)
    p = Plan.from_messages(3, [(0, 2, 0, [1, 2]), (0, 2, 1, [1, 2]), (0, 0, 1, [5])],
                           word_bytes=8)
    m = plan_matrix(p, owner=[0, 0, 1])
    assert m.tolist() == [[0, 0], [32, 0]]
    m = plan_matrix(p, owner=[0, 0, 1], dedupe_phase_src=True)
    assert m.tolist() == [[0, 0], [16, 0]]
    assert np.array_equal(plan_matrix(p, owner=[0, 1, 2]).sum(), 5 * 8 * 1.0)
    assert set(TOPICS) == {"run", "plan", "load", "memory", "batches", "strata", "history",
                           "end"}


# -- one definition of planned vs measured, per run and per unit -----------

def test_a_per_epoch_plan_is_compared_with_the_epochs_done_not_the_whole_run():
    # SSGD publishes one epoch's plan; after 248 epochs measured is ~248x one epoch: the
    # page compared those ("248x planned"). Now: the plan of the epochs done.
    st = DashboardState()
    st.publish("run", {"name": "ssgd K=2", "workflow": "ssgd", "workers": ["a", "b"]})
    st.publish("plan", {"matrix": [[0, 600], [400, 0]], "workers": ["a", "b"],
                        "unit": "bytes per epoch"})
    st.publish("history", {"rows": [{"unit": u, "epoch": u} for u in range(248)]})
    d = st.bytes_summary(measured=248 * 1030.0)
    assert d["scope"] == "unit" and d["units_done"] == 248
    assert d["planned_so_far"] == 248 * 1000 and d["planned_per_unit"] == 1000
    assert d["measured_per_unit"] == 1030 and d["ratio"] == pytest.approx(1.03)
    assert st.unit_name() == "epoch"


def test_a_run_plan_with_units_is_prorated_and_per_unit_plans_are_summed():
    st = DashboardState()
    st.publish("run", {"workers": ["a", "b"], "units": 4})
    st.publish("plan", {"matrix": [[0, 400], [400, 0]], "workers": ["a", "b"],
                        "unit": "bytes per run"})
    st.publish("history", {"rows": [{"unit": 0}]})
    d = st.bytes_summary(measured=210.0)
    assert (d["scope"], d["planned_run"], d["planned_so_far"]) == ("run", 800, 200)
    st.publish("plan", {"matrix": [[0, 400], [400, 0]], "workers": ["a", "b"],
                        "per_unit": [500, 100, 100, 100], "scope": "run"})
    d = st.bytes_summary(measured=520.0)
    assert (d["planned_run"], d["planned_so_far"], d["ratio"]) == (800, 500, 520 / 500)
    # the frame's own per-unit numbers win when the rows carry them
    st.publish("history", {"rows": [{"unit": 1, "planned_bytes": 90, "measured_bytes": 95}]})
    d = st.bytes_summary(measured=615.0)
    assert d["planned_so_far"] == 600 and d["units_done"] == 2


def test_without_a_load_topic_the_planned_bars_are_the_planned_sends():
    st = DashboardState()
    st.publish("run", {"workers": ["a", "b"]})
    assert st.load(["a", "b"])["planned"] == [0.0, 0.0] and st.load_unit() == "work"
    st.publish("plan", {"matrix": [[0, 30], [10, 0]], "workers": ["a", "b"]})
    d = st.load(["a", "b"])
    assert d["planned"] == [30.0, 10.0] and d["planned_share"] == [0.75, 0.25]
    assert st.load_unit() == "bytes to send"
    st.publish("load", {"planned": {"a": 1, "b": 1}, "unit": "flops"})
    assert st.load(["a", "b"])["planned"] == [1.0, 1.0] and st.load_unit() == "flops"


def test_plan_fields_give_the_run_and_every_unit():
    from daskhpc.dashboard import plan_fields

    # 3 parts on 2 workers; phase = unit; part 2 lives with part 1
    p = Plan.from_messages(3, [(0, 0, 1, [0, 1]), (0, 1, 2, [0]), (1, 2, 0, [3])],
                           word_bytes=8)
    f = plan_fields([(p, lambda ph: ph)], [0, 1, 1], 2, units=2)
    assert f["per_unit"] == [16, 8]                    # 1 -> 2 costs nothing
    assert f["matrix"].tolist() == [[0, 16], [8, 0]] and f["units"] == 2
    st = DashboardState()
    st.publish("run", {"workers": ["a", "b"]})
    st.publish("plan", {**f, "workers": ["a", "b"]})
    st.publish("history", {"rows": [{"unit": 0}]})
    assert st.bytes_summary(16.0)["planned_so_far"] == 16


def test_the_heading_and_the_texts_say_what_runs():
    pytest.importorskip("bokeh")
    from daskhpc.dashboard import bytes_text
    from daskhpc.dashboard._pages import _runs, heading_text

    st = DashboardState()
    assert "No daskhpc run" in heading_text(st)
    st.publish("run", {"name": "ssgd K=4", "workflow": "ssgd", "workers": ["a", "b"]})
    st.publish("plan", {"matrix": [[0, 50], [50, 0]], "workers": ["a", "b"],
                        "unit": "bytes per epoch"})
    st.publish("history", {"rows": [{"unit": 0, "epoch": 0}, {"unit": 1, "epoch": 1}]})
    head = heading_text(st)
    assert "Running: <b>ssgd</b>" in head and "on 2 workers; 2 epochs done" in head
    text = bytes_text(st.bytes_summary(210.0), st.unit_name())
    assert "after 2 epochs: planned 200 B, measured 210 B (1.05 x planned)" in text
    assert "per epoch (mean of 2): planned 100 B, measured 105 B" in text
    assert _runs("spgemm", "spgemm") and _runs("spgemm", "spgemm-symbolic")
    assert not _runs("ssgd", "spgemm")


def test_the_report_keeps_planned_bytes_for_one_meaning():
    from daskhpc.report import PLANNED_BYTES, WorkflowResult

    info = {"plan": {"tot_vol": 3, "planned_bytes": 480},          # one epoch, part-level
            "run_plan": {"tot_vol": 9, "planned_bytes": 1440},
            "measured": {"planned_bytes": 960, "inter_worker_bytes": 1000}}
    rows = [{"epoch": e, "planned_bytes": 480, "measured_bytes": 500} for e in range(2)]
    rep = WorkflowResult(info, rows).report()
    assert rep["plan"] == {"tot_vol": 3, "part_bytes": 480}
    assert rep["run_plan"] == {"tot_vol": 9, "part_bytes": 1440}
    found = []

    def walk(d, path=""):
        for k, v in d.items():
            if k == "planned_bytes":
                found.append(path + k)
            elif isinstance(v, dict):
                walk(v, f"{path}{k}.")
    walk(rep)
    assert found == ["measured.planned_bytes", "measured.bytes.per_run.planned_bytes",
                     "measured.bytes.per_unit.planned_bytes"]
    side = rep["measured"]["bytes"]
    assert side["per_run"] == {"planned_bytes": 960, "measured_bytes": 1000, "ratio": 1.0417}
    assert side["per_unit"] == {"unit": "epoch", "planned_bytes": [480, 480],
                                "measured_bytes": [500, 500]}
    assert "between workers" in PLANNED_BYTES
    # a plan without a run keeps the plan's own name (every part its own worker)
    assert WorkflowResult({"plan": {"tot_vol": 3, "planned_bytes": 480}}).report()["plan"] == \
        {"tot_vol": 3, "planned_bytes": 480}


# -- the end of a run, and the report's numbers after it -------------------------

def test_the_end_of_a_run_freezes_its_counters_and_takes_the_reports_numbers():
    pytest.importorskip("bokeh")
    from daskhpc.dashboard import bytes_text
    from daskhpc.dashboard._pages import heading_text

    st = DashboardState()
    st.publish("run", {"name": "ssgd K=4", "workflow": "ssgd", "workers": ["a", "b"],
                       "units": 2, "unit_name": "epochs"}, sent={"a": {"b": 100}})
    st.publish("plan", {"matrix": [[0, 90], [110, 0]], "workers": ["a", "b"],
                        "per_unit": [120, 80], "units": 2, "scope": "run"})
    st.publish("history", {"rows": [{"unit": 0}, {"unit": 1}]})
    assert "Running: <b>ssgd</b>" in heading_text(st)
    st.publish("end", {"status": "finished", "planned_bytes": 200, "measured_bytes": 210,
                       "rows": [{"unit": 0, "planned_bytes": 120, "measured_bytes": 126},
                                {"unit": 1, "planned_bytes": 80, "measured_bytes": 84}]},
               sent={"a": {"b": 300}})
    assert "Finished: <b>ssgd</b>" in heading_text(st) and "2/2 epochs done" in heading_text(st)
    # bytes sent after the end (another client's work) are not the run's
    assert st.measured_matrix({"a": {"b": 5000}})[1].tolist() == [[0, 200], [0, 0]]
    text = bytes_text(st.bytes_summary(999.0), st.unit_name())     # the report's 210, not 999
    assert "after 2/2 epochs: planned 200 B, measured 210 B (1.05 x planned)" in text, text
    assert "per epoch (mean of 2): planned 100 B, measured 105 B" in text, text
    # the report's own matrix, when the end carries one, is the measured matrix
    st.publish("end", {"status": "failed: WorkerLost", "matrix": [[0, 7], [3, 0]],
                       "workers": ["b", "a"]})
    assert st.measured_matrix({})[1].tolist() == [[0, 3], [7, 0]]
    assert "Failed: <b>ssgd</b> (WorkerLost)" in heading_text(st)
    with pytest.raises(ValueError, match="end matrix"):
        st.publish("end", {"matrix": [[0]], "workers": ["a", "b"]})
