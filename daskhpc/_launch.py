"""What ``python -m daskhpc.mpi`` and ``python -m daskhpc.slurm`` share: both run one command
line on N tasks (0 the scheduler, 1 the client, the others a worker each) and differ only in
how the tasks find each other and how a job is ended at once (:class:`Launcher`). Here: the
shared options, the config every task needs, and the client task."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import runpy
import shlex
import socket
import sys
import threading
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Callable

from daskhpc import _mpi_security

#: Exit statuses (``daskhpc.cli`` uses 0, 1 and 2 the same way).
OK, FAILED, BAD_OPTIONS, LOST_RANK = 0, 1, 2, 3
SCHEDULER_RANK, CLIENT_RANK = 0, 1
PRELOADS = ("daskhpc.dashboard.preload", "daskhpc._mpi_watch")
EPILOG = ("exit status: 0 success, 1 the workflow failed, 2 bad options, "
          "3 a rank was lost (a worker left, the client disconnected, workers did not join)")


@dataclass
class Launcher:
    """How one launcher differs: ``name`` (module, every message's prefix), ``section`` (its key
    in the JSON report), ``abort(status)`` (end every task now) and ``details`` (more entries of
    that section, e.g. the job id)."""

    name: str
    section: str
    abort: Callable[[int], None]
    details: dict = field(default_factory=dict)

    @property
    def prog(self) -> str:
        return f"python -m {self.name}"

    def say(self, message: str) -> None:
        print(f"{self.name}: {message}", file=sys.stderr, flush=True)


def add_options(p: argparse.ArgumentParser) -> None:
    """The options both launchers take, then the target and its arguments."""
    p.add_argument("--dashboard-address", metavar="ADDR",
                   help="where the scheduler serves the dashboard (default localhost:8787, "
                        "rank 0's node only: see docs/hpc.md for the ssh tunnel; :8787 for "
                        "every interface; a free port if that one is taken)")
    p.add_argument("--insecure", action="store_true",
                   help="plain TCP without TLS: anyone who reaches the nodes can join the "
                        "cluster and run code as you; only on a network secured otherwise "
                        "(default: TLS with credentials made for this job)")
    p.add_argument("--nthreads", type=int, metavar="T",
                   help="threads per worker (default daskhpc.runtime.threads-per-worker)")
    p.add_argument("--memory-limit", default="auto", metavar="BYTES",
                   help="per-worker memory limit (e.g. 4GB, auto, 0 for none)")
    p.add_argument("--interface", metavar="IF", help="network interface, e.g. ib0")
    p.add_argument("--protocol", metavar="P",
                   help="tcp (default daskhpc.runtime.protocol; runs as tls unless "
                        "--insecure); others (ucx) only with --insecure")
    p.add_argument("--local-directory", metavar="DIR", help="worker scratch directory")
    p.add_argument("--worker-class", default="distributed.Worker", metavar="CLASS",
                   help="the workers' class (default distributed.Worker; distributed.Nanny "
                        "runs each in a process of its own)")
    p.add_argument("--worker-options", metavar="JSON",
                   help='more keyword arguments of the worker class, a JSON object, e.g. '
                        '\'{"memory_limit": "4GB"}\' (they win over the options above)')
    p.add_argument("--startup-timeout", type=float, default=120.0, metavar="S",
                   help="seconds to wait for all workers to join (default 120)")
    p.add_argument("--timeout", type=float, metavar="S",
                   help="end the job with status 1 if the workflow runs longer than this")
    p.add_argument("--log-level", default="warning",
                   choices=["debug", "info", "warning", "error"],
                   help="Dask's log level on every rank (default warning)")
    p.add_argument("target", metavar="WORKFLOW|SCRIPT",
                   help="a registered workflow (as for `daskhpc run`) or a .py file")
    p.add_argument("args", nargs=argparse.REMAINDER, help="the workflow's or script's arguments")


def worker_kwargs(opts, job) -> dict:
    """Keyword arguments of the worker class (``--worker-options`` win)."""
    from daskhpc import _config

    memory = opts.memory_limit
    return {"nthreads": opts.nthreads or _config.get("runtime.threads-per-worker"),
            "memory_limit": int(memory) if memory.isdigit() else memory,
            "interface": opts.interface, "protocol": job.protocol,
            "local_directory": opts.local_directory, **job.worker_options}


def configure(opts, job, rank: int) -> None:
    """Config every rank needs before the scheduler and workers are built."""
    import dask.config

    from daskhpc.runtime import CLUSTER_CONFIG      # (its import loads daskhpc.yaml)

    if not opts.interface:
        # Dask binds a scheduler or worker given no interface to every interface
        # (0.0.0.0 and ::) and advertises one address: listen on that one only
        opts.interface = default_interface()
    # Set for the whole process, not in a with-block: the scheduler and the
    # workers read these when they are built.
    dask.config.set(CLUSTER_CONFIG)
    if rank == SCHEDULER_RANK:
        preload = list(dask.config.get("distributed.scheduler.preload", []) or [])
        dask.config.set({"distributed.scheduler.preload":
                         preload + [m for m in PRELOADS if m not in preload]})
    if rank == CLIENT_RANK and dask.config.get("daskhpc.runtime.progress", None) is None:
        # a batch job's output is a file: progress as lines, not only on a TTY
        dask.config.set({"daskhpc.runtime.progress": True})
    if rank == CLIENT_RANK:
        _mpi_security.link_dashboard_host(job.dashboard_address)
    logging.getLogger("distributed").setLevel(opts.log_level.upper())
    # the worker processes of a distributed.Nanny set up logging from the environment
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", opts.log_level)


def job_nodes(env=None) -> int | None:
    """How many nodes the batch system gave the job (SLURM), or None if it does not say."""
    env = os.environ if env is None else env
    for key in ("SLURM_JOB_NUM_NODES", "SLURM_NNODES"):
        if env.get(key, "").isdigit():
            return int(env[key])
    return None


def pick_interface(opts, env=None) -> None:
    """Set ``opts.interface`` when it is not given (:func:`default_interface`), before
    anything starts: a host it cannot choose for stops the task with one line."""
    if not opts.interface:
        opts.interface = default_interface(job_nodes(env))


def default_interface(nodes: int | None = None) -> str | None:
    """The interface of the address Dask would advertise (``get_ip``: the one routing outwards),
    or None if none holds it. Without a default route that is the loopback: then the host's one
    routable address, or BadOptions asking for ``--interface`` where that is ambiguous."""
    import ipaddress

    import psutil

    from daskhpc._dask_internals import get_ip
    from daskhpc._mpi_options import BadOptions

    with warnings.catch_warnings():    # no route to its probe address: handled below
        warnings.simplefilter("ignore", RuntimeWarning)
        ip = get_ip()
    addrs = psutil.net_if_addrs()
    holder = next((name for name, found in addrs.items()
                   if any(a.family == socket.AF_INET and a.address == ip for a in found)),
                  None)
    if not ipaddress.ip_address(ip).is_loopback:
        return holder
    up = psutil.net_if_stats()
    own = [(name, a.address) for name, found in addrs.items()
           if name in up and up[name].isup for a in found
           if a.family == socket.AF_INET and not ipaddress.ip_address(a.address).is_loopback]
    if len(own) == 1:
        return own[0][0]
    if not own and (nodes or 1) == 1:
        return holder               # one host and no network: the loopback serves
    have = ", ".join(f"{n} {a}" for n, a in own) or "no address but the loopback"
    raise BadOptions(f"this host has no route outwards to tell which interface the other "
                     f"hosts reach it on ({have}): pass --interface IF, e.g. --interface "
                     f"{own[0][0] if own else 'eth0'}")


def client_task(launcher: Launcher, opts, job, argv: list[str], size: int,
                creds: dict | None, files: list[str], publish: bool = True,
                on_client: Callable | None = None) -> int:
    """Run the target on the client task; return the job's exit status. ``files`` (scheduler
    file, credentials) are removed when the job ends; ``publish``: write the scheduler file
    (and credentials) once the workers are in (MPI; srun's scheduler wrote it);
    ``on_client(client)`` runs before the target."""
    from distributed import Client

    from daskhpc import _mpi_watch
    from daskhpc.runtime import worker_addresses

    nworkers = size - 2
    os.environ["DASKHPC_MPI_CLIENT"] = "1"   # daskhpc.connect() joins this cluster
    os.environ["DASKHPC_LAUNCHER"] = launcher.section   # whose job it is, for the CLI's words
    if job.scheduler_file and publish:
        # removed when the job ends (stale ones from a killed job included)
        files.extend([job.scheduler_file, _mpi_security.credentials_path(job.scheduler_file)])
    status, client = FAILED, None
    timer = _deadline(launcher, opts.timeout, files)
    try:
        client = Client()   # the scheduler address is in dask.config
        try:
            client.wait_for_workers(nworkers, timeout=opts.startup_timeout)
        except TimeoutError:
            have = len(worker_addresses(client))
            launcher.say(f"only {have} of {nworkers} workers joined within "
                         f"{opts.startup_timeout:g} s (--startup-timeout)")
            status = LOST_RANK
            return status
        client.run_on_scheduler(_mpi_watch.watch_client, client.id)
        if on_client is not None:
            on_client(client)
        if job.scheduler_file and publish:
            if creds is not None:
                # for clients outside the job; before the scheduler file, which
                # is what they wait for
                _mpi_security.write_credentials(
                    _mpi_security.credentials_path(job.scheduler_file), creds)
            client.write_scheduler_file(job.scheduler_file)
        hint = _mpi_security.tunnel_hint(client, job.dashboard_address)
        if hint:
            print(hint.replace("daskhpc.mpi:", f"{launcher.name}:"), file=sys.stderr, flush=True)
        if job.kind == "workflow":
            status = _run_workflow(launcher, job, argv, size, nworkers)
        else:
            launcher.say(f"{nworkers} workers, dashboard: {client.dashboard_link}")
            status = _run_script(job)
    except KeyboardInterrupt:
        status = 130
    except Exception as e:  # noqa: BLE001 - the launcher's own failure still ends the job
        launcher.say(f"client rank failed: {type(e).__name__}: {e}")    # (status FAILED)
    finally:
        if timer is not None:
            timer.cancel()
        sys.stdout.flush()
        if client is not None:
            _shutdown(client, status)
        remove_files(files)
        if client is None:
            # no client, no orderly shutdown: the scheduler and workers would wait forever
            launcher.abort(status)
    return status


def _run_workflow(launcher: Launcher, job, argv: list[str], size: int, nworkers: int) -> int:
    from daskhpc import cli

    def add_section(report: dict) -> dict:
        report["command"] = shlex.join(["python", "-m", launcher.name, *argv])
        report[launcher.section] = {"ranks": size, "scheduler_rank": SCHEDULER_RANK,
                                    "client_rank": CLIENT_RANK, "workers": nworkers,
                                    **launcher.details}
        return report

    return cli.main(job.run_argv, report_hook=add_section)


def _run_script(job) -> int:
    path = os.path.abspath(job.target)
    saved = sys.argv, list(sys.path)
    sys.argv = [job.target, *job.args]
    sys.path.insert(0, os.path.dirname(path))   # as `python script.py` does
    try:
        runpy.run_path(path, run_name="__main__")
        return OK
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            return int(e.code or 0)
        print(e.code, file=sys.stderr)
        return FAILED
    except Exception:  # noqa: BLE001 - a script's error is reported like python does
        traceback.print_exc()
        return FAILED
    finally:
        sys.argv, sys.path[:] = saved


def reported_status(launcher: Launcher, rank: int, task: str) -> int:
    """The exit status the client sent a scheduler or worker ``task`` (rank, task) whose
    event loop has ended; :data:`LOST_RANK` if none came."""
    from daskhpc import _mpi_watch

    status = _mpi_watch.received_status()
    if status is None:
        role = "scheduler" if rank == SCHEDULER_RANK else "worker"
        launcher.say(f"{role} {task} {rank}: the cluster closed before the client {task} "
                     f"reported the job's status; exiting with {LOST_RANK}")
        return LOST_RANK
    return status


def remove_files(files: list[str]) -> None:
    """Remove the job's files (emptying ``files``); missing ones are no error."""
    while files:
        with contextlib.suppress(OSError):
            os.remove(files.pop())


def _deadline(launcher: Launcher, seconds: float | None, files: list[str]):
    if not seconds:
        return None

    def expire():
        launcher.say(f"the job ran longer than --timeout {seconds:g} s; ending it")
        remove_files(files)
        launcher.abort(FAILED)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    return timer


def _shutdown(client, status: int) -> None:
    """Send the status to every rank, then close the workers and the scheduler."""
    from distributed import Client

    from daskhpc import _mpi_watch
    from daskhpc.runtime import worker_info

    # clients the target left open would log failed reconnects once the scheduler is gone
    for other in list(Client._instances):
        if other is not client and other.status not in ("closed", "closing"):
            with contextlib.suppress(Exception):    # best effort
                other.close()
    # each step may fail on a broken cluster; the ranks alive still get the status
    steps = [
        lambda: client.run_on_scheduler(_mpi_watch.record_status, status),  # stands the watch down
        lambda: client.run(_mpi_watch.record_status, status, on_error="ignore"),
        lambda: client.run(_mpi_watch.record_status, status, on_error="ignore", nanny=True),
        # workers first (closing the scheduler under them logs CommClosedError); nannies
        # by the scheduler's shutdown (a retired nanny's worker would keep heartbeating)
        lambda: None if any(w.get("nanny") for w in worker_info(client).values())
        else client.retire_workers(close_workers=True),
        lambda: client.shutdown(),
    ]
    for step in [*steps, client.close]:
        with contextlib.suppress(Exception):    # best effort: the job is ending either way
            step()
