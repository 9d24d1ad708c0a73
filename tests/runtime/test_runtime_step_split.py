"""The report's time split of the steps (``execution["steps"]``): per
worker the seconds its steps computed, waited for other workers' messages and sent
theirs, and how many steps it ran, read in the run's closing call; the summary's
``steps`` line. Counts are asserted, never times (a loaded machine stretches those)."""

from __future__ import annotations

import functools

import pytest

import daskhpc as dh
from daskhpc.report import summarize
from daskhpc.runtime import Job, run_job
from daskhpc.testing import toy_program, toy_row

LENGTH = 50


def _prog(K, units, first_unit):
    return toy_program(K, units, length=LENGTH, first_unit=first_unit)


def _job(K, units, exchange):
    return Job("toy", K, units, row=toy_row, fingerprint={"K": K},
               program=functools.partial(_prog, K, units), statics=[LENGTH] * K,
               exchange=exchange)


def test_direct_steps_are_split_per_worker(client2):
    units = 5
    out = run_job(client2, _job(2, units, "direct"), progress_bar=False)
    split = out.execution["steps"]
    assert split["units"] == units
    assert sorted(split["per_worker"]) == sorted(out.placement.workers)
    nsteps = toy_program(2, units, length=LENGTH).nsteps
    for got in split["per_worker"].values():
        # each worker runs every step once for its part (the ring sends in every unit)
        assert got["steps"] == nsteps
        assert got["compute_s"] > 0 and got["wait_s"] >= 0 and got["send_s"] > 0
    line = summarize({"workflow": "toy", "execution": {**out.execution, "units": "units"}})
    assert "steps      per unit on the busiest of 2 workers: compute " in line
    assert ", wait " in line and ", send " in line and "the others wait up to" in line


def test_graph_exchange_times_compute_only(client2):
    # a group of tasks waits and sends in the scheduler's time: not split, not guessed
    out = run_job(client2, _job(2, 3, "graph"), progress_bar=False)
    for got in out.execution["steps"]["per_worker"].values():
        assert got["steps"] == toy_program(2, 3, length=LENGTH).nsteps
        assert got["wait_s"] is None and got["send_s"] is None
    line = summarize({"workflow": "toy", "execution": {**out.execution, "units": "units"}})
    assert "compute " in line and "wait" not in line


def test_one_worker_computes_only(client2):
    out = run_job(client2, _job(1, 4, "direct"), progress_bar=False)
    (got,) = out.execution["steps"]["per_worker"].values()
    assert got["steps"] == toy_program(1, 4, length=LENGTH).nsteps
    assert got["wait_s"] is None and got["send_s"] is None


@pytest.mark.parametrize("strategy", ["dsgd", "hc"])
def test_ssgd_direct_sub_epochs_are_split(client2, strategy):
    epochs = 3
    res = dh.ssgd.fit(dh.datasets.ratings(), 2, strategy=strategy, epochs=epochs,
                      eval_every=0, client=client2, progress=False)
    split = res.report()["execution"]["steps"]
    assert split["units"] == epochs
    assert len(split["per_worker"]) == 2
    # K = 2: two sub-epochs an epoch, each worker sweeps in both (its part's strata)
    assert [v["steps"] for v in split["per_worker"].values()] == [2 * epochs] * 2
    assert all(v["wait_s"] is not None for v in split["per_worker"].values())


def test_ssgd_graph_mode_has_no_split(client2):
    res = dh.ssgd.fit(dh.datasets.ratings(), 2, strategy="dsgd", epochs=2, eval_every=0,
                      exchange="graph", client=client2, progress=False)
    assert "steps" not in res.report()["execution"]


def _waits(**blame):
    """``{worker: {"wait_s", "waited_on_s", "in_flight_s"}}`` from ``w=[(sender, waited,
    in flight), ...]``."""
    return {w: {"wait_s": sum(x[1] for x in got),
                "waited_on_s": {s: t for s, t, _ in got},
                "in_flight_s": {s: f for s, _, f in got}} for w, got in blame.items()}


def test_a_slow_link_names_its_host_not_the_workers_it_delayed():
    from daskhpc._clock import waited_for

    # b's link is slow: a and c wait for b's messages on the wire; b waits for theirs;
    # a's step then goes out late to c (a wait passed on, not a's fault)
    got = waited_for(_waits(a=[("b", 9.0, 8.5)], b=[("a", 5.0, 4.5), ("c", 4.0, 3.5)],
                            c=[("a", 8.0, 0.2), ("b", 2.0, 1.9)]))
    assert got[0] == "b"


def test_a_straggler_is_named_by_its_lateness():
    from daskhpc._clock import waited_for

    # b computes slowly: its messages leave late, spend no time on the wire
    got = waited_for(_waits(a=[("b", 6.0, 0.01)], b=[("a", 0.1, 0.01)], c=[("b", 6.0, 0.01)]))
    assert got[0] == "b" and got[1] > 5
    assert waited_for(_waits(a=[], b=[])) is None
