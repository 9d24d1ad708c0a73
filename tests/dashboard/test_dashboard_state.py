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
        "TOPICS", "TransferCounter", "UPDATE_MS", "ensure_plugin", "format_bytes", "install",
        "plan_matrix", "publish", "serve", "update_source", "worker_label"]
    for name in daskhpc.dashboard.__all__:
        assert getattr(daskhpc.dashboard, name) is not None
    assert set(daskhpc.dashboard.PAGES) == {
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
    assert set(TOPICS) == {"run", "plan", "load", "memory", "batches", "strata", "history"}
