"""What a run sets on the cluster goes in one call to the workers and one to the
scheduler each way (``_calls``); a setting that fails leaves the others and the run
alone."""

from __future__ import annotations

import functools

import numpy as np

from daskhpc._dask_internals import worker_stream
from daskhpc.comm import run_local
from daskhpc.runtime import Job, run_job
from daskhpc.runtime._calls import Applied, Setting
from daskhpc.runtime._latency import LowLatency
from daskhpc.testing import toy_program, toy_row

LENGTH = 30


def _prog(K, units, first_unit):
    return toy_program(K, units, length=LENGTH, first_unit=first_unit)


class Recorder:
    """Every ``client.run`` / ``run_on_scheduler`` the client makes, by function name."""

    def __init__(self, client, monkeypatch):
        self.names: list = []
        for method in ("run", "run_on_scheduler"):
            orig = getattr(client, method)
            monkeypatch.setattr(client, method, self._wrap(method, orig))

    def _wrap(self, method, orig):
        def call(fn, *args, **kwargs):
            self.names.append((method, getattr(fn, "__name__", str(fn))))
            return orig(fn, *args, **kwargs)
        return call


def test_a_run_sets_and_restores_in_one_call_of_each_kind(client2, monkeypatch):
    rec = Recorder(client2, monkeypatch)
    job = Job("toy", 2, 3, row=toy_row, fingerprint={}, program=functools.partial(_prog, 2, 3),
              statics=[LENGTH] * 2, exchange="direct")
    out = run_job(client2, job, progress_bar=False)
    finals, _ = run_local(toy_program(2, 3, length=LENGTH), [LENGTH] * 2)
    assert all(np.array_equal(a, b) for a, b in zip(out.value, finals))
    batched = [n for n in rec.names if n[1] in ("_on_worker", "_on_scheduler")]
    # on: logs' bounds, recovery filter, low latency; off: the filter and the intervals
    assert batched == [("run", "_on_worker"), ("run_on_scheduler", "_on_scheduler"),
                       ("run", "_on_worker"), ("run_on_scheduler", "_on_scheduler")], rec.names
    # none of the settings' own functions went on its own (nor the report topic's bound
    # and forgetting, AttemptTopics, nor the ledger's reading, LedgerClose), and the
    # ledger read in the undo call counted the run's messages
    assert not [n for n in rec.names if n[1] in ("_quiet", "_loud", "_worker", "_scheduler",
                                                 "_restore", "_topic", "_forget_topic",
                                                 "_forget_topics", "_freeze", "_unfreeze",
                                                 "_log_since", "_log_mark")], rec.names
    assert out.measured["inter_worker_messages"] > 0
    # the dashboard's counters are read at the run's start only, in the warm-up's call
    # (its end carries the ledger's matrix)
    assert [n for n in rec.names if n[1] in ("sent_now", "warm_once", "_started")] == \
        [("run", "_started")], rec.names


def _boom(dask_worker=None):
    raise RuntimeError("not here")


class Broken(Setting):
    def on(self, calls):
        calls.on_workers(_boom)
        calls.on_scheduler(_boom_scheduler)


def _boom_scheduler(dask_scheduler=None):
    raise RuntimeError("not here either")


def _interval(dask_worker=None):
    return worker_stream(dask_worker).interval


def test_a_failing_setting_leaves_the_others(client2):
    before = client2.run(_interval)
    with Applied(client2, Broken(), LowLatency(0.0)) as got:
        assert set(client2.run(_interval).values()) == {0.0}
        assert got.workers(0) == {} and got.scheduler(0) is None
        assert set(got.workers(1)) == set(before)
    assert client2.run(_interval) == before


def test_settings_on_their_way_and_undone_early(client2):
    """``wait=False``: the body starts before the calls are back (``got.wait()`` then
    has them); ``undo_soon`` inside the body sends the undoing calls at once and the
    exit waits for them: the settings are off inside the body already."""
    before = client2.run(_interval)
    app = Applied(client2, LowLatency(0.0), wait=False)
    with app as got:
        assert got.wait() is got
        assert set(got.workers(0)) == set(before)
        assert set(client2.run(_interval).values()) == {0.0}
        app.undo_soon()
        app.undo_soon()                      # once only
        app._undone.wait()
        assert client2.run(_interval) == before
    assert client2.run(_interval) == before


def test_the_run_measures_the_same_with_the_early_undo(client2):
    """The frame sends the ledger's read and the undo while it gathers the final values:
    the run still counts the messages it plans (a toy program: 2 parts, 3 units), and
    the workers keep none of its registries."""
    from daskhpc.runtime import _steps

    job = Job("toy", 2, 3, row=toy_row, fingerprint={}, program=functools.partial(_prog, 2, 3),
              statics=[LENGTH] * 2, exchange="direct")
    out = run_job(client2, job, progress_bar=False)
    planned = toy_program(2, 3, length=LENGTH).plan().report()["tot_msgs"]
    assert out.measured["inter_worker_messages"] == planned

    def left(dask_worker=None):
        return sum(len(r) for r in (_steps._CONTEXTS, _steps._CODE))

    assert set(client2.run(left).values()) == {0}
