"""The dashboard plugin on a real cluster: measured bytes, publishing, late serving."""

from __future__ import annotations

import time
import urllib.error
import urllib.request

import numpy as np
import pytest
from distributed import Client, LocalCluster

from daskhpc import dashboard
from daskhpc.runtime import TransferLedger, submit_pinned, worker_addresses


def _state(dask_scheduler):
    plugin = dask_scheduler.plugins[dashboard.PLUGIN_NAME]
    workers, m = plugin.state.measured_matrix(plugin.sent())
    return {"workers": workers, "measured": m.tolist(), "busy": dict(plugin.state.busy),
            "run": dict(plugin.state.run), "plugins": sorted(dask_scheduler.plugins)}


def test_measured_matrix_equals_the_transfer_ledger(dash_client):
    client = dash_client
    w0, w1 = worker_addresses(client)
    assert dashboard.publish(client, "run", name="ledger check", workers=[w0, w1])
    tasks = {"x": (np.ones, 100_000), "y": (np.add, "x", 1), "z": (np.add, "y", "x"),
             "t": (np.sum, "z")}
    where = {"x": w0, "y": w1, "z": w0, "t": w1}
    with TransferLedger(client) as ledger:
        client.gather(submit_pinned(client, tasks, where, ["t"]))
    workers, expected = ledger.matrix("bytes")
    assert workers == [w0, w1] and expected[0, 1] > 800_000 and expected[1, 0] > 800_000
    deadline = time.monotonic() + 10   # the counts come with the next heartbeats
    while time.monotonic() < deadline:
        got = client.run_on_scheduler(_state)
        if np.array_equal(got["measured"], expected):
            break
        time.sleep(0.1)
    assert got["workers"] == [w0, w1]
    assert got["measured"] == expected.tolist()
    assert set(got["busy"]) == {w0, w1}          # compute time per worker since the run
    assert got["run"]["name"] == "ledger check"


def test_publish_registers_the_plugin_and_serve_adds_pages_late():
    # A scheduler built without the daskhpc pages (as one started elsewhere would be):
    # publishing installs the plugin, whose start() serves the pages at run time.
    from distributed.dashboard.scheduler import applications

    ours = {url: applications.pop(url) for url in list(applications) if "daskhpc" in url}
    try:
        cluster = LocalCluster(n_workers=1, processes=False, protocol="tcp", host="127.0.0.1",
                               dashboard_address="127.0.0.1:0")
    finally:
        applications.update(ours)
    with cluster, Client(cluster) as client:
        base = client.dashboard_link.rsplit("/", 1)[0]
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(base + "/individual-daskhpc-comm", timeout=10)
        assert dashboard.publish(client, "run", name="late", workers=worker_addresses(client))
        assert dashboard.PLUGIN_NAME in client.run_on_scheduler(_state)["plugins"]
        with urllib.request.urlopen(base + "/individual-daskhpc-comm", timeout=10) as r:
            assert r.status == 200 and b"bokeh" in r.read().lower()
        with urllib.request.urlopen(base + "/status", timeout=10) as r:
            assert b'href="daskhpc"' in r.read()      # linked in the navigation bar
        # the worker-side counter was installed with the plugin
        assert client.run(lambda dask_worker: "daskhpc-sent" in dask_worker.metrics)


def test_publish_never_fails_a_run(dash_client, caplog):
    with pytest.raises(ValueError, match="unknown dashboard topic"):
        dashboard.publish(dash_client, "nope")
    # a value the scheduler cannot take is logged, not raised
    assert dashboard.publish(dash_client, "plan", matrix=[[0]]) is False
    assert "could not publish 'plan'" in caplog.text


def _topics(dask_scheduler):
    state = dask_scheduler.plugins[dashboard.PLUGIN_NAME].state
    return dict(state.run), state.topics.get("plan")


def test_a_publication_not_waited_for_arrives_before_the_next(dash_client, caplog):
    # wait=False returns at once; the next publication of the client waits for it, so
    # the pages see the topics in order (a run's plan, then its end)
    w = worker_addresses(dash_client)
    assert dashboard.publish(dash_client, "run", name="in order", workers=w)
    assert dashboard.publish(dash_client, "plan", matrix=[[0, 7], [5, 0]], workers=w,
                             wait=False) is True
    assert dashboard.publish(dash_client, "end", status="finished")
    run, plan = dash_client.run_on_scheduler(_topics)
    assert run["name"] == "in order" and run["status"] == "finished"
    assert plan is not None and plan["matrix"] == [[0, 7], [5, 0]]
    # a failure of one not waited for is logged by the next publication, not raised
    assert dashboard.publish(dash_client, "plan", matrix=[[0]], wait=False) is True
    assert dashboard.publish(dash_client, "end", status="finished")
    assert "could not publish 'plan'" in caplog.text


def test_timeline_rows_are_read_incrementally():
    """Each sample merges only the rows appended since the last one (re-reading the
    whole list grew with the run); a replaced list is read from its start."""
    from daskhpc.dashboard._plugin import DashboardPlugin

    class Source:
        timeline: list = []

    merged = []
    plugin = DashboardPlugin()
    real = plugin.state.merge_rows
    plugin.state.merge_rows = lambda name, rows: merged.append(len(rows)) or real(name, rows)
    src = Source()
    src.timeline = [{"run": "r", "key": f"k{i}", "worker": "w", "start": i, "stop": i + 1}
                    for i in range(5)]
    plugin._read_timeline("src", src)
    plugin._read_timeline("src", src)                       # nothing new: no merge
    src.timeline += [{"run": "r", "key": "k5", "worker": "w", "start": 5, "stop": 6}]
    plugin._read_timeline("src", src)
    src.timeline = src.timeline[:2]                         # fetched: a new list
    plugin._read_timeline("src", src)
    assert merged == [5, 1, 2]
    assert len(plugin.state.strata_rows()) == 6


def test_the_frame_says_when_a_run_ends_and_how(dash_client):
    """The heading said "Running" after the run returned; a run the frame ends
    says "Finished" with the report's bytes, one that fails says "Failed" and why."""
    import functools

    from daskhpc.dashboard._pages import heading_text
    from daskhpc.runtime import Diverged, Job, run_job
    from daskhpc.testing import toy_program, toy_row

    def job(row):
        return Job("toy", 2, 3, row=row, program=functools.partial(_toy, toy_program),
                   statics=[50, 50])

    def state(dask_scheduler):
        st = dask_scheduler.plugins[dashboard.PLUGIN_NAME].state
        return heading_text(st), st.bytes_summary(0.0), st.measured_matrix({})[1].sum()

    out = run_job(dash_client, job(toy_row))
    head, d, matrix = dash_client.run_on_scheduler(state)
    assert "Finished: <b>toy</b>" in head and "3/3 units done" in head, head
    m = out.measured
    assert (d["planned_so_far"], d["measured_so_far"]) == (m["planned_bytes"],
                                                            m["inter_worker_bytes"])
    assert matrix == m["inter_worker_bytes"] > 0            # the ledger's matrix

    def bad(u, rep):
        return {**toy_row(u, rep), "loss": float("nan") if u == 1 else 0.5}

    with pytest.raises(Diverged):
        run_job(dash_client, job(bad))
    head = dash_client.run_on_scheduler(state)[0]
    assert "Failed: <b>toy</b> (Diverged)" in head, head


def _toy(make, first_unit):
    return make(2, 3, length=50, first_unit=first_unit)


def _load_panel(dask_scheduler):
    """The load panel as the page draws it, built in the scheduler, and its numbers."""
    from daskhpc.dashboard._pages import WorkerLoad

    panel = WorkerLoad(dask_scheduler)
    panel.update()
    plugin = dask_scheduler.plugins[dashboard.PLUGIN_NAME]
    st = plugin.state
    d = st.load(st.workers(dask_scheduler.workers), plugin.steps())
    return {"text": panel.summary.text, "compute": d["compute"],
            "busy": dict(zip(d["worker"], d["busy"])), "count": sum(d["tasks"])}


def test_the_load_panel_counts_the_steps_compute_as_the_report_does(dash_client):
    """GCN's direct exchange runs a window of epochs in one task per worker: counting
    finished tasks, the panel read "0 tasks done, 0.00 s of compute" mid-run. It counts
    the steps' own compute time (the workers' step clocks) live, and ends on the
    report's ``execution.steps`` numbers, with the same name."""
    from daskhpc import gcn

    mid = {}

    def at_epoch(row):
        if row["unit"] != 3 or mid:
            return
        # the run is held here (the client's side) while the workers go on; their step
        # clocks reach the scheduler with their heartbeats (every second)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            mid.update(dash_client.run_on_scheduler(_load_panel))
            # finished tasks can count before the first heartbeat with step clocks lands
            if mid["compute"] == "steps" and mid["count"] > 0:
                break
            time.sleep(0.5)

    res = gcn.fit("cora", nparts=2, epochs=40, client=dash_client, exchange="direct",
                  callback=at_epoch, progress=False)
    assert mid["compute"] == "steps" and mid["count"] > 0, mid
    assert sum(mid["busy"].values()) > 0
    assert "steps done" in mid["text"] and "in the step functions" in mid["text"], mid["text"]
    end = dash_client.run_on_scheduler(_load_panel)
    per_worker = res.report()["execution"]["steps"]["per_worker"]
    assert end["busy"] == pytest.approx({w: v["compute_s"] for w, v in per_worker.items()})
    assert end["count"] == sum(v["steps"] for v in per_worker.values())


def _ratios_mid_run(dask_scheduler):
    """Replay the run that just ended on the scheduler's state as the page saw it while
    it ran, after each unit: ``(units done, ratio shown, live counters / plan)``."""
    import copy

    plugin = dask_scheduler.plugins[dashboard.PLUGIN_NAME]
    st = copy.deepcopy(plugin.state)
    rows = list(st.history)
    live = float(st.measured_matrix(plugin.sent())[1].sum())   # every unit's bytes
    end = st.topics.pop("end")
    st._final = st._steps_end = None
    out = []
    for u in range(1, len(rows) - 1):
        st.history = [{k: v for k, v in r.items() if k not in ("planned_bytes",
                                                              "measured_bytes")}
                      for r in rows[:u]]
        d = st.bytes_summary(live)
        out.append((u, d["ratio"], live / d["planned_so_far"]))
    return {"ratios": out, "end_ratio": end["measured_bytes"] / end["planned_bytes"],
            "reported": {w: len(us) for w, us in st._unit_sent.items()}}


def test_mid_run_bytes_compare_the_units_done_with_their_plan(dash_client):
    """Mid-run the page read 1.36x the plan (SSGD) against 1.00x at the end: the live
    counters hold the units in flight too, the plan only the units done. The workers'
    unit reports carry their sent bytes, and the page compares the bytes sent up to the
    units done with their plan."""
    import daskhpc as dh

    epochs = 8
    res = dh.ssgd.fit(dh.datasets.ratings(), 4, client=dash_client, epochs=epochs,
                      strategy="hc", partition="random", exchange="direct", progress=False)
    got = dash_client.run_on_scheduler(_ratios_mid_run)
    assert got["reported"] and all(n == epochs for n in got["reported"].values()), got
    m = res.report()["measured"]
    assert got["end_ratio"] == pytest.approx(m["inter_worker_bytes"] / m["planned_bytes"])
    for u, ratio, naive in got["ratios"]:
        # what the counters alone gave: all 8 epochs' bytes over the plan of u of them
        assert naive > got["end_ratio"] * (1.5 if u <= epochs // 2 else 1.1), (u, naive)
        assert ratio == pytest.approx(got["end_ratio"], rel=0.15), (u, ratio, got)
