"""Run a daskhpc workflow or a script on an MPI allocation (dask-mpi).

::

    mpiexec -n N python -m daskhpc.mpi [launcher options] <workflow> <inputs...> [options]
    mpiexec -n N python -m daskhpc.mpi [launcher options] script.py [script args...]

Rank 0 runs the Dask scheduler, rank 1 the client (the workflow, exactly as
``daskhpc run <workflow> ...`` runs it, or the script), ranks 2 .. N-1 one
single-threaded worker each. Start-up is :func:`dask_mpi.initialize`; the shutdown is
ours: every rank exits with the job's status (0 success, 1 the workflow failed, 2 bad
options, 3 a rank was lost, which ends the job at once with ``MPI_Abort``). The cluster is
private (per-job TLS credentials broadcast over MPI, the dashboard on rank 0's loopback)
unless ``--insecure`` and ``--dashboard-address`` say otherwise; docs/hpc.md has the details.

Examples
--------
Under a batch allocation (see ``workflows/jobs/`` for SLURM and PBS scripts)::

    mpiexec -n 5 python -m daskhpc.mpi spgemm A.mtx --grid 1x1x3 --json r.json
    mpiexec -n 5 python -m daskhpc.mpi --scheduler-file sched.json my_analysis.py

In a script run this way, ``daskhpc.connect()`` joins the job's scheduler:

>>> import daskhpc as dh
>>> client = dh.connect()                # doctest: +SKIP
>>> len(dh.runtime.worker_addresses(client))            # doctest: +SKIP
3
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time

# (_mpi_watch imports distributed, whose log handlers bind sys.stderr: before main silences it)
from daskhpc import _launch, _mpi_security, _mpi_watch
from daskhpc._launch import BAD_OPTIONS, CLIENT_RANK, FAILED, LOST_RANK, OK, SCHEDULER_RANK
from daskhpc._mpi_options import BadOptions, Job, env_rank, quiet_unless, resolve

__all__ = ["BAD_OPTIONS", "FAILED", "LOST_RANK", "OK", "build_parser", "main"]

PROG = "python -m daskhpc.mpi"
#: What differs from ``python -m daskhpc.slurm`` (daskhpc/_launch.py).
LAUNCHER = _launch.Launcher("daskhpc.mpi", "mpi", abort=lambda status: _abort(status))
#: Files the client rank wrote for this job (scheduler file, credentials): removed at
#: its end, also when the client rank aborts the job.
_JOB_FILES: list[str] = []


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
        epilog=_launch.EPILOG)
    p.add_argument("--scheduler-file", metavar="F",
                   help="write the scheduler's address here, for other clients to join")
    _launch.add_options(p)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the launcher on this rank; return this rank's exit status (``argv`` default
    ``sys.argv[1:]``).

    Every rank runs the same command line. Options are checked on every rank before the
    cluster starts (a typo costs no start-up); messages are printed once, by rank 0 before
    start-up and by the client rank after.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    loud = env_rank() in (None, SCHEDULER_RANK)
    try:
        with quiet_unless(loud):
            opts = build_parser().parse_args(argv)
            job = resolve(opts)
            _launch.pick_interface(opts)
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

    # rank 1 makes the credentials while rank 0 imports and builds the scheduler (the
    # start-up's critical path); every rank then receives them over MPI
    offered = _mpi_security.offer() if job.secure and rank == CLIENT_RANK else None
    _launch.configure(opts, job, rank)
    creds = None
    if job.secure:
        try:
            creds = _mpi_security.share(comm, offered, root=CLIENT_RANK)
        except _mpi_security.SecurityError as e:
            if rank == SCHEDULER_RANK:
                print(f"daskhpc.mpi: error: {e}", file=sys.stderr)
            return BAD_OPTIONS
        # dask_mpi.initialize() passes no `security`: the credentials reach the scheduler,
        # the workers and every Client() as the default Security(), set for the process
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

    if is_client:   # it says why the job ends; MPI_Abort on rank 0 ends it
        return _launch.client_task(LAUNCHER, opts, job, argv, size, creds, _JOB_FILES,
                                   on_client=lambda c: _mpi_watch.listen_for_end(c, LAUNCHER.name))
    return _launch.reported_status(LAUNCHER, rank, "rank")   # its event loop has ended


def _start(opts, job: Job, rank: int) -> bool:
    from dask_mpi import initialize

    from daskhpc.runtime import free_dashboard_address

    dashboard = job.dashboard_address
    if rank == SCHEDULER_RANK:
        # a taken port would make the scheduler warn and pick another one
        dashboard = free_dashboard_address(dashboard)
    kwargs = _launch.worker_kwargs(opts, job)
    return initialize(
        exit=False,
        dashboard=True,
        dashboard_address=dashboard,
        nthreads=kwargs.pop("nthreads"),
        memory_limit=kwargs.pop("memory_limit"),
        interface=opts.interface,    # the scheduler's too
        protocol=kwargs.pop("protocol"),
        local_directory=kwargs.pop("local_directory"),
        worker_class=job.worker_class,
        worker_options={k: v for k, v in kwargs.items() if k != "interface"},
    )


def _abort(status: int) -> None:
    from mpi4py import MPI

    _launch.remove_files(_JOB_FILES)
    sys.stderr.flush()
    time.sleep(0.5)   # let mpiexec forward the last lines before it kills every rank
    MPI.COMM_WORLD.Abort(status)


if __name__ == "__main__":  # pragma: no cover - run by mpiexec
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(code)
