"""Run a daskhpc workflow or a script on an MPI allocation (dask-mpi).

::

    mpiexec -n N python -m daskhpc.mpi [launcher options] <workflow> <inputs...> [options]
    mpiexec -n N python -m daskhpc.mpi [launcher options] script.py [script args...]

Rank 0 runs the Dask scheduler, rank 1 the client (the workflow, exactly as
``daskhpc run <workflow> ...`` runs it, or the script), ranks 2 .. N-1 one
single-threaded worker each: the workflow sees ``N - 2`` workers. Start-up is
:func:`dask_mpi.initialize` (``exit=False``); the rest is ours, because
dask-mpi's own shutdown prints ``CommClosedError`` tracebacks on clean runs
(dask-mpi#94), swallows errors raised at exit so the status can lie
(dask-mpi#88), and hangs when a rank is lost. Here:

- the cluster gets :data:`daskhpc.runtime.CLUSTER_CONFIG` on every rank (no work
  stealing, no active memory manager, long transfer logs), and the scheduler the
  daskhpc dashboard pages (preload :mod:`daskhpc.dashboard.preload`);
- daskhpc settings come from ``daskhpc.yaml`` / ``DASK_DASKHPC__...`` environment
  variables, which ``mpiexec`` hands to every rank;
- the client rank sends the job's exit status to every rank before it shuts the
  cluster down, so all ranks (and ``mpiexec``) exit with it: 0 success, 1 the
  workflow failed, 2 bad options, 3 a rank was lost (a worker left, the client
  disconnected, or workers did not join in time); the message names the cause;
- a rank that leaves during the run ends the job at once (``MPI_Abort``) instead
  of leaving pinned tasks waiting for it forever;
- the cluster is private (:mod:`daskhpc._mpi_security`): rank 1 makes TLS
  credentials for this job and broadcasts them over MPI, every rank speaks
  ``tls://`` with them, so a client without them is refused; the dashboard
  listens on rank 0's loopback only. ``--insecure`` (plain TCP) and
  ``--dashboard-address`` undo either.

Examples
--------
Under a batch allocation (see ``workflows/jobs/`` for SLURM and PBS scripts)::

    mpiexec -n 5 python -m daskhpc.mpi spgemm A.mtx --grid 1x1x3 --json r.json
    mpiexec -n 5 python -m daskhpc.mpi --scheduler-file sched.json my_analysis.py

In a script run this way, ``daskhpc.connect()`` (or ``distributed.Client()``)
joins the job's scheduler:

>>> import daskhpc as dh
>>> client = dh.connect()                # doctest: +SKIP
>>> len(dh.runtime.worker_addresses(client))            # doctest: +SKIP
3
"""

from __future__ import annotations

import argparse
import logging
import os
import runpy
import shlex
import sys
import threading
import time
import traceback

from daskhpc import _mpi_security
from daskhpc._mpi_options import BadOptions, Job, env_rank, quiet_unless, resolve

__all__ = ["build_parser", "main"]

PROG = "python -m daskhpc.mpi"
#: Exit statuses (``daskhpc.cli`` uses 0, 1 and 2 the same way).
OK, FAILED, BAD_OPTIONS, LOST_RANK = 0, 1, 2, 3
SCHEDULER_RANK, CLIENT_RANK = 0, 1
PRELOADS = ("daskhpc.dashboard.preload", "daskhpc._mpi_watch")


def build_parser() -> argparse.ArgumentParser:
    """The launcher's own options; everything after the target goes to the target.

    Examples
    --------
    >>> opts = build_parser().parse_args(["--nthreads", "2", "spgemm", "a.mtx", "--json", "-"])
    >>> opts.target, opts.args, opts.nthreads
    ('spgemm', ['a.mtx', '--json', '-'], 2)
    """
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Run a daskhpc workflow (as `daskhpc run` does) or a Python script under "
                    "mpiexec: rank 0 scheduler, rank 1 client, ranks >= 2 workers.",
        epilog="exit status: 0 success, 1 the workflow failed, 2 bad options, "
               "3 a rank was lost (a worker left, the client disconnected, workers did not join)")
    p.add_argument("--scheduler-file", metavar="F",
                   help="write the scheduler's address here, for other clients to join")
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
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the launcher on this rank; return this rank's exit status.

    Every rank runs the same command line. Options are checked on every rank
    before the cluster starts (so a typo costs no start-up); messages are printed
    once, by rank 0 before start-up and by the client rank after.

    Parameters
    ----------
    argv : list of str, optional
        Default ``sys.argv[1:]``.

    Returns
    -------
    int
        The job's exit status (the same on every rank that is still alive).
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    loud = env_rank() in (None, SCHEDULER_RANK)
    # Dask's log handlers bind sys.stderr when distributed is first imported:
    # import it before stderr is silenced below, or every log line would fail.
    import distributed  # noqa: F401

    try:
        with quiet_unless(loud):
            opts = build_parser().parse_args(argv)
            job = resolve(opts)
    except SystemExit as e:  # argparse: 2 for bad options, 0 for --help
        return int(e.code or 0)
    except BadOptions as e:
        if loud:
            print(f"daskhpc.mpi: error: {e}", file=sys.stderr)
        return BAD_OPTIONS

    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    if size < 3:
        if rank == SCHEDULER_RANK:
            print(f"daskhpc.mpi: error: needs at least 3 MPI ranks (scheduler, client, one "
                  f"worker), got {size}; run it as: mpiexec -n 5 {PROG} {shlex.join(argv)}",
                  file=sys.stderr)
        return BAD_OPTIONS

    # The client rank makes the job's TLS credentials while the other ranks import
    # (rank 0's imports and scheduler are the start-up's critical path; rank 1
    # only waits for the scheduler); all ranks then receive them over MPI.
    offered = _mpi_security.offer() if job.secure and rank == CLIENT_RANK else None
    _configure(opts, job, rank)
    creds = None
    if job.secure:
        try:
            creds = _mpi_security.share(comm, offered, root=CLIENT_RANK)
        except _mpi_security.SecurityError as e:
            if rank == SCHEDULER_RANK:
                print(f"daskhpc.mpi: error: {e}", file=sys.stderr)
            return BAD_OPTIONS
        # dask_mpi.initialize() passes no `security` to the Scheduler: the job's
        # credentials reach it, the workers, and every Client() on rank 1
        # (daskhpc.connect() too) as the default Security() read from config.
        # Set for the whole process, before the scheduler and workers exist.
        import dask.config

        dask.config.set(_mpi_security.config(creds))
    try:
        is_client = _start(opts, job, rank)
    except KeyboardInterrupt:   # Ctrl-C: mpiexec sends SIGINT to every rank
        return 130
    except Exception as e:  # noqa: BLE001 - any start-up failure must end every rank
        print(f"daskhpc.mpi: rank {rank}: could not start: {type(e).__name__}: {e}",
              file=sys.stderr, flush=True)
        _abort(FAILED)
        return FAILED  # pragma: no cover - Abort does not return

    if is_client:
        return _client_rank(opts, job, argv, size, creds)
    # scheduler or worker rank: its event loop has ended
    from daskhpc import _mpi_watch

    status = _mpi_watch.received_status()
    if status is None:
        role = "scheduler" if rank == SCHEDULER_RANK else "worker"
        print(f"daskhpc.mpi: {role} rank {rank}: the cluster closed before the client rank "
              f"reported the job's status; exiting with {LOST_RANK}", file=sys.stderr)
        return LOST_RANK
    return status


# -- start-up --------------------------------------------------------------------------

def _configure(opts, job: Job, rank: int) -> None:
    """Config every rank needs before the scheduler and workers are built."""
    import dask.config

    from daskhpc import _config  # noqa: F401 - loads daskhpc.yaml defaults (env vars win)
    from daskhpc.runtime import CLUSTER_CONFIG

    # Set for the whole process, not in a with-block: the scheduler and the
    # workers read these when they are built inside dask_mpi.initialize().
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


def _start(opts, job: Job, rank: int) -> bool:
    from dask_mpi import initialize

    from daskhpc import _config
    from daskhpc.runtime import free_dashboard_address

    dashboard = job.dashboard_address
    if rank == SCHEDULER_RANK:
        # a taken port would make the scheduler warn and pick another one
        dashboard = free_dashboard_address(dashboard)
    return initialize(
        exit=False,
        dashboard=True,
        dashboard_address=dashboard,
        nthreads=opts.nthreads or _config.get("runtime.threads-per-worker"),
        memory_limit=_memory_limit(opts.memory_limit),
        interface=opts.interface,
        protocol=job.protocol,
        local_directory=opts.local_directory,
    )


def _memory_limit(text: str):
    return int(text) if text.isdigit() else text


# -- rank 1 --------------------------------------------------------------------------

def _client_rank(opts, job: Job, argv: list[str], size: int, creds: dict | None) -> int:
    from distributed import Client

    from daskhpc import _mpi_watch
    from daskhpc.runtime import worker_addresses

    nworkers = size - 2
    os.environ["DASKHPC_MPI_CLIENT"] = "1"   # daskhpc.connect() joins this cluster
    if job.scheduler_file:
        # removed when the job ends (stale ones from a killed job included)
        _JOB_FILES.extend([job.scheduler_file, _mpi_security.credentials_path(job.scheduler_file)])
    status, client = FAILED, None
    timer = _deadline(opts.timeout)
    try:
        client = Client()   # dask_mpi.initialize set the scheduler address
        try:
            client.wait_for_workers(nworkers, timeout=opts.startup_timeout)
        except TimeoutError:
            have = len(worker_addresses(client))
            print(f"daskhpc.mpi: only {have} of {nworkers} workers joined within "
                  f"{opts.startup_timeout:g} s (--startup-timeout)", file=sys.stderr)
            status = LOST_RANK
            return status
        client.run_on_scheduler(_mpi_watch.watch_client, client.id)
        if job.scheduler_file:
            if creds is not None:
                # for clients outside the job; before the scheduler file, which
                # is what they wait for
                _mpi_security.write_credentials(
                    _mpi_security.credentials_path(job.scheduler_file), creds)
            client.write_scheduler_file(job.scheduler_file)
        hint = _mpi_security.tunnel_hint(client, job.dashboard_address)
        if hint:
            print(hint, file=sys.stderr, flush=True)
        if job.kind == "workflow":
            status = _run_workflow(job, argv, size, nworkers)
        else:
            print(f"daskhpc.mpi: {nworkers} workers, dashboard: {client.dashboard_link}",
                  file=sys.stderr, flush=True)
            status = _run_script(job)
        return status
    except KeyboardInterrupt:
        status = 130
        return status
    except Exception as e:  # noqa: BLE001 - the launcher's own failure still ends the job
        print(f"daskhpc.mpi: client rank failed: {type(e).__name__}: {e}", file=sys.stderr)
        status = FAILED
        return status
    finally:
        if timer is not None:
            timer.cancel()
        sys.stdout.flush()
        if client is not None:
            _shutdown(client, status)
        _remove_job_files()
        if client is None:
            # no client, no orderly shutdown: the scheduler and workers would wait forever
            _abort(status)


def _run_workflow(job: Job, argv: list[str], size: int, nworkers: int) -> int:
    from daskhpc import cli

    def add_mpi_section(report: dict) -> dict:
        report["command"] = shlex.join(["python", "-m", "daskhpc.mpi", *argv])
        report["mpi"] = {"ranks": size, "scheduler_rank": SCHEDULER_RANK,
                         "client_rank": CLIENT_RANK, "workers": nworkers}
        return report

    return cli.main(job.run_argv, report_hook=add_mpi_section)


def _run_script(job: Job) -> int:
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


#: Files the client rank wrote for this job (scheduler file, credentials): removed at
#: its end, also when the client rank aborts the job.
_JOB_FILES: list[str] = []


def _remove_job_files() -> None:
    while _JOB_FILES:
        path = _JOB_FILES.pop()
        try:
            os.remove(path)
        except OSError:
            pass


def _abort(status: int) -> None:
    from mpi4py import MPI

    _remove_job_files()
    sys.stderr.flush()
    time.sleep(0.5)   # let mpiexec forward the last lines before it kills every rank
    MPI.COMM_WORLD.Abort(status)


def _deadline(seconds: float | None):
    if not seconds:
        return None

    def expire():
        print(f"daskhpc.mpi: the job ran longer than --timeout {seconds:g} s; ending it",
              file=sys.stderr, flush=True)
        _abort(FAILED)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    return timer


def _shutdown(client, status: int) -> None:
    """Send the status to every rank, then close the workers and the scheduler."""
    from daskhpc import _mpi_watch

    from distributed import Client

    # Clients the workflow or script left open would try to reconnect once the
    # scheduler is gone, and log the failure as an error: close them first.
    for other in list(Client._instances):
        if other is not client and other.status not in ("closed", "closing"):
            try:
                other.close()
            except Exception:  # noqa: BLE001, S110 - best effort
                pass
    # Each step may fail if the cluster is already broken; the status still
    # reaches the ranks that are alive, and the others are reported missing.
    steps = [
        lambda: client.run_on_scheduler(_mpi_watch.record_status, status),  # stands the watch down
        lambda: client.run(_mpi_watch.record_status, status, on_error="ignore"),
        # Workers first, then the scheduler: closing the scheduler under live
        # workers is what makes them log CommClosedError tracebacks (dask-mpi#94).
        lambda: client.retire_workers(close_workers=True),
        lambda: client.shutdown(),
    ]
    for step in steps:
        try:
            step()
        except Exception:  # noqa: BLE001, S110 - best effort: the job is ending either way
            pass
    try:
        client.close()
    except Exception:  # noqa: BLE001, S110
        pass


if __name__ == "__main__":  # pragma: no cover - run by mpiexec
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(code)
