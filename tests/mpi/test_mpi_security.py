"""The cluster of ``python -m daskhpc.mpi`` is private by default.

A real ``mpiexec -n 5`` job holds its cluster open while this process, a
stranger on the same machine, tries to join it: without the job's credentials
the TLS handshake fails (fast, not a hang); with the credentials file that
``--scheduler-file`` leaves beside the scheduler file (mode 0600, removed at
the end) it joins. Nothing of the job listens beyond loopback under
``--interface lo``, the dashboard included. ``--insecure`` is plain TCP.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import ssl
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest
from distributed import Client
from distributed.security import Security
from test_mpi_launcher import MPIEXEC, RANKS, mpirun

import daskhpc.runtime
from daskhpc import _mpi_security

pytestmark = pytest.mark.skipif(
    not os.path.exists(MPIEXEC), reason=f"no mpiexec at {MPIEXEC} (pip install '.[mpi]')")

LOOPBACK = {"127.0.0.1", "::1"}

# Rank 1 reports the cluster, then keeps it open until the test is done with it.
HOLD = textwrap.dedent("""
    import json, os, sys, time
    import daskhpc as dh
    from daskhpc.runtime import worker_addresses

    client = dh.connect()                       # joins with the job's credentials
    info = {"scheduler": client.scheduler.address, "workers": worker_addresses(client),
            "pids": [client.run_on_scheduler(os.getpid), *client.run(os.getpid).values()],
            "scheduler_info": client.scheduler_info(n_workers=-1)}
    with open(sys.argv[1] + ".tmp", "w") as f:
        json.dump(info, f)
    os.replace(sys.argv[1] + ".tmp", sys.argv[1])
    deadline = time.monotonic() + 100
    while not os.path.exists(sys.argv[2]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert client.submit(sum, [1, 2]).result() == 3   # the job's own client still works
""")


@contextlib.contextmanager
def held_job(tmp_path, *launcher_args):
    """Start a job running HOLD; yield (info, scheduler file); then let it end.

    The job's (returncode, stderr) are in ``result`` once the block is left.
    """
    script, ready, done = tmp_path / "hold.py", tmp_path / "ready.json", tmp_path / "done"
    sched = tmp_path / "scheduler.json"
    script.write_text(HOLD)
    cmd = [MPIEXEC, "-n", str(RANKS), sys.executable, "-m", "daskhpc.mpi", "--interface", "lo",
           "--scheduler-file", str(sched), *launcher_args, str(script), str(ready), str(done)]
    err_path = tmp_path / "stderr.txt"
    result = {}
    with open(err_path, "w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, text=True)
        try:
            deadline = time.monotonic() + 100
            while not ready.exists():
                assert proc.poll() is None, err_path.read_text()
                assert time.monotonic() < deadline, "the job did not start"
                time.sleep(0.1)
            yield json.loads(ready.read_text()), sched, result
        finally:
            done.touch()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    result.update(returncode=proc.returncode, stderr=err_path.read_text())


def dask_ports(info: dict) -> set[int]:
    """Every port Dask listens on: scheduler, dashboard, workers, their nannies and pages.

    (MPI's own sockets in the same processes are not ours: MPICH listens on the
    node's address and on 0.0.0.0 whatever Dask does.)
    """
    def port(address):
        return int(str(address).rsplit(":", 1)[1])

    ports = {port(info["address"]), *info.get("services", {}).values()}
    for addr, w in info["workers"].items():
        ports |= {port(addr), *w.get("services", {}).values()}
        if w.get("nanny"):
            ports.add(port(w["nanny"]))
    return {int(p) for p in ports}


def listening_hosts(pids, ports) -> set[str]:
    """The addresses Dask's ports are bound to, in these processes (all ports must be found)."""
    found = {(c.laddr.ip, c.laddr.port) for pid in pids
             for c in psutil.Process(pid).net_connections("inet")
             if c.status == psutil.CONN_LISTEN and c.laddr.port in ports}
    assert {p for _, p in found} == ports, (found, ports)
    return {ip for ip, _ in found}


def raw_tls_without_certificate(address: str):
    """Open a TLS connection as a stranger would: no client certificate, and
    whatever certificate the server shows accepted. Returns (server cert, error)."""
    host, port = address.split("://")[1].rsplit(":", 1)
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    with socket.create_connection((host, int(port)), timeout=10) as sock, \
            ctx.wrap_socket(sock) as tls:
        der = tls.getpeercert(binary_form=True)
        try:
            tls.sendall(b"\x00" * 64)
            tls.recv(64)   # TLS 1.3: the server's verdict on our (missing) cert comes here
        except OSError as e:
            return der, e
    return der, None


def test_cluster_refuses_clients_without_the_job_credentials(tmp_path):
    with held_job(tmp_path) as (info, sched, result):
        address = info["scheduler"]
        assert address.startswith("tls://127.0.0.1:")
        assert all(w.startswith("tls://") for w in info["workers"]) and len(info["workers"]) == 3
        # nothing of the job's cluster (scheduler, dashboard, workers) listens beyond
        # loopback under --interface lo: the dashboard's default is localhost now
        assert listening_hosts(info["pids"], dask_ports(info["scheduler_info"])) <= LOOPBACK

        creds_file = _mpi_security.credentials_path(str(sched))
        assert stat.S_IMODE(os.stat(creds_file).st_mode) == 0o600
        assert "PRIVATE KEY" not in sched.read_text()

        # 1. a stranger's TLS client without a certificate: the server demands one
        t0 = time.monotonic()
        der, error = raw_tls_without_certificate(address)
        assert isinstance(error, (ssl.SSLError, ConnectionResetError, BrokenPipeError)), error
        assert time.monotonic() - t0 < 10
        # the server showed the job's own certificate
        job_cert = Path(creds_file).read_text().split("-----BEGIN CERTIFICATE-----")[1]
        assert ssl.DER_cert_to_PEM_cert(der).split("-----BEGIN CERTIFICATE-----")[1] == job_cert

        # 2. a Dask client with credentials of its own (another CA): refused both ways
        t0 = time.monotonic()
        stranger = _mpi_security.security(_mpi_security.new_credentials())
        with pytest.raises(OSError, match="TLS"):
            Client(address, security=stranger, timeout=10)
        # 3. plain TCP to the TLS port
        with pytest.raises(OSError):
            Client("tcp://" + address.split("://")[1], timeout=10)
        assert time.monotonic() - t0 < 20

        # 4. with the credentials file: joins, by the API and as docs/hpc.md shows
        with Client(address, security=_mpi_security.load_credentials(creds_file),
                    timeout=30) as c:
            assert c.submit(pow, 2, 10).result() == 1024
        by_path = Security(tls_ca_file=creds_file, tls_client_cert=creds_file,
                           require_encryption=True)
        with Client(scheduler_file=str(sched), security=by_path, timeout=30) as c:
            assert len(c.scheduler_info(n_workers=-1)["workers"]) == RANKS - 2
    assert result["returncode"] == 0, result["stderr"]
    assert "Traceback" not in result["stderr"], result["stderr"]
    # the scheduler saw the refused handshakes
    assert "TLS handshake failed" in result["stderr"], result["stderr"]
    assert "ssh -L" in result["stderr"]          # how to reach the loopback-only dashboard
    assert not sched.exists() and not os.path.exists(creds_file)


@pytest.mark.slow             # CI budget (20 min on 2 cores): default run keeps a lighter test of the same path
def test_insecure_is_plain_tcp_anyone_can_join(tmp_path):
    with held_job(tmp_path, "--insecure") as (info, sched, result):
        assert info["scheduler"].startswith("tcp://127.0.0.1:")
        assert not os.path.exists(_mpi_security.credentials_path(str(sched)))
        with Client(scheduler_file=str(sched), timeout=30) as c:   # no credentials at all
            assert c.submit(pow, 2, 10).result() == 1024
        # the dashboard stays local
        assert listening_hosts(info["pids"], dask_ports(info["scheduler_info"])) <= LOOPBACK
    assert result["returncode"] == 0, result["stderr"]


@pytest.mark.slow             # CI budget (20 min on 2 cores): default run keeps a lighter test of the same path
def test_security_options_exit_2_before_start_up(tmp_path):
    proc, _ = mpirun("--protocol", "ucx", "spgemm", "x.mtx")
    assert proc.returncode == 2
    assert proc.stderr.count("--protocol ucx cannot carry the job's TLS credentials") == 1
    proc, _ = mpirun("--insecure", "--protocol", "tls", "spgemm", "x.mtx")
    assert proc.returncode == 2 and "drop --insecure" in proc.stderr
    # cryptography present but broken: rank 0 says so, no rank waits for credentials
    shadow = tmp_path / "shadow" / "cryptography"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('broken for the test')\n")
    script = tmp_path / "never.py"
    script.write_text("raise SystemExit('must not run')\n")
    proc, seconds = mpirun(str(script), env={"PYTHONPATH": str(shadow.parent)})
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("needs the `cryptography` package") == 1, proc.stderr
    assert "must not run" not in proc.stderr and seconds < 60


def test_local_cluster_binds_to_loopback():
    import daskhpc as dh

    with dh.connect(n_workers=1) as client:   # the default dashboard address too
        info = client.scheduler_info(n_workers=-1)
        addresses = [client.scheduler.address, *info["workers"]]
        assert all(a.startswith("tcp://127.0.0.1:") for a in addresses), addresses
        assert "dashboard" in info["services"]
        pids = [os.getpid(), *client.run(os.getpid).values()]   # nannies live in this one
        assert listening_hosts(pids, dask_ports(info)) == {"127.0.0.1"}


@pytest.mark.slow             # CI budget (20 min on 2 cores): default run keeps a lighter test of the same path
def test_connect_with_the_scheduler_file_joins_the_private_job(tmp_path):
    with held_job(tmp_path) as (info, sched, result), \
            daskhpc.connect(scheduler_file=str(sched)) as c:   # picks up F.tls.pem
        assert c.scheduler.address == info["scheduler"]
        assert c.submit(pow, 2, 10).result() == 1024
    assert result["returncode"] == 0, result["stderr"]
    from daskhpc._mpi_security import credentials_path
    from daskhpc.runtime import scheduler_file_security

    assert credentials_path("F") == "F.tls.pem"                   # where connect looks
    assert scheduler_file_security(str(sched)) is None            # removed after the job
