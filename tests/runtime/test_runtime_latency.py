"""low_latency: the client <-> scheduler <-> worker batching is set for a run and restored
after."""

from __future__ import annotations

from daskhpc._dask_internals import client_stream, scheduler_streams, worker_stream


def _sched_intervals(dask_scheduler=None):
    return sorted(bs.interval for bs in scheduler_streams(dask_scheduler).values())


def _client_interval(client_id, dask_scheduler=None):
    return scheduler_streams(dask_scheduler, client_id)[f"client {client_id}"].interval


def _worker_interval(dask_worker=None):
    return worker_stream(dask_worker).interval


def _intervals(client):
    return (client.run_on_scheduler(_sched_intervals), client.run(_worker_interval),
            client.run_on_scheduler(_client_interval, client.id),
            client_stream(client).interval)


def test_low_latency_sets_and_restores_the_batching(client3):
    from daskhpc.runtime import low_latency

    before = _intervals(client3)
    assert before[0] and min(before[0]) > 0 and before[2] > 0 and before[3] > 0
    with low_latency(client3):
        sched, workers, to_client, from_client = _intervals(client3)
        assert set(sched) == {0.0} and set(workers.values()) == {0.0}
        assert to_client == 0.0 and from_client == 0.0
    assert _intervals(client3) == before
