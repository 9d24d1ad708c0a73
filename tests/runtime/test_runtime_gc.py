"""While a run is on, the objects of the client, the workers and the scheduler from
before it are frozen (``_gc``: no full garbage collection scans them inside the run);
afterwards they are put back, also when runs overlap."""

from __future__ import annotations

import gc

import numpy as np
import scipy.sparse as sp

from daskhpc.runtime import Job, run_job
from daskhpc.runtime._gc import frozen
from daskhpc.testing import toy_program, toy_row


def _prog(first_unit):
    return toy_program(2, 3, length=30, first_unit=first_unit)


def _frozen(dask_worker=None, dask_scheduler=None):
    return gc.get_freeze_count()


def test_the_clusters_objects_are_frozen_during_a_run_only(client2):
    seen = []

    def callback(row):              # on the client, after each unit
        seen.append((sorted(client2.run(_frozen).values()), client2.run_on_scheduler(_frozen)))

    job = Job("toy", 2, 3, row=toy_row, fingerprint={},
              program=_prog, statics=[30] * 2,
              exchange="direct")
    run_job(client2, job, progress_bar=False, callback=callback)
    assert len(seen) == 3
    assert all(min(workers) > 0 and scheduler > 0 for workers, scheduler in seen), seen
    assert set(client2.run(_frozen).values()) == {0}
    assert client2.run_on_scheduler(_frozen) == 0


def test_a_fit_freezes_the_clients_objects_until_it_ends(client2):
    import daskhpc as dh

    rng = np.random.default_rng(0)
    X = sp.random(200, 20, density=0.2, format="csr", random_state=rng)
    y = np.where(rng.random(200) > 0.5, 1, -1)
    seen = []
    dh.linear.fit(X, y, epochs=2, client=client2, progress=False,
                  callback=lambda row: seen.append(gc.get_freeze_count()))
    assert len(seen) == 2 and min(seen) > 0
    assert gc.get_freeze_count() == 0


def test_overlapping_runs_put_the_objects_back_at_the_last_end():
    with frozen():
        assert gc.get_freeze_count() > 0
        with frozen():
            pass
        assert gc.get_freeze_count() > 0               # the inner end keeps them frozen
    assert gc.get_freeze_count() == 0
