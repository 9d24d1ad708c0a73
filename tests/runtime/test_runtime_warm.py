"""A job's warm-up runs once in each worker process (``_warm``): a second run on the same
workers skips it; other arguments are another warm-up."""

from __future__ import annotations

import functools
import os

from daskhpc.runtime import Job, run_job
from daskhpc.runtime._warm import warm
from daskhpc.testing import toy_program, toy_row


def _count(tag):
    """Counts its runs in the worker process (its environment: module globals of a test
    module travel by value)."""
    key = f"DASKHPC_TEST_WARM_{tag}"
    os.environ[key] = str(int(os.environ.get(key, "0")) + 1)


def _counted(tag, dask_worker=None):
    return int(os.environ.get(f"DASKHPC_TEST_WARM_{tag}", "0"))


def _prog(first_unit):
    return toy_program(2, 2, length=10, first_unit=first_unit)


def test_a_warm_up_runs_once_per_worker_process(client2):
    tag = "ONCE"
    job = Job("toy", 2, 2, row=toy_row, fingerprint={}, program=_prog, statics=[10] * 2,
              warm_up=functools.partial(_count, tag), exchange="direct")
    for _ in range(2):
        run_job(client2, job, progress_bar=False)
    assert set(client2.run(_counted, tag).values()) == {1}
    warm(client2, functools.partial(_count, "OTHER"))
    assert set(client2.run(_counted, "OTHER").values()) == {1}
