"""Several hosts on one machine: every process on a loopback address of its own.

The scheduler listens on 127.0.0.2 and worker i on 127.0.0.(3 + i), each worker with a
local directory of its own, the job's TLS credentials on (``daskhpc._mpi_security``, as
the launchers make them); the client is ``daskhpc run --scheduler-file``, and the
checkpoint directory is the only one the workers share. A wrong address, a certificate
made for one host or a checkpoint path only one process sees fails here, where on
127.0.0.1 it cannot. While the runs run, no process listens on every interface.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time

import pytest

from daskhpc import _mpi_security, _workflows

BIN = os.path.dirname(sys.executable)
SCHEDULER_HOST = "127.0.0.2"
WORKER_HOSTS = ("127.0.0.3", "127.0.0.4")
ANYWHERE = ("0.0.0.0", "::")
#: Workflows without --checkpoint (one call per repetition: nothing to resume)
NO_CHECKPOINT = {"allreduce"}


def listening(pids) -> list[tuple[str, int, int]]:
    """``(address, port, pid)`` of every listening TCP socket the processes ``pids`` own
    (read from /proc: no ss needed)."""
    inodes = {}
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes[link[8:-1]] = pid
    found = []
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        with open(table) as f:
            next(f)
            for line in f:
                cols = line.split()
                if cols[3] != "0A" or cols[9] not in inodes:      # 0A: LISTEN
                    continue
                hexip, hexport = cols[1].split(":")
                raw = b"".join(struct.pack("<I", int(hexip[i:i + 8], 16))
                               for i in range(0, len(hexip), 8))
                found.append((socket.inet_ntop(family, raw), int(hexport, 16),
                              inodes[cols[9]]))
    return found


def family(pid: int) -> set[int]:
    """``pid`` and its descendants (a nanny's worker process, a launcher's children)."""
    pids, grew = {pid}, True
    while grew:
        grew = False
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) not in pids:
                try:
                    with open(f"/proc/{entry}/stat") as f:
                        parent = int(f.read().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    continue
                if parent in pids:
                    pids.add(int(entry))
                    grew = True
    return pids


class Sockets:
    """Every listening socket of some process trees, sampled in a thread until stopped."""

    def __init__(self, roots: dict[str, int]):
        self.roots, self.seen = roots, {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self):
        while not self._stop.is_set():
            for name, root in self.roots.items():
                for addr, port, _ in listening(family(root)):
                    self.seen.setdefault(name, set()).add((addr, port))
            self._stop.wait(0.5)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    """A TLS scheduler and two nanny workers, each on a loopback address of its own."""
    root = tmp_path_factory.mktemp("hosts")
    sched_dir = root / "scheduler"
    sched_dir.mkdir()
    sched_file = sched_dir / "scheduler.json"
    pem = _mpi_security.credentials_path(str(sched_file))    # where connect() looks for it
    _mpi_security.write_credentials(pem, _mpi_security.new_credentials())
    tls = ["--tls-ca-file", pem, "--tls-cert", pem, "--tls-key", pem]
    env = {**os.environ, "DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION": "True",
           "DASK_DISTRIBUTED__SCHEDULER__WORK_STEALING": "False"}
    logs, procs = [], {}

    def start(name, args, cwd):
        out = open(root / f"{name}.log", "w")
        logs.append(out)
        procs[name] = subprocess.Popen([os.path.join(BIN, "dask"), *args], env=env, cwd=cwd,
                                       stdout=out, stderr=subprocess.STDOUT)

    start("scheduler", ["scheduler", "--host", SCHEDULER_HOST, "--port", "0", "--protocol",
                        "tls", "--dashboard-address", f"{SCHEDULER_HOST}:0",
                        "--scheduler-file", str(sched_file), *tls], sched_dir)
    deadline = time.monotonic() + 120
    while not sched_file.exists() or not sched_file.read_text().strip().endswith("}"):
        assert time.monotonic() < deadline and procs["scheduler"].poll() is None, \
            (root / "scheduler.log").read_text()
        time.sleep(0.2)
    address = json.loads(sched_file.read_text())["address"]
    for i, host in enumerate(WORKER_HOSTS):
        local = root / f"worker{i}"
        local.mkdir()
        start(f"worker{i}", ["worker", address, "--host", host, "--name", str(i),
                             "--nthreads", "1", "--nanny", "--local-directory", str(local),
                             "--dashboard-address", f"{host}:0", *tls], local)
    try:
        import daskhpc as dh

        with dh.connect(scheduler_file=str(sched_file)) as client:   # TLS: F.tls.pem
            client.wait_for_workers(len(WORKER_HOSTS), timeout=300)
        yield {"root": root, "scheduler_file": str(sched_file), "address": address,
               "procs": procs}
    finally:
        for p in procs.values():
            p.terminate()
        for p in procs.values():
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        for out in logs:
            out.close()


def untimed(section):
    """A report section without its timings (allreduce's quality has measured_call_s)."""
    return {k: v for k, v in (section or {}).items() if not k.endswith("_s")}


def run(argv, cwd, timeout=900):
    return subprocess.run([os.path.join(BIN, "daskhpc"), *argv], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.slow             # a scheduler, two workers and two runs of each workflow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("name", sorted(n for n in _workflows.available()
                                         if _workflows.load(n).small_run()))
def test_a_run_across_addresses_equals_the_single_host_run(name, hosts, tmp_path):
    assert hosts["address"].startswith(f"tls://{SCHEDULER_HOST}:")
    args = list(_workflows.load(name).small_run())
    client_dir = tmp_path / "client"
    client_dir.mkdir()
    shared = tmp_path / "checkpoints"         # the one directory every process sees
    roots = {n: p.pid for n, p in hosts["procs"].items()}
    ck = [] if name in NO_CHECKPOINT else ["--checkpoint", str(shared)]
    with Sockets(roots) as sockets:
        multi = run([*["run", name], *args, "--scheduler-file", hosts["scheduler_file"],
                     *ck, "--json", "multi.json"], client_dir)
    assert multi.returncode == 0, multi.stderr
    local_ck = ["--checkpoint", str(tmp_path / "ck1")] if ck else []
    local = run(["run", name, *args, "--workers", "2", *local_ck, "--json", "local.json"],
                client_dir)
    assert local.returncode == 0, local.stderr
    got = json.loads((client_dir / "multi.json").read_text())
    ref = json.loads((client_dir / "local.json").read_text())
    assert untimed(got.get("quality")) == untimed(ref.get("quality"))
    assert got["serial_check"]["identical"] is True, got["serial_check"]
    if "recovery" in got:
        assert got["recovery"]["saved"] == ref["recovery"]["saved"]
    # the checkpoint was written by the workers into the shared directory only
    assert bool(ck) == shared.exists() and (not ck or any(shared.iterdir()))
    for i in range(len(WORKER_HOSTS)):
        assert not any((hosts["root"] / f"worker{i}").glob("**/*.npz"))
    # every process listened on its own address, nowhere else
    expect = {"scheduler": SCHEDULER_HOST,
              **{f"worker{i}": host for i, host in enumerate(WORKER_HOSTS)}}
    assert set(sockets.seen) == set(expect), sockets.seen
    for who, addrs in sockets.seen.items():
        assert {a for a, _ in addrs} == {expect[who]}, (who, addrs)


HOLD = """
import os, sys, time
import daskhpc as dh

client = dh.connect()
open(sys.argv[1], "w").close()           # the cluster is up: the test looks at the sockets
deadline = time.monotonic() + 300
while not os.path.exists(sys.argv[2]) and time.monotonic() < deadline:
    time.sleep(0.1)
"""


@pytest.mark.slow             # starts the launcher's four tasks
@pytest.mark.timeout(600)
def test_the_srun_launcher_listens_on_no_wildcard_address_without_interface(tmp_path):
    script, started, done = tmp_path / "hold.py", tmp_path / "started", tmp_path / "done"
    script.write_text(HOLD)
    procs = []
    for rank in range(4):
        env = {**os.environ, "SLURM_PROCID": str(rank), "SLURM_NTASKS": "4",
               "SLURM_JOB_ID": "4343", "SLURM_SUBMIT_DIR": str(tmp_path)}
        out = open(tmp_path / f"task{rank}.log", "w")
        procs.append(subprocess.Popen(   # no --interface: the launcher picks the address
            [sys.executable, "-m", "daskhpc.slurm", "--dashboard-address", "127.0.0.1:0",
             str(script), str(started), str(done)],
            env=env, stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path))
        out.close()
    try:
        deadline = time.monotonic() + 300
        while not started.exists():
            assert time.monotonic() < deadline and all(p.poll() is None for p in procs), \
                (tmp_path / "task1.log").read_text() + (tmp_path / "task0.log").read_text()
            time.sleep(0.2)
        found = {rank: listening(family(p.pid)) for rank, p in enumerate(procs)}
    finally:
        done.touch()
        codes = [p.wait(timeout=300) for p in procs]
    assert codes == [0] * 4
    assert found[0] and found[2] and found[3], found       # scheduler and both workers
    wild = [(rank, s) for rank, socks in found.items() for s in socks if s[0] in ANYWHERE]
    assert wild == []


@pytest.mark.slow             # three CLI runs and a nanny restart
@pytest.mark.timeout(1800)
def test_a_killed_worker_and_resume_across_addresses(hosts, tmp_path):
    import daskhpc as dh
    from daskhpc.testing import KillOnce, TaskKey

    path = dh.datasets.path("tensor")
    base = ["run", "cpals", path, "--parts", "2", "--rank", "5", "--tol", "0"]
    multi = [*base, "--scheduler-file", hosts["scheduler_file"],
             "--checkpoint", str(tmp_path / "shared")]
    first = run([*multi, "--iters", "3"], tmp_path)
    assert first.returncode == 0, first.stderr
    # the resumed run's first task kills its worker (a nanny starts it again, same host)
    marker = tmp_path / "killed"
    with dh.connect(scheduler_file=hosts["scheduler_file"]) as client:
        client.register_plugin(KillOnce(TaskKey("cpals-"), str(marker)), name="kill-hosts")
        try:
            second = run([*multi, "--iters", "6", "--resume", "--json", "multi.json"],
                         tmp_path)
        finally:
            client.unregister_worker_plugin("kill-hosts")
    assert second.returncode == 0, second.stderr
    ref = run([*base, "--iters", "6", "--workers", "2", "--json", "local.json"], tmp_path)
    assert ref.returncode == 0, ref.stderr
    got = json.loads((tmp_path / "multi.json").read_text())
    want = json.loads((tmp_path / "local.json").read_text())
    killed = marker.read_text().split()[0]
    assert killed.startswith("tls://127.0.0.")
    rec = got["recovery"]
    assert rec["resumed_from"] == 3
    assert len(rec["recoveries"]) == 1 and rec["recoveries"][0]["lost"] == [killed]
    assert rec["recoveries"][0]["restart"] == 3          # from the shared checkpoint
    assert got["quality"] == want["quality"]


#: Per workflow: the tasks whose ``nth`` start on a worker is a later unit of the small
#: run (after a checkpoint): SSGD's epoch 1, the program jobs' third (gcn) or second
#: (linear, whose small run has two epochs) unit task (the steps' code goes as a task
#: named ``daskhpc-code-...``, which does not match), SpGEMM's first task of batch 1;
#: direct-mode tasks of one unit each (``units-per-task`` 1, set for the CLI runs through
#: the environment).
KILL_AT = {"ssgd": ("ssgd-epoch", {2: 1}, 1), "gcn": ("gcn-", {}, 3),
           "linear": ("linear-", {}, 2), "spgemm": ("spgemm-", {1: 1}, 1)}


@pytest.mark.slow             # three CLI runs of each workflow and a nanny restart
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("name", sorted(KILL_AT))
def test_every_workflow_survives_a_killed_worker_and_resumes_across_addresses(
        name, hosts, tmp_path, monkeypatch):
    """The cpals test above, for the other workflows with a checkpoint: a worker killed
    mid-run on its own address costs a restart, the result is the 127.0.0.1 run's, and
    ``--resume`` of the finished run finds it complete in the shared directory."""
    import daskhpc as dh
    from daskhpc.testing import KillOnce, TaskKey

    args = list(_workflows.load(name).small_run())
    multi = ["run", name, *args, "--scheduler-file", hosts["scheduler_file"],
             "--checkpoint", str(tmp_path / "shared")]
    monkeypatch.setenv("DASK_DASKHPC__RUNTIME__UNITS_PER_TASK", "1")
    prefix, at, nth = KILL_AT[name]
    marker = tmp_path / "killed"
    with dh.connect(scheduler_file=hosts["scheduler_file"]) as client:
        client.register_plugin(KillOnce(TaskKey(prefix, at), str(marker), nth=nth),
                               name="kill-hosts")
        try:
            first = run([*multi, "--json", "multi.json"], tmp_path)
        finally:
            client.unregister_worker_plugin("kill-hosts")
    assert first.returncode == 0, first.stderr
    killed = marker.read_text().split()[0]
    assert killed.startswith("tls://127.0.0.")
    got = json.loads((tmp_path / "multi.json").read_text())
    rec = got["recovery"]["recoveries"]
    assert len(rec) == 1 and rec[0]["lost"] == [killed], rec
    ref = run(["run", name, *args, "--workers", "2", "--json", "local.json"], tmp_path)
    assert ref.returncode == 0, ref.stderr
    want = json.loads((tmp_path / "local.json").read_text())
    assert untimed(got["quality"]) == untimed(want["quality"])
    assert got["serial_check"]["identical"] is True, got["serial_check"]
    again = run([*multi, "--resume", "--json", "again.json"], tmp_path)
    assert again.returncode == 0, again.stderr
    assert "already complete" in again.stdout + again.stderr
    assert untimed(json.loads((tmp_path / "again.json").read_text())["quality"]) == \
        untimed(want["quality"])
