"""A run of several phases (``run_phases``): one checkpoint, one part store, one dashboard
run from start to end, each phase's outcome; a resumed run skips the finished phase."""

from __future__ import annotations

import contextlib
import functools
import json
import time

import numpy as np
import pytest

from daskhpc import dashboard
from daskhpc.comm import run_local
from daskhpc.runtime import Job, Phase, run_on_parts, run_phases
from daskhpc.testing import toy_program, toy_row

K, LENGTH = 2, 60


def toy(name, units, **kw):
    kw.setdefault("statics", [LENGTH] * K)
    return Job(name, K, units, row=toy_row, program=functools.partial(_prog, units), **kw)


def _prog(units, first_unit):
    return toy_program(K, units, length=LENGTH, first_unit=first_unit)


def reference(units):
    finals, reports = run_local(toy_program(K, units, length=LENGTH), [LENGTH] * K)
    return finals, [toy_row(u, r)["norm"] for u, r in enumerate(reports)]


def _spy(dask_scheduler=None):
    plugin = dask_scheduler.plugins[dashboard.PLUGIN_NAME]
    plugin.seen = []
    real = type(plugin).publish

    def publish(topic, data, sent=None):
        plugin.seen.append((topic, data.get("status")))
        return real(plugin, topic, data, sent)

    plugin.publish = publish


def _seen(dask_scheduler=None):
    plugin = dask_scheduler.plugins[dashboard.PLUGIN_NAME]
    del plugin.publish                    # the class's own again
    return [(t, s) for t, s in plugin.seen if t in ("run", "end")]


@contextlib.contextmanager
def publications(client):
    """The ``run`` and ``end`` topics the scheduler's dashboard plugin receives."""
    dashboard.ensure_plugin(client)
    client.run_on_scheduler(_spy)
    got: list = []
    try:
        yield got
    finally:
        got += client.run_on_scheduler(_seen)


def phases(calls: list, stop_early: bool = False):
    """"warm" runs 2 units; "more" runs one unit more than "warm" had (remembered)."""
    def warm(ctx):
        calls.append("warm")
        return None if "units" in ctx.facts else toy("toy-warm", 2)

    def more(ctx):
        calls.append("more")
        if "units" not in ctx.facts:
            ctx.remember(units=len(ctx.outcomes["warm"].history) + 1)
        stop = (lambda h: len(h) >= 2) if stop_early else None
        return toy("toy", ctx.facts["units"], stop=stop)

    return [Phase("warm", warm, checkpointed=False), Phase("more", more)]


def test_two_phases_one_run_and_a_resume_skips_the_first(client2, tmp_path):
    calls: list = []
    with publications(client2) as seen:
        outs = run_phases(client2, phases(calls, stop_early=True), name="toy", nparts=K,
                          fingerprint={"K": K}, checkpoint=tmp_path, progress_bar=False)
    assert list(outs) == ["warm", "more"] and calls == ["warm", "more"]
    want, norms = reference(2)
    assert all(np.array_equal(a, b) for a, b in zip(outs["warm"].value, want))
    assert [r["norm"] for r in outs["warm"].history] == norms
    assert [r["unit"] for r in outs["more"].history] == [0, 1]     # stopped after 2 of 3
    assert outs["warm"].ledger is not None and outs["more"].ledger is not None
    assert outs["warm"].recovery["checkpoint"] is None
    assert outs["more"].recovery["saved"] == 2
    assert json.loads((tmp_path / "phases.json").read_text()) == {"units": 3}
    # the dashboard saw one run, from its start to its end, not one per phase
    assert seen == [("run", None), ("end", "finished")]

    calls.clear()
    with publications(client2) as seen:
        outs = run_phases(client2, phases(calls), name="toy", nparts=K,
                          fingerprint={"K": K}, checkpoint=tmp_path, resume=True,
                          progress_bar=False)
    # "warm" is done (its result is in the checkpoint's facts): only "more" runs, from
    # its newest checkpoint step on
    assert list(outs) == ["more"] and calls == ["warm", "more"]
    rest = outs["more"]
    assert rest.recovery["resumed_from"] == 2 and rest.recovery["saved"] == 3
    want, norms = reference(3)
    assert all(np.array_equal(a, b) for a, b in zip(rest.value, want))
    assert [r["norm"] for r in rest.history] == norms
    assert seen == [("run", None), ("end", "finished")]


def test_a_failing_phase_ends_the_run_once(client2):
    def broken(ctx):
        raise ValueError(f"no second phase after {len(ctx.outcomes['warm'].history)} units")

    with publications(client2) as seen, pytest.raises(ValueError, match="after 2 units"):
        run_phases(client2, [Phase("warm", lambda ctx: toy("toy-warm", 2),
                                   checkpointed=False), Phase("broken", broken)],
                   name="toy", nparts=K, progress_bar=False)
    assert seen == [("run", None), ("end", "failed: ValueError")]


def test_one_phase_at_most_is_checkpointed(client2):
    with pytest.raises(ValueError, match="one phase at most"):
        run_phases(client2, [Phase("a", lambda ctx: None), Phase("b", lambda ctx: None)],
                   name="toy", nparts=K)


class _Source:
    """A stand-in for a collection's futures: counts its releases."""

    def __init__(self):
        self.released = 0

    def release(self):
        self.released += 1


def test_run_on_parts_runs_on_the_built_parts_and_releases_them(client2):
    source, seen = _Source(), []

    def build(placement):
        seen.append(source.released)                  # the source is still held here
        return {p: client2.scatter({f"toy-part-{p}": LENGTH}, workers=[placement.worker(p)],
                                   hash=False)[f"toy-part-{p}"] for p in range(K)}

    out = run_on_parts(client2, toy("toy", 2, statics=None), build, release=[source],
                       progress_bar=False)
    want, norms = reference(2)
    assert all(np.array_equal(a, b) for a, b in zip(out.value, want))
    assert [r["norm"] for r in out.history] == norms
    assert seen == [0] and source.released == 1
    for _ in range(100):        # the store released the parts: the scheduler forgets them
        left = client2.run_on_scheduler(
            lambda dask_scheduler: [k for k in dask_scheduler.tasks if "toy-part" in str(k)])
        if not left:
            break
        time.sleep(0.05)
    assert left == []
