"""``python -m daskhpc.slurm`` on tasks started by the test as srun would start them.

No srun and no mpiexec: the test starts N processes itself with ``SLURM_PROCID``,
``SLURM_NTASKS``, ``SLURM_JOB_ID`` and ``SLURM_SUBMIT_DIR`` set by hand (the shared
directory is the test's tmp_path). Workflows run on bundled data with the arguments of
their ``small_run()`` and must give the LocalCluster run's result; bad options, a lost
worker task and the worker class must behave as ``python -m daskhpc.mpi`` does.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from daskhpc import _workflows

TASKS = 4        # scheduler, client, two workers (the machine is small)
JOBS = os.path.join(os.path.dirname(__file__), "..", "..", "workflows", "jobs")


def start_tasks(args, shared_dir, n: int = TASKS, job_id: str = "4242"):
    """Start the launcher on n tasks; returns their Popen objects (stdout/stderr to files)."""
    procs = []
    for rank in range(n):
        env = {**os.environ, "SLURM_PROCID": str(rank), "SLURM_NTASKS": str(n),
               "SLURM_JOB_ID": job_id, "SLURM_SUBMIT_DIR": str(shared_dir)}
        env.pop("SLURM_STEP_ID", None)
        out = open(shared_dir / f"task{rank}.log", "w")
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "daskhpc.slurm", "--interface", "lo",
             "--dashboard-address", "127.0.0.1:0", *args],
            env=env, stdout=out, stderr=subprocess.STDOUT, cwd=shared_dir))
        out.close()
    return procs


def finish(procs, timeout: float = 300) -> list[int]:
    """Exit statuses of every task (kills the ones still running after timeout)."""
    deadline = time.monotonic() + timeout
    codes = []
    for p in procs:
        try:
            codes.append(p.wait(timeout=max(deadline - time.monotonic(), 1)))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
    return codes


def log(shared_dir, rank: int) -> str:
    return (shared_dir / f"task{rank}.log").read_text()


def job_files(shared_dir) -> list[str]:
    return sorted(p.name for p in shared_dir.iterdir() if p.name.startswith("daskhpc-scheduler"))


@pytest.mark.slow             # CI budget: the killed-worker test starts the same launcher
@pytest.mark.timeout(900)     # two runs at once on a small, busy machine
@pytest.mark.parametrize("name", ["ssgd", "cpals"])
def test_workflow_gives_the_local_cluster_result(name, tmp_path):
    args = list(_workflows.load(name).small_run())
    procs = start_tasks([name, *args, "--json", str(tmp_path / "srun.json")], tmp_path)
    local = subprocess.run([os.path.join(os.path.dirname(sys.executable), "daskhpc"), "run",
                            name, *args, "--workers", "2", "--json", str(tmp_path / "local.json")],
                           capture_output=True, text=True, timeout=600)
    codes = finish(procs, timeout=600)
    assert codes == [0] * TASKS, log(tmp_path, 1) + log(tmp_path, 0)
    assert local.returncode == 0, local.stderr
    srun = json.loads((tmp_path / "srun.json").read_text())
    ref = json.loads((tmp_path / "local.json").read_text())
    assert srun["slurm"] == {"ranks": TASKS, "scheduler_rank": 0, "client_rank": 1,
                             "workers": TASKS - 2, "job_id": "4242"}
    assert srun["command"].startswith("python -m daskhpc.slurm")
    assert srun["quality"] == ref["quality"]
    assert srun["serial_check"]["identical"] is True, srun["serial_check"]
    for rank in (0, 2, 3):       # clean runs print nothing on the other tasks
        assert log(tmp_path, rank) == "", log(tmp_path, rank)
    assert "Traceback" not in log(tmp_path, 1)
    assert job_files(tmp_path) == []         # scheduler file and credentials removed


def test_the_client_task_says_it_joins_the_srun_job(tmp_path):
    """Progress lines (``--progress``, as in a job's log) name the srun job, not MPI."""
    procs = start_tasks(["allreduce", "--N", "2000", "--parts", "2", "--density", "0.05",
                         "--repeat", "1", "--progress"], tmp_path)
    assert finish(procs) == [0] * TASKS, log(tmp_path, 1) + log(tmp_path, 0)
    client = log(tmp_path, 1)
    assert "joining the srun job's scheduler" in client and "MPI" not in client, client


def test_bad_option_ends_every_task_with_2_before_start_up(tmp_path):
    procs = start_tasks(["--worker-options", "[1]", "ssgd", "ratings"], tmp_path)
    assert finish(procs, timeout=120) == [2] * TASKS
    assert "--worker-options must be a JSON object" in log(tmp_path, 0)
    assert all(log(tmp_path, rank) == "" for rank in (1, 2, 3))   # printed once
    procs = start_tasks(["ssgd", "ratings", "--workers", "3"], tmp_path)
    assert finish(procs, timeout=120) == [2] * TASKS
    assert "--workers does not apply under srun" in log(tmp_path, 0)
    assert job_files(tmp_path) == []


HOLD = textwrap.dedent("""
    import sys, time
    import daskhpc as dh
    from daskhpc.runtime import worker_addresses

    client = dh.connect()
    # as a workflow's WorkerWatch does: the scheduler then sends this client every event
    # (a client gone when the job ends made it log a CRITICAL traceback)
    client.subscribe_topic("all", lambda event: None)
    last = worker_addresses(client)[-1]
    future = client.submit(time.sleep, 600, workers=[last], allow_other_workers=False)
    open(sys.argv[1], "w").close()          # the work is running: the test kills a worker
    future.result()
""")


def test_killed_worker_task_ends_the_job_with_3(tmp_path):
    script, started = tmp_path / "hold.py", tmp_path / "started"
    script.write_text(HOLD)
    procs = start_tasks([str(script), str(started)], tmp_path)
    deadline = time.monotonic() + 300
    while not started.exists():
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs), \
            log(tmp_path, 1) + log(tmp_path, 0)
        time.sleep(0.2)
    # the task of the worker holding the pinned task, as the OOM killer would
    sched = json.loads((tmp_path / "daskhpc-scheduler-4242.json").read_text())
    assert sched["address"].startswith("tls://")
    procs[-1].send_signal(signal.SIGKILL)
    t0 = time.monotonic()
    codes = finish(procs[:-1], timeout=120)
    seconds = time.monotonic() - t0
    assert procs[-1].wait() == -signal.SIGKILL
    assert codes == [3, 3, 3], [log(tmp_path, r) for r in range(3)]
    assert f"worker rank {TASKS - 1} (tls://127.0.0.1:" in log(tmp_path, 0)
    assert "left the cluster before the job finished" in log(tmp_path, 0)
    # the scheduler's line is the last word: no traceback of the comms the end closed
    assert "CRITICAL" not in log(tmp_path, 0) and "Traceback" not in log(tmp_path, 0), \
        log(tmp_path, 0)
    # the client task, whose log may be read alone (srun --output=%t), says why it stopped
    assert f"worker rank {TASKS - 1} (tls://127.0.0.1:" in log(tmp_path, 1), log(tmp_path, 1)
    assert "Traceback" not in log(tmp_path, 1), log(tmp_path, 1)
    assert job_files(tmp_path) == []
    print(f"the job ended {seconds:.1f} s after the worker task was killed")


PROBE = textwrap.dedent("""
    import json, os, stat, sys
    import daskhpc as dh

    client = dh.connect()
    pem = sys.argv[2]
    workers = dh.runtime.worker_info(client).values()
    json.dump({"workers": sorted([w["name"], bool(w.get("nanny")), w["memory_limit"]]
                                 for w in workers),
               "pem_mode": oct(stat.S_IMODE(os.stat(pem).st_mode)),
               "address": client.scheduler.address}, open(sys.argv[1], "w"))
""")


@pytest.mark.slow             # CI budget (the mpi test of the same options runs by default)
def test_worker_class_and_options_reach_the_workers(tmp_path):
    script, out = tmp_path / "probe.py", tmp_path / "probe.json"
    script.write_text(PROBE)
    pem = tmp_path / "daskhpc-scheduler-4242.json.tls.pem"
    procs = start_tasks(["--worker-class", "distributed.Nanny",
                         "--worker-options", '{"memory_limit": "300MB"}',
                         str(script), str(out), str(pem)], tmp_path)
    assert finish(procs) == [0] * TASKS, log(tmp_path, 1) + log(tmp_path, 0)
    probe = json.loads(out.read_text())
    assert probe["workers"] == [[2, True, 300_000_000], [3, True, 300_000_000]]
    assert probe["pem_mode"] == "0o600"            # the job's credentials: the user's only
    assert probe["address"].startswith("tls://")
    assert all(log(tmp_path, rank) == "" for rank in (0, 2, 3))
    assert job_files(tmp_path) == []


def test_job_scripts_parse():
    for script in ("slurm-srun.sh", "pbs-srun.sh"):
        subprocess.run(["bash", "-n", os.path.join(JOBS, script)], check=True)
