"""connect(): the LocalCluster it starts, joining existing schedulers, shutdown."""

from __future__ import annotations

import os
import socket
import time

import dask.config
import numpy as np
import psutil
import pytest
from distributed import Client

import daskhpc.runtime
from daskhpc.runtime import CLUSTER_CONFIG, connect, worker_addresses, worker_info


def test_public_namespace_is_pinned():
    assert sorted(daskhpc.runtime.__all__) == [
        "Attempt",
        "AttemptGraph",
        "CLUSTER_CONFIG",
        "Call",
        "CheckpointDir",
        "CheckpointWarning",
        "Diverged",
        "Exchange",
        "GaveUp",
        "GraphJob",
        "HoldingPlugin",
        "Job",
        "KernelsReport",
        "NoScheduler",
        "Outcome",
        "PARKED",
        "PartStore",
        "Phase",
        "PhaseContext",
        "Placement",
        "ProgramRunner",
        "ReportBatch",
        "ReportInbox",
        "RunOptions",
        "TransferLedger",
        "WorkerLost",
        "WorkerWatch",
        "WorkersMissing",
        "Workflow",
        "array_digest",
        "calibrate",
        "calibrate_exchange",
        "call",
        "check_dashboard_address",
        "cluster_name",
        "connect",
        "connected",
        "exchange_mode",
        "free_dashboard_address",
        "gather_direct",
        "gather_watching",
        "host_timeout",
        "install",
        "load_arrays",
        "logged_transfers",
        "low_latency",
        "measure_network",
        "network_for",
        "option",
        "pinned_graph",
        "placed_hosts",
        "prepare_kernels",
        "progress",
        "register_once",
        "release_futures",
        "replace_lost",
        "run_job",
        "run_on_parts",
        "run_on_workers",
        "run_phases",
        "save_arrays",
        "scheduler_file_security",
        "send_report",
        "step_file",
        "step_of_key",
        "submit_pinned",
        "take",
        "wait_for_cluster",
        "worker_addresses",
        "worker_hosts",
        "worker_info",
    ]
    for name in daskhpc.runtime.__all__:
        assert getattr(daskhpc.runtime, name) is not None


def test_no_module_reads_the_workers_from_scheduler_info():
    """``Client.scheduler_info()`` returns the client's cache, which its periodic refresh
    may leave without workers under load (docs/decisions.md): the package asks
    ``worker_addresses`` / ``worker_info`` (``n_workers=0``, the services only, is fine)."""
    import ast
    from pathlib import Path

    root = Path(daskhpc.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr == "scheduler_info" and not any(
                        k.arg == "n_workers" and getattr(k.value, "value", None) == 0
                        for k in node.keywords):
                found.append(f"{path.relative_to(root)}:{node.lineno}")
    assert found == []


def scheduler_settings(dask_scheduler):
    return {
        "stealing": "stealing" in dask_scheduler.extensions,
        "amm": dask_scheduler.extensions["amm"].running,
    }


def worker_settings(dask_worker):
    return {
        "nthreads": dask_worker.state.nthreads,
        "log": dask.config.get("distributed.admin.low-level-log-length"),
        "trim": os.environ.get("MALLOC_TRIM_THRESHOLD_"),
        "pid": os.getpid(),
    }


def test_local_cluster_is_configured_and_leaves_nothing_behind():
    with connect(n_workers=3, dashboard_address=":0") as client:
        addresses = worker_addresses(client)
        assert len(addresses) == 3
        assert all(a.startswith("tcp://") for a in addresses)
        info = worker_info(client)
        assert [info[a]["name"] for a in addresses] == [0, 1, 2]
        assert client.scheduler.address.startswith("tcp://")
        assert client.run_on_scheduler(scheduler_settings) == {
            "stealing": False,
            "amm": False,
        }
        workers = client.run(worker_settings)
        assert {w["nthreads"] for w in workers.values()} == {1}
        assert {w["log"] for w in workers.values()} == {1000}      # Dask's default
        assert {w["trim"] for w in workers.values()} == {str(128 * 2**20)}
        pids = [w["pid"] for w in workers.values()]
        assert os.getpid() not in pids  # processes, not threads
        cluster = client.cluster
        # connect() scoped its settings to the cluster it built.
        assert dask.config.get("distributed.scheduler.work-stealing") is True
    assert cluster.status.name == "closed"
    deadline = time.monotonic() + 10
    while any(psutil.pid_exists(p) and psutil.Process(p).status() != "zombie" for p in pids):
        assert time.monotonic() < deadline, "worker processes outlived the client"
        time.sleep(0.05)


def test_default_worker_count_from_config_and_scaled_workers_keep_settings():
    with dask.config.set({"daskhpc.runtime.workers": 1}):
        client = connect(dashboard_address=":0")
    with client:
        assert len(worker_addresses(client)) == 1
        client.cluster.scale(2)
        client.wait_for_workers(2, timeout=30)
        # The new worker was built after connect() returned, from the config
        # its Nanny was given.
        assert {w["trim"] for w in client.run(worker_settings).values()} == \
            {str(128 * 2**20)}


def test_taken_dashboard_port_falls_back_to_a_free_one():
    with socket.socket() as busy:
        busy.bind(("localhost", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with connect(n_workers=1, dashboard_address=f"localhost:{port}") as client:
            link = client.dashboard_link
            assert f":{port}/" not in link
            assert "localhost" in link or "127.0.0.1" in link


def test_join_existing_scheduler_by_address_file_and_mpi_env(tmp_path, monkeypatch):
    with connect(n_workers=1, dashboard_address=":0") as owner:
        address = owner.scheduler.address
        with connect(address) as other:
            assert worker_addresses(other) == worker_addresses(owner)
        scheduler_file = tmp_path / "scheduler.json"
        owner.write_scheduler_file(str(scheduler_file))
        with connect(scheduler_file=str(scheduler_file)) as other:
            assert worker_addresses(other) == worker_addresses(owner)
        with pytest.raises(TypeError, match="only apply"):
            connect(address, n_workers=2)
        # DASK_SCHEDULER_ADDRESS (or the config) names a scheduler to join.
        with dask.config.set({"scheduler-address": address}):
            with connect(n_workers=5) as other:
                assert worker_addresses(other) == worker_addresses(owner)
        # What dask_mpi.initialize() leaves behind on the client rank; cluster
        # options are ignored so that one script runs on a laptop and under MPI.
        monkeypatch.setenv("DASKHPC_MPI_CLIENT", "1")
        with dask.config.set({"scheduler-address": address}):
            with connect(n_workers=5, dashboard_address="nonsense") as other:
                assert isinstance(other, Client)
                assert worker_addresses(other) == worker_addresses(owner)
        # Joining never shuts the owner's cluster down.
        assert len(worker_addresses(owner)) == 1


def test_the_client_goes_straight_to_local_workers_and_to_joined_ones_if_configured():
    """``daskhpc.runtime.direct-to-workers``: a LocalCluster's client places and gathers
    data straight to and from its workers; a joining one through the scheduler unless
    the setting is true; false: never."""
    with connect(n_workers=1, dashboard_address=":0") as owner:
        assert owner.direct_to_workers is True
        address = owner.scheduler.address
        with connect(address) as other:
            assert not other.direct_to_workers
        with dask.config.set({"daskhpc.runtime.direct-to-workers": True}):
            with connect(address) as other:
                assert other.direct_to_workers is True
                [f] = other.scatter([np.arange(3)])
                assert other.gather(f).tolist() == [0, 1, 2]
    with dask.config.set({"daskhpc.runtime.direct-to-workers": False}):
        with connect(n_workers=1, dashboard_address=":0") as client:
            assert client.direct_to_workers is False


def test_cluster_config_is_what_we_document():
    assert CLUSTER_CONFIG["distributed.scheduler.work-stealing"] is False
    assert CLUSTER_CONFIG["optimization.fuse.active"] is False
    assert CLUSTER_CONFIG["distributed.scheduler.active-memory-manager.start"] is False
    # Dask's logs keep their default length: the ledger counts at the source
    assert not any("log-length" in k for k in CLUSTER_CONFIG)


def test_a_tls_scheduler_file_without_credentials_is_a_clear_error(tmp_path):
    """A scheduler file of a private job (tls://) whose credentials file is missing: one
    line naming the file, not distributed's TypeError about ssl_context."""
    import json

    from daskhpc.errors import InputError
    from daskhpc.runtime import connect, scheduler_file_security

    f = tmp_path / "scheduler.json"
    f.write_text(json.dumps({"address": "tls://127.0.0.1:1", "type": "Scheduler"}))
    with pytest.raises(InputError, match=r"scheduler.json: the scheduler at tls://127.0.0.1:1 "
                                         r"needs TLS credentials and .*scheduler.json.tls.pem"):
        connect(scheduler_file=str(f))
    f.write_text(json.dumps({"address": "tcp://127.0.0.1:1", "type": "Scheduler"}))
    assert scheduler_file_security(str(f)) is None
