"""``python -m daskhpc.mpi`` under a real ``mpiexec -n 5`` (the mpich wheel's).

Every registered workflow runs on bundled data with the arguments its CLI module
gives in ``Workflow.small_run()`` (the arguments
after the workflow name, for 3 workers, a few seconds); failures, lost ranks and
bad options must end every rank quickly with the documented exit status.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from daskhpc import _workflows, datasets

MPIEXEC = os.path.join(sys.prefix, "bin", "mpiexec")
RANKS = 5

pytestmark = pytest.mark.skipif(
    not os.path.exists(MPIEXEC), reason=f"no mpiexec at {MPIEXEC} (pip install '.[mpi]')")

def mpirun(*args, n: int = RANKS, env: dict | None = None, timeout: float = 120):
    """Run the launcher under mpiexec; returns (CompletedProcess, seconds)."""
    # the loopback interface: the scheduler, workers and dashboard stay on this machine
    cmd = [MPIEXEC, "-n", str(n), sys.executable, "-m", "daskhpc.mpi", "--interface", "lo", *args]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
    return proc, time.monotonic() - t0


def workflow_args(name: str):
    args = _workflows.load(name).small_run()
    if not args:
        pytest.skip(f"workflow {name!r} declares no small run (Workflow.small_run)")
    return list(args)


# ssgd and spgemm (attempt graphs) and cpals (a Program) in the default run, the other
# Program workflows with -m slow (the CI budget; test_workflows runs every one's report).
@pytest.mark.parametrize("name", [
    n if n == "ssgd" else pytest.param(n, marks=pytest.mark.slow)
    for n in sorted(_workflows.available())])
def test_workflow_runs_under_mpiexec(name, tmp_path):
    out = tmp_path / "report.json"
    saved = tmp_path / "model"
    proc, seconds = mpirun("--dashboard-address", "127.0.0.1:0", name, *workflow_args(name),
                           "--json", str(out), "--save", str(saved))
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "CommClosedError" not in proc.stderr, proc.stderr
    assert "dashboard: http://" in proc.stderr       # printed before the work starts
    report = json.loads(out.read_text())
    assert report["workflow"] == name
    assert report["mpi"] == {"ranks": RANKS, "scheduler_rank": 0, "client_rank": 1,
                             "workers": RANKS - 2}
    assert report.get("workers", RANKS - 2) == RANKS - 2
    assert report["command"].startswith("python -m daskhpc.mpi")
    if "serial_check" in report:
        assert report["serial_check"]["identical"] is True, report["serial_check"]
    # the model the job saved, loaded in a fresh process: its report is the job's own
    load = ("import json, sys, daskhpc; r = daskhpc.load(sys.argv[1]); "
            "print(json.dumps([r.workflow, r.report()['quality']]))")
    done = subprocess.run([sys.executable, "-c", load, str(saved)], capture_output=True,
                          text=True, timeout=280)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [name, report["quality"]]
    print(f"{name}: mpiexec -n {RANKS} took {seconds:.1f} s")


SCRIPT = textwrap.dedent("""
    import json, sys, urllib.request
    import dask
    import daskhpc as dh
    from daskhpc.runtime import worker_addresses

    client = dh.connect()                       # joins the job's scheduler
    key = "daskhpc.partitioner.default"
    def sched(dask_scheduler):
        amm = dask_scheduler.extensions.get("amm")
        return {"config": dask.config.get(key), "stealing": "stealing" in dask_scheduler.extensions,
                "amm": bool(amm and amm.running), "plugins": sorted(dask_scheduler.plugins)}
    def worker(dask_worker):
        return {"config": dask.config.get(key),
                "log_length": dask.config.get("distributed.admin.low-level-log-length"),
                "metrics": sorted(dask_worker.metrics)}
    base = client.dashboard_link.rsplit("/", 1)[0]
    page = urllib.request.urlopen(base + "/individual-daskhpc-comm", timeout=10)
    with open(sys.argv[1]) as f:
        scheduler_file = json.load(f)
    out = {"argv": sys.argv[1:], "workers": len(worker_addresses(client)),
           "client": dask.config.get(key), "scheduler": client.run_on_scheduler(sched),
           "workers_seen": list(client.run(worker).values()), "page": page.status,
           "scheduler_file": scheduler_file["address"] == client.scheduler.address,
           "dashboard": client.dashboard_link, "address": client.scheduler.address,
           "worker_addresses": worker_addresses(client)}
    with open(sys.argv[2], "w") as f:
        json.dump(out, f)
""")


@pytest.mark.slow             # CI budget (20 min on 2 cores): default run keeps a lighter test of the same path
def test_script_sees_cluster_config_and_settings(tmp_path):
    script = tmp_path / "probe.py"
    script.write_text(SCRIPT)
    sched_file, out = tmp_path / "scheduler.json", tmp_path / "probe.json"
    proc, _ = mpirun("--scheduler-file", str(sched_file), "--dashboard-address", "127.0.0.1:0",
                     str(script), str(sched_file), str(out),
                     env={"DASK_DASKHPC__PARTITIONER__DEFAULT": "random"})
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    got = json.loads(out.read_text())
    assert got["workers"] == RANKS - 2
    assert got["argv"] == [str(sched_file), str(out)]
    # daskhpc settings from the environment reach every rank
    assert got["client"] == got["scheduler"]["config"] == "random"
    assert [w["config"] for w in got["workers_seen"]] == ["random"] * (RANKS - 2)
    # the cluster config connect() gives a LocalCluster, on every rank
    assert got["scheduler"]["stealing"] is False and got["scheduler"]["amm"] is False
    assert {w["log_length"] for w in got["workers_seen"]} == {1000}      # Dask's default
    # dashboard pages and their data plugin, the rank watch, the byte counters
    assert {"daskhpc-dashboard", "daskhpc-mpi-watch"} <= set(got["scheduler"]["plugins"])
    assert all("daskhpc-sent" in w["metrics"] for w in got["workers_seen"])
    assert got["page"] == 200 and got["dashboard"].startswith("http://127.0.0.1:")
    assert got["scheduler_file"] is True
    assert not sched_file.exists()   # removed when the job ends
    assert not os.path.exists(str(sched_file) + ".tls.pem")   # the credentials too
    # private by default: daskhpc.connect() on rank 1 joined over TLS
    assert got["address"].startswith("tls://")
    assert all(a.startswith("tls://") for a in got["worker_addresses"])


@pytest.mark.slow             # CI budget (20 min on 2 cores): default run keeps a lighter test of the same path
def test_workflow_failure_ends_every_rank_quickly(tmp_path):
    # the consumer fails on the workers: the error comes back, every rank exits
    proc, seconds = mpirun("spgemm", datasets.path("ratings"), "--aat", "--grid", "1x1x3",
                           "--consume", "write:/proc/daskhpc-no-such-dir")
    assert proc.returncode == 2, proc.stderr
    assert "daskhpc: error:" in proc.stderr and "no-such-dir" in proc.stderr
    assert seconds < 60


@pytest.mark.slow             # CI budget (20 min on 2 cores): default run keeps a lighter test of the same path
def test_script_error_is_status_1_with_its_traceback(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text("import daskhpc as dh\nclient = dh.connect()\nraise ValueError('boom')\n")
    proc, seconds = mpirun(str(script))
    assert proc.returncode == 1
    assert "ValueError: boom" in proc.stderr
    assert seconds < 60


@pytest.mark.slow             # CI budget (20 min on 2 cores): default run keeps a lighter test of the same path
def test_bad_options_exit_2_before_start_up():
    proc, seconds = mpirun("spgemm", "x.mtx", "--no-such-option")
    assert proc.returncode == 2
    assert proc.stderr.count("unknown option --no-such-option") == 1   # rank 0 only
    proc, _ = mpirun("spgemm", "x.mtx", "--workers", "3")
    assert proc.returncode == 2 and "--workers does not apply under mpiexec" in proc.stderr
    proc, _ = mpirun("no-such-workflow")
    assert proc.returncode == 2 and "neither a workflow" in proc.stderr
    proc, _ = mpirun(datasets.path("ratings"))     # a data file is not a script
    assert proc.returncode == 2 and "nor a .py script" in proc.stderr
    proc, _ = mpirun("spgemm", "x.mtx", n=2)
    assert proc.returncode == 2 and "needs at least 3 MPI ranks" in proc.stderr


LOSE_A_WORKER = textwrap.dedent("""
    import os, signal, sys
    import daskhpc as dh
    from daskhpc.runtime import worker_addresses

    client = dh.connect()
    last = worker_addresses(client)[-1]
    if sys.argv[1] == "kill":         # the rank dies (OOM killer, node failure)
        pid = client.run(os.getpid, workers=[last])[last]
        os.kill(pid, signal.SIGKILL)
    else:                             # the worker leaves, its process lives on
        client.run(lambda dask_worker: dask_worker.loop.add_callback(dask_worker.close),
                   workers=[last])
    # a task pinned to the lost worker would wait forever
    print(client.submit(sum, [1, 2], workers=[last], allow_other_workers=False).result())
""")


def test_killed_worker_rank_ends_the_job(tmp_path):
    script = tmp_path / "lose.py"
    script.write_text(LOSE_A_WORKER)
    proc, seconds = mpirun("--timeout", "100", str(script), "kill")
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    # ours, if the scheduler rank got there first, and mpiexec's own
    assert "left the cluster" in out or "BAD TERMINATION" in out, out
    assert seconds < 60


@pytest.mark.slow             # CI budget (20 min on 2 cores): default run keeps a lighter test of the same path
def test_worker_leaving_ends_the_job_with_status_3(tmp_path):
    script = tmp_path / "lose.py"
    script.write_text(LOSE_A_WORKER)
    proc, seconds = mpirun("--timeout", "100", str(script), "leave")
    assert proc.returncode == 3, proc.stderr
    assert f"worker rank {RANKS - 1} (tls://127.0.0.1:" in proc.stderr
    assert "left the cluster before the job finished" in proc.stderr
    assert seconds < 60


@pytest.mark.slow             # CI budget (20 min on 2 cores): default run keeps a lighter test of the same path
def test_timeout_ends_a_job_that_runs_too_long(tmp_path):
    script = tmp_path / "slow.py"
    script.write_text("import time\ntime.sleep(120)\n")
    proc, seconds = mpirun("--timeout", "2", str(script))
    assert proc.returncode == 1
    assert "ran longer than --timeout 2 s" in proc.stderr
    assert seconds < 60


JOBS = os.path.join(os.path.dirname(__file__), "..", "..", "workflows", "jobs")


@pytest.mark.slow             # CI budget (20 min on 2 cores): default run keeps a lighter test of the same path
def test_job_scripts(tmp_path):
    for script in ("slurm-spgemm.sh", "pbs-spgemm.sh"):
        subprocess.run(["bash", "-n", os.path.join(JOBS, script)], check=True)
    # the SLURM script itself, as sbatch would start it on one node with 5 tasks
    env = {**os.environ, "SLURM_NTASKS": str(RANKS), "SLURM_JOB_ID": "42", "LAYERS": "3",
           "PATH": os.path.dirname(MPIEXEC) + os.pathsep + os.environ.get("PATH", ""),
           "DASKHPC_MPI_ARGS": "--interface lo --dashboard-address 127.0.0.1:0",
           "EXTRA_ARGS": "--check-serial", "CHECKPOINT": str(tmp_path / "ck")}
    proc = subprocess.run(["bash", os.path.join(JOBS, "slurm-spgemm.sh")], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "spgemm-42.json").read_text())
    assert report["workers"] == RANKS - 2 and report["grid"] == "1x1x3"
    assert report["serial_check"]["identical"] is True
    assert not (tmp_path / "scheduler-42.json").exists()
    assert not (tmp_path / "scheduler-42.json.tls.pem").exists()
    # resubmitted: the same script resumes from the checkpoint and has nothing left to do
    proc = subprocess.run(["bash", os.path.join(JOBS, "slurm-spgemm.sh")], cwd=tmp_path,
                          env={**env, "SLURM_JOB_ID": "43"}, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    again = json.loads((tmp_path / "spgemm-43.json").read_text())
    assert again["checkpoint"]["batches_run"] == 0, again["checkpoint"]
    assert again["quality"]["nnz_c"] == report["quality"]["nnz_c"]
    assert again["serial_check"]["identical"] is True


KILLED_MID_RUN = textwrap.dedent("""
    import sys
    import dask
    import daskhpc as dh
    from daskhpc.testing import KillOnce, TaskKey

    client = dh.connect()
    # the worker holding part 2 dies when it starts epoch 3 (direct exchange: one task
    # per part and epoch with units-per-task 1) or sub-epoch 1 of epoch 3 (graph: one
    # task per step)
    dask.config.set({"daskhpc.runtime.units-per-task": 1})
    key = (TaskKey("ssgd-epoch", {1: 2, 2: 3}) if dh.runtime.exchange_mode() == "direct"
           else TaskKey("ssgd-step", {1: 2, 2: 3, 3: 1}))
    client.register_plugin(KillOnce(key, sys.argv[2]), name="kill")
    dh.ssgd.fit(sys.argv[1], 3, client=client, epochs=6, partition="random",
                checkpoint=sys.argv[3])
""")


@pytest.mark.slow             # CI budget (20 min on 2 cores): default run keeps a lighter test of the same path
def test_resume_in_a_new_job_after_a_rank_died(tmp_path):
    """A dead rank ends the job; a new job with --resume finishes from the checkpoint
    and ends with the serial reference's W and H of the whole run."""
    script, ck, out = tmp_path / "job1.py", tmp_path / "ck", tmp_path / "r.json"
    script.write_text(KILLED_MID_RUN)
    ratings = datasets.path("ratings")
    proc, _ = mpirun("--timeout", "100", str(script), ratings, str(tmp_path / "killed"),
                     str(ck))
    assert proc.returncode != 0 and (tmp_path / "killed").exists(), proc.stderr
    saved = json.loads((ck / "manifest.json").read_text())["complete"]
    assert 1 <= len(saved) < 6
    proc, _ = mpirun("ssgd", ratings, "--parts", "3", "--epochs", "6", "--partition",
                     "random", "--checkpoint", str(ck), "--resume", "--check-serial",
                     "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    rep = json.loads(out.read_text())
    assert rep["recovery"]["resumed_from"] >= len(saved)
    assert rep["serial_check"]["identical"] and rep["serial_check"]["history_identical"]
    assert rep["quality"]["test_rmse_epochs"] == list(range(6))


WORKER_PROBE = textwrap.dedent("""
    import json, sys
    import daskhpc as dh

    client = dh.connect()
    workers = dh.runtime.worker_info(client).values()
    json.dump(sorted([w["name"], bool(w.get("nanny")), w["memory_limit"]] for w in workers),
              open(sys.argv[1], "w"))
""")


@pytest.mark.slow             # CI budget: one more mpiexec job
def test_worker_class_and_options_reach_the_workers(tmp_path):
    script, out = tmp_path / "probe.py", tmp_path / "workers.json"
    script.write_text(WORKER_PROBE)
    proc, _ = mpirun("--worker-class", "distributed.Nanny",
                     "--worker-options", '{"memory_limit": "300MB"}', str(script), str(out),
                     n=3)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text()) == [[2, True, 300_000_000]]
    assert "Traceback" not in proc.stderr, proc.stderr
    proc, _ = mpirun("--worker-options", "{memory_limit: 4GB}", str(script), str(out), n=3)
    assert proc.returncode == 2 and "--worker-options is not JSON" in proc.stderr
