"""Every internal of ``distributed`` that daskhpc uses (daskhpc/_dask_internals.py) still
works as daskhpc uses it: a failure names the internal, the installed distributed and
what daskhpc needs it for."""

from __future__ import annotations

import numpy as np
import pytest
from distributed import WorkerPlugin

import daskhpc._dask_internals as di
from daskhpc.runtime import submit_pinned, worker_addresses


def expect(ok, what: str, detail: str) -> None:
    assert ok, di.changed(what, detail)


def test_every_internal_has_a_use_and_a_check():
    checked = {"Worker.transfer_outgoing_log", "Worker.transfer_incoming_log",
               "BatchedSend.interval", "Worker.handlers", "Worker.rpc", "Scheduler._broker",
               "distributed.protocol.pickle", "Scheduler.broadcast",
               "Scheduler.register_worker_plugin", "distributed.utils",
               "distributed.dashboard"}
    assert set(di.INTERNALS) == checked
    assert "Worker.rpc changed (x)" in di.changed("Worker.rpc", "x")


def _ones(n):
    return np.ones(n)


def _size(x):
    return int(x.size)


def _log_fields(key, dask_worker):
    out = [e for e in di.outgoing_log(dask_worker) if key in e.get("keys", {})]
    inc = [e for e in di.incoming_log(dask_worker) if key in e.get("keys", {})]
    return {"out": [{k: e.get(k) for k in ("who", "total", "compressed", "start", "stop")}
                    for e in out],
            "in": [e["stop"] - e["start"] for e in inc if "start" in e and "stop" in e]}


def test_transfer_logs_record_each_get_data(client2):
    a, b = worker_addresses(client2)[:2]
    tasks = {"di-ones": (_ones, 1000), "di-size": (_size, "di-ones")}
    [f] = submit_pinned(client2, tasks, {"di-ones": a, "di-size": b}, ["di-size"])
    assert f.result() == 1000
    got = client2.run(_log_fields, "di-ones")
    out = got[a]["out"]
    expect(len(out) == 1 and out[0]["who"] == b, "Worker.transfer_outgoing_log",
           f"no entry with who={b} for the key sent: {out}")
    expect(out[0]["total"] == 8000 and out[0]["compressed"] > 8000
           and out[0]["stop"] >= out[0]["start"], "Worker.transfer_outgoing_log",
           f"fields total/compressed/start/stop: {out[0]}")
    expect(len(got[b]["in"]) == 1 and got[b]["in"][0] >= 0, "Worker.transfer_incoming_log",
           f"no timed entry for the key fetched: {got[b]['in']}")


def _stream_intervals(client_id, dask_scheduler):
    return {k: bs.interval for k, bs in di.scheduler_streams(dask_scheduler, client_id).items()}


def _worker_interval(dask_worker):
    return di.worker_stream(dask_worker).interval


def test_batched_streams_have_an_interval(client2):
    got = client2.run_on_scheduler(_stream_intervals, client2.id)
    expect(set(worker_addresses(client2)) | {f"client {client2.id}"} <= set(got),
           "BatchedSend.interval", f"the scheduler's streams are {sorted(got)}")
    expect(all(isinstance(v, (int, float)) for v in got.values()), "BatchedSend.interval",
           f"intervals {got}")
    expect(all(isinstance(v, (int, float)) for v in client2.run(_worker_interval).values()),
           "BatchedSend.interval", "Worker.batched_stream has no numeric interval")
    own = di.client_stream(client2)
    expect(isinstance(getattr(own, "interval", None), (int, float)), "BatchedSend.interval",
           "Client.scheduler_comm has no numeric interval")


_GOT: dict = {}


async def _echo(x):
    return {"echo": x}


async def _one_way(token, value):
    _GOT[token] = value


def _serve(dask_worker):
    di.add_handlers(dask_worker, {"di_echo": _echo, "di_one_way": _one_way})


def _unserve(dask_worker):
    di.remove_handlers(dask_worker, ("di_echo", "di_one_way"))
    return "di_echo" in dask_worker.handlers


async def _call_and_push(other, dask_worker):
    answer = await di.pooled_call(dask_worker, other).di_echo(x=3)
    comm = await di.pooled_connect(dask_worker, other)
    await comm.write({"op": "di_one_way", "token": "t", "value": 7, "reply": False})
    di.pooled_reuse(dask_worker, other, comm)
    return answer


def _received(dask_worker):
    return _GOT.get("t")


def test_worker_rpc_handlers_and_the_connection_pool(client2):
    import time

    a, b = worker_addresses(client2)[:2]
    client2.run(_serve, workers=[b])
    try:
        answer = client2.run(_call_and_push, b, workers=[a])[a]
        expect(answer == {"echo": 3}, "Worker.handlers", f"an RPC answered {answer!r}")
        deadline = time.monotonic() + 10
        while client2.run(_received, workers=[b])[b] != 7:
            expect(time.monotonic() < deadline, "Worker.rpc",
                   "a one-way message written on a pooled comm never arrived")
            time.sleep(0.05)
    finally:
        gone = client2.run(_unserve, workers=[b])[b]
    expect(gone is False, "Worker.handlers", "a handler could not be removed")


def _events(topic, dask_scheduler):
    return len(dask_scheduler.get_events(topic))


def _forget(name, prefix, dask_scheduler):
    di.forget_topic(dask_scheduler, name) if name else di.forget_topics(dask_scheduler, prefix)


def test_event_topics_can_be_forgotten(client2):
    for t in ("di-topic-a", "di-topic-b"):
        client2.log_event(t, {"x": 1})
    import time

    deadline = time.monotonic() + 10
    while client2.run_on_scheduler(_events, "di-topic-b") == 0:    # (events go batched)
        assert time.monotonic() < deadline
        time.sleep(0.05)
    client2.run_on_scheduler(_forget, "di-topic-a", None)
    expect(client2.run_on_scheduler(_events, "di-topic-a") == 0, "Scheduler._broker",
           "a truncated topic still has events")
    client2.run_on_scheduler(_forget, None, "di-topic-")
    expect(client2.run_on_scheduler(_events, "di-topic-b") == 0, "Scheduler._broker",
           "the topics of a prefix kept their events")


def test_distributed_pickles_what_pickle_refuses():
    f = di.loads(di.dumps(lambda x: x + 1))
    expect(f(1) == 2, "distributed.protocol.pickle", "a lambda did not come back")


def _plus(x):
    return x + 1


async def _broadcast(x, dask_scheduler):
    return await di.broadcast(dask_scheduler, di.run_message(_plus, x))


class _Marker(WorkerPlugin):
    name = "daskhpc-test-marker"


async def _register(dask_scheduler):
    await di.register_worker_plugin(dask_scheduler, _Marker(), _Marker.name)


def _has_marker(dask_worker):
    return _Marker.name in dask_worker.plugins


def test_the_scheduler_runs_functions_and_installs_plugins_on_workers(client2):
    got = client2.run_on_scheduler(_broadcast, 1)
    expect(set(got) == set(worker_addresses(client2))
           and all(r.get("status") == "OK" for r in got.values()),     # (results serialized)
           "Scheduler.broadcast", f"a run message answered {got}")
    client2.run_on_scheduler(_register)
    try:
        expect(all(client2.run(_has_marker).values()), "Scheduler.register_worker_plugin",
               "the plugin is not on every worker")
    finally:
        client2.unregister_worker_plugin(_Marker.name)


def test_distributed_utils():
    import os.path

    @di.log_errors
    def fine():
        return 5

    expect(fine() == 5, "distributed.utils", "log_errors as a decorator")
    with pytest.raises(ValueError):
        with di.log_errors():
            raise ValueError("logged and raised")
    expect(isinstance(di.get_ip("127.0.0.1"), str), "distributed.utils", "get_ip")
    expect(di.import_term("os.path.join") is os.path.join, "distributed.utils", "import_term")


def _dashboard(dask_scheduler):
    variables = di.template_variables(dask_scheduler)
    return {"pages": isinstance(variables.get("pages"), list)}


def test_dashboard_extension_points(client2):
    pytest.importorskip("bokeh")
    expect(isinstance(di.applications, dict) and "/status" in di.applications,
           "distributed.dashboard", "applications is not the dict of pages")
    expect(callable(di.BokehApplication) and di.BOKEH_THEME is not None,
           "distributed.dashboard", "BokehApplication or BOKEH_THEME")
    expect(di.env.get_template("simple.html") is not None, "distributed.dashboard",
           "the simple.html template")
    expect(client2.run_on_scheduler(_dashboard) == {"pages": True}, "distributed.dashboard",
           "template_variables has no list of pages")
