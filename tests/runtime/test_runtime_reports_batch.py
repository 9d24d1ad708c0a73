"""ReportBatch.holding: a task's send_report calls of one topic go out together (at most
one event per COALESCE_S, a checkpointed unit's at once, the rest when the block ends),
in unit order, and the client's inbox hands them out one by one."""

from __future__ import annotations

import time


def _units(topic, n, saved_at):
    from distributed import get_worker

    from daskhpc.runtime import ReportBatch, send_report

    worker = get_worker()
    sent = []
    real = worker.log_event
    worker.log_event = lambda t, msg: (sent.append(msg), real(t, msg))[1]
    try:
        with ReportBatch(topic, worker, every=3600.0).holding():
            for u in range(n):
                send_report(topic, u, {0: {"u": u}}, saved=u == saved_at,
                            strata=[{"run": "r", "key": [u], "start": 0.0, "stop": 1.0}])
    finally:
        worker.log_event = real
    send_report(topic, n, {0: {"u": n}})           # after the block: sent at once
    return [len(m["batch"]) if "batch" in m else 1 for m in sent]


def test_held_reports_go_out_together_and_all_arrive(client2):
    from daskhpc.runtime import ReportInbox

    topic = "daskhpc-test-held"
    with ReportInbox(client2, topic) as inbox:
        events = client2.submit(_units, topic, 6, 2, pure=False).result()
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 7 and time.monotonic() < deadline:
            got += list(inbox.drain())
            time.sleep(0.05)
    # units 0-2 leave with the checkpointed unit 2, units 3-5 when the block ends
    assert events == [3, 3]
    assert [m["unit"] for m in got] == list(range(7))
    assert [m["saved"] for m in got] == [False, False, True, False, False, False, False]
    assert all(m["reports"][0]["u"] == m["unit"] for m in got)
    assert all(m.get("strata", [{}])[0].get("worker") for m in got[:6])
