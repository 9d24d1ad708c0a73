"""The notebook path onto an allocation: ``fit(client=...)`` on a dask-jobqueue cluster.

No batch system: dask-jobqueue's own ``LocalCluster`` (a ``JobQueueCluster`` whose jobs are
local processes) with the job's ``python`` replaced by a script, so the test decides when
a job's worker starts: never (a job waiting in a busy queue), or once the run is waiting
for it. docs/hpc.md's SLURMCluster example makes the same calls.
"""

from __future__ import annotations

import os
import stat
import sys
import threading
import time

import numpy as np
import pytest

import daskhpc as dh
from daskhpc.errors import InputError

jobqueue = pytest.importorskip("dask_jobqueue.local")

from distributed import Client  # noqa: E402

from daskhpc.runtime import WorkersMissing, worker_info  # noqa: E402

# dask-jobqueue's LocalJob kills its job's process at close without reaping it (and leaves
# its pipes to the garbage collector): ResourceWarnings of the library's, not of the run
pytestmark = [pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
              pytest.mark.filterwarnings("ignore::ResourceWarning")]

# the job's "python": reports the job as started to dask-jobqueue, then never runs a worker
QUEUED = "#!/bin/sh\necho 'Registered to: nothing (the job waits in the queue)' >&2\n" \
         "exec sleep 600\n"
# starts the real worker once the test opens the gate
GATED = "#!/bin/sh\nwhile [ ! -e {gate} ]; do sleep 0.05; done\nexec {python} \"$@\"\n"


def job_cluster(python: str, tmp_path):
    return jobqueue.LocalCluster(
        cores=1, processes=1, memory="1GB", python=python, walltime=None,
        security=True, shared_temp_directory=str(tmp_path),     # TLS, made for this cluster
        local_directory=str(tmp_path), log_directory=None,
        scheduler_options={"host": "127.0.0.1", "dashboard_address": "127.0.0.1:0"},
        worker_extra_args=["--host", "127.0.0.1"])


def close_credentials(cluster) -> None:
    """Close the credential files dask-jobqueue wrote for the jobs (security=True): it
    leaves them to the garbage collector, whose ResourceWarnings would land in a later
    test."""
    for key in ("ca_file", "cert", "key"):
        f = getattr(cluster, f"_job_{key}", None)
        if f is not None:
            f.close()


def script(path, text: str) -> str:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.fixture(scope="module")
def queued(tmp_path_factory):
    """A dask-jobqueue cluster scaled to 2 whose jobs never start (a busy queue)."""
    tmp = tmp_path_factory.mktemp("queued")
    with job_cluster(script(tmp / "queued.sh", QUEUED), tmp) as cluster, \
            Client(cluster) as client:
        cluster.scale(2)
        yield cluster, client
    close_credentials(cluster)


def small_cpals(client, **run):
    return dh.cpals.fit(dh.datasets.path("tensor"), 8, 2, iters=4, tol=0, client=client,
                        progress=False, **run)


def test_too_few_workers_fail_after_the_timeout_with_one_line(queued):
    cluster, client = queued
    with pytest.raises(WorkersMissing) as e:
        small_cpals(client, worker_timeout=0.5)
    assert str(e.value).startswith("0 of the 2 workers this run needs joined in 0.5 s")
    assert "\n" not in str(e.value)
    assert len(cluster.plan) == 2            # the jobs are still queued: nothing was given up


def test_the_config_key_bounds_the_wait(queued):
    import dask.config

    _, client = queued
    with dask.config.set({"daskhpc.runtime.worker-timeout": "300ms"}), \
            pytest.raises(WorkersMissing, match=r"joined in 0.3 s"):
        small_cpals(client)


def test_adaptive_scaling_is_refused(queued):
    cluster, client = queued
    adaptive = cluster.adapt(minimum=2, maximum=2)
    try:
        with pytest.raises(InputError, match=r"scales adaptively \(cluster.adapt\(\)\)") as e:
            small_cpals(client, worker_timeout=0.5)
        assert "\n" not in str(e.value)
    finally:
        adaptive.stop()
    with pytest.raises(WorkersMissing):        # stopped: the wait (and its message) again
        small_cpals(client, worker_timeout=0.2)


def _open_when_waiting(gate, main: int, seconds: float = 300) -> None:
    """Open the gate once the main thread is inside the run's wait for its workers."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        frame = sys._current_frames().get(main)
        while frame is not None and frame.f_code.co_name != "wait_for_cluster":
            frame = frame.f_back
        if frame is not None:
            break
        time.sleep(0.05)
    gate.touch()


@pytest.mark.slow             # two worker processes started as jobs (~10 s on a quiet machine)
@pytest.mark.timeout(600)
def test_a_run_waits_for_its_jobs_and_equals_the_local_cluster_run(tmp_path, client2):
    gate = tmp_path / "go"
    python = script(tmp_path / "gated.sh", GATED.format(gate=gate, python=sys.executable))
    ref = small_cpals(client2)
    with job_cluster(python, tmp_path) as cluster, Client(cluster) as client:
        cluster.scale(2)
        assert worker_info(client) == {}     # the gate is shut
        opener = threading.Thread(target=_open_when_waiting,
                                  args=(gate, threading.get_ident()), daemon=True)
        opener.start()
        res = small_cpals(client, worker_timeout=300)
        opener.join()
        names = sorted(w["name"] for w in worker_info(client).values())
    assert names == ["LocalCluster-0", "LocalCluster-1"]
    assert cluster.scheduler_address.startswith("tls://127.0.0.1:")
    assert res.report()["execution"]["workers"] == 2
    assert res.fit == ref.fit and np.array_equal(res.weights, ref.weights)
    assert all(np.array_equal(x, y) for x, y in zip(res.factors, ref.factors))
    assert os.path.exists(gate)
    close_credentials(cluster)
