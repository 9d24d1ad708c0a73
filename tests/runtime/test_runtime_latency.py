"""low_latency: the scheduler <-> worker batching is set for a run and restored after."""

from __future__ import annotations


def _sched_intervals(dask_scheduler=None):
    return sorted(bs.interval for bs in dask_scheduler.stream_comms.values())


def _worker_interval(dask_worker=None):
    return dask_worker.batched_stream.interval


def test_low_latency_sets_and_restores_the_batching(client3):
    from daskhpc.runtime import low_latency

    before = client3.run_on_scheduler(_sched_intervals), client3.run(_worker_interval)
    assert before[0] and min(before[0]) > 0
    with low_latency(client3):
        assert set(client3.run_on_scheduler(_sched_intervals)) == {0.0}
        assert set(client3.run(_worker_interval).values()) == {0.0}
    assert (client3.run_on_scheduler(_sched_intervals), client3.run(_worker_interval)) == before
