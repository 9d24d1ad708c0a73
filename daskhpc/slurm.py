"""Run a daskhpc workflow or a script on a batch allocation without MPI (``srun``).

::

    srun python -m daskhpc.slurm [launcher options] <workflow> <inputs...> [options]
    srun python -m daskhpc.slurm [launcher options] script.py [script args...]

The same roles, options, exit statuses and private cluster as ``python -m daskhpc.mpi``.
The tasks find each other through a directory every task sees (``--shared-dir``, default
``$SLURM_SUBMIT_DIR``): task 0 writes the job's TLS credentials there (mode 0600), then the
scheduler file. Ranks come from ``SLURM_PROCID`` / ``SLURM_NTASKS`` / ``SLURM_JOB_ID`` (and
``SLURM_STEP_ID``), or ``PMI_RANK`` / ``PMI_SIZE`` / ``PBS_JOBID``; the roles and lifetimes
are dask-jobqueue's :class:`dask_jobqueue.runner.BaseRunner`. A worker that leaves ends the
job with status 3: the scheduler tells every task left to exit with it.

Examples
--------
In a SLURM batch script (``workflows/jobs/slurm-srun.sh``)::

    srun --kill-on-bad-exit=1 python -m daskhpc.slurm ssgd ratings 8 --json r.json

>>> opts = build_parser().parse_args(["--shared-dir", "/scratch/me", "ssgd", "r.tsv", "4"])
>>> opts.shared_dir, opts.target, opts.args
('/scratch/me', 'ssgd', ['r.tsv', '4'])
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import shlex
import signal
import sys
import threading
import time
from contextlib import suppress

# (_mpi_watch imports distributed, whose log handlers bind sys.stderr: before main silences it)
from daskhpc import _launch, _mpi_security, _mpi_watch
from daskhpc._launch import BAD_OPTIONS, LOST_RANK, SCHEDULER_RANK
from daskhpc._mpi_options import BadOptions, quiet_unless, resolve

__all__ = ["build_parser", "main", "task_ranks"]

PROG = "python -m daskhpc.slurm"
#: Seconds the scheduler gives the others to receive "exit" before it exits itself.
ABORT_GRACE = 0.5
#: Files of this job in the shared directory (scheduler file, credentials).
_JOB_FILES: list[str] = []
#: The file a task that ends the job early writes its status to (beside the scheduler
#: file): the tasks that cannot hear the scheduler (it is gone, or its host cut off, or
#: it never started) read it there.
_ENDED: list[str] = []
#: Seconds between two looks for that file.
ENDED_POLL = 0.5


def build_parser() -> argparse.ArgumentParser:
    """The launcher's own options; everything after the target goes to the target."""
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Run a daskhpc workflow (as `daskhpc run` does) or a Python script on "
                    "the tasks of srun (no MPI): task 0 scheduler, task 1 client, the "
                    "others workers.",
        epilog=_launch.EPILOG)
    p.add_argument("--shared-dir", metavar="DIR",
                   help="a directory every task sees, for the scheduler file and the "
                        "job's credentials (default $SLURM_SUBMIT_DIR, $PBS_O_WORKDIR, or .)")
    p.add_argument("--scheduler-file", metavar="F",
                   help="the scheduler file's path (default "
                        "DIR/daskhpc-scheduler-JOBID.STEP.json); other clients can join with it")
    _launch.add_options(p)
    return p


def task_ranks(env=None) -> tuple[int, int, str] | None:
    """``(rank, ntasks, job id)`` from the batch system's environment, or None.

    Examples
    --------
    >>> task_ranks({"SLURM_PROCID": "1", "SLURM_NTASKS": "4", "SLURM_JOB_ID": "42"})
    (1, 4, '42')
    >>> task_ranks({"PMI_RANK": "0", "PMI_SIZE": "3", "PBS_JOBID": "7.pbs01"})
    (0, 3, '7.pbs01')
    >>> task_ranks({}) is None
    True
    """
    env = os.environ if env is None else env
    for rank, size, job in (("SLURM_PROCID", "SLURM_NTASKS", "SLURM_JOB_ID"),
                            ("PMI_RANK", "PMI_SIZE", "PBS_JOBID")):
        if env.get(rank, "").isdigit() and env.get(size, "").isdigit():
            job_id = env.get(job) or "0"
            if env.get("SLURM_STEP_ID") and job.startswith("SLURM"):
                job_id += "." + env["SLURM_STEP_ID"]   # two sruns in one job must not meet
            return int(env[rank]), int(env[size]), job_id
    return None


def main(argv: list[str] | None = None) -> int:
    """Run the launcher on this task; return this task's exit status.

    Every task runs the same command line; options are checked on every task
    before start-up, and messages printed once (task 0, then the client task).
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    ranks = task_ranks()
    rank = ranks[0] if ranks else None
    launcher = _launch.Launcher("daskhpc.slurm", "slurm", abort=_abort)
    try:
        with quiet_unless(rank in (None, SCHEDULER_RANK)):
            opts = build_parser().parse_args(argv)
            job = resolve(opts, where="srun")
            _launch.pick_interface(opts)
            if ranks is None:
                raise BadOptions("no task rank in the environment (SLURM_PROCID and "
                                 f"SLURM_NTASKS, or PMI_RANK and PMI_SIZE): run it as "
                                 f"srun -n 5 {PROG} {shlex.join(argv)}")
            job.scheduler_file = _handoff_file(opts, job, ranks[2])
            importlib.import_module("dask_jobqueue.runner")     # missing: exit 2 here
    except SystemExit as e:  # argparse: 2 for bad options, 0 for --help
        return int(e.code or 0)
    except (BadOptions, ImportError) as e:
        if rank in (None, SCHEDULER_RANK):
            hint = " (pip install 'daskhpc[slurm]')" if isinstance(e, ImportError) else ""
            launcher.say(f"error: {e}{hint}")
        return BAD_OPTIONS
    rank, size, job_id = ranks
    if size < 3:
        if rank == SCHEDULER_RANK:
            launcher.say(f"error: needs at least 3 tasks (scheduler, client, one worker), "
                         f"got {size}")
        return BAD_OPTIONS
    launcher.details["job_id"] = job_id
    return _run(launcher, opts, job, argv, rank, size)


def _handoff_file(opts, job, job_id: str) -> str:
    if opts.scheduler_file or job.scheduler_file:
        return os.path.abspath(opts.scheduler_file or job.scheduler_file)
    where = (opts.shared_dir or os.environ.get("SLURM_SUBMIT_DIR")
             or os.environ.get("PBS_O_WORKDIR") or os.getcwd())
    if not os.path.isdir(where):
        raise BadOptions(f"--shared-dir {where}: no such directory")
    return os.path.join(os.path.abspath(where), f"daskhpc-scheduler-{job_id}.json")


def _run(launcher, opts, job, argv: list[str], rank: int, size: int) -> int:
    import dask.config
    from dask_jobqueue.runner import BaseRunner, Role

    pem = _mpi_security.credentials_path(job.scheduler_file)
    ended = job.scheduler_file + ".ended"
    _launch.configure(opts, job, rank)
    if rank == SCHEDULER_RANK:
        _launch.remove_files([job.scheduler_file, pem, ended])      # a crashed run's
        _JOB_FILES.extend([job.scheduler_file, pem])
    _ENDED[:] = [ended]
    _watch_ended(launcher, rank, ended)
    creds = None
    if job.secure:
        if rank == SCHEDULER_RANK:
            creds = _mpi_security.new_credentials()
            _mpi_security.write_credentials(pem, creds)      # 0600, before the scheduler file
        else:
            creds = _wait_for(pem, opts.startup_timeout, _mpi_security.read_credentials)
            if creds is None:
                launcher.say(f"task {rank}: no credentials at {pem} within "
                             f"{opts.startup_timeout:g} s (--startup-timeout); is "
                             "--shared-dir a directory every task sees?")
                return LOST_RANK
        # the default Security() of the scheduler, the workers and every Client()
        dask.config.set(_mpi_security.config(creds))

    class TaskRunner(BaseRunner):
        """dask-jobqueue's runner with our ranks and a bounded wait for the scheduler."""

        async def get_role(self):
            return {0: Role.scheduler, 1: Role.client}.get(rank, Role.worker)

        async def get_scheduler_address(self) -> str:
            info = await asyncio.to_thread(_wait_for, job.scheduler_file, opts.startup_timeout,
                                           _read_address)
            if info is None:
                raise TimeoutError(f"no scheduler file at {job.scheduler_file} within "
                                   f"{opts.startup_timeout:g} s (--startup-timeout)")
            return info

        async def set_scheduler_address(self, scheduler) -> None:
            return None     # the scheduler writes its file (BaseRunner's raises)

        async def get_worker_name(self) -> int:
            return rank

    if rank == SCHEDULER_RANK:
        _mpi_watch.set_abort(_end_job)
    # the runner ends the scheduler's and workers' loops with a SIGINT to themselves:
    # ignored there (the status comes from the client); a KeyboardInterrupt on the client
    signal.signal(signal.SIGINT, signal.default_int_handler if rank == 1 else signal.SIG_IGN)
    from daskhpc.runtime import free_dashboard_address

    scheduler_options = {"dashboard": True, "protocol": job.protocol, "interface": opts.interface,
                         "scheduler_file": job.scheduler_file,
                         "dashboard_address": (free_dashboard_address(job.dashboard_address)
                                               if rank == SCHEDULER_RANK else None)}
    try:
        runner = TaskRunner(scheduler_options=scheduler_options, worker_class=job.worker_class,
                            worker_options=_launch.worker_kwargs(opts, job))
    except TimeoutError as e:
        launcher.say(f"task {rank}: {e}")
        _write_ended(LOST_RANK, rank)
        return LOST_RANK
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # noqa: BLE001 - any start-up failure ends this task
        launcher.say(f"task {rank}: could not start: {type(e).__name__}: {e}")
        _write_ended(_launch.FAILED, rank)
        _launch.remove_files(_JOB_FILES)
        return _launch.FAILED
    if rank == 1:
        # the job's client ends the cluster (_launch); the runner's own rpc (made
        # without the job's credentials) would try to at exit and fail noisily
        runner.scheduler_comm = None
        dask.config.set(scheduler_address=runner.scheduler_address)
        status = _launch.client_task(launcher, opts, job, argv, size, creds,
                                     [job.scheduler_file, pem], publish=False,
                                     on_client=lambda c: _mpi_watch.listen_for_end(
                                         c, launcher.name, exit_now=_exit_now))
        if status != 0:        # also for the tasks the scheduler cannot tell (or is gone)
            _write_ended(status, rank)
        return status
    if rank == SCHEDULER_RANK:
        _launch.remove_files(_JOB_FILES)
    return _launch.reported_status(launcher, rank, "task")


def _write_ended(code: int, rank: int) -> None:
    """Tell every task, through the shared directory, that the job ends with ``code``."""
    if _ENDED:
        with suppress(OSError):
            tmp = f"{_ENDED[0]}.{rank}.tmp"
            with open(tmp, "w") as f:
                json.dump({"code": code, "task": rank}, f)
            os.replace(tmp, _ENDED[0])


def _watch_ended(launcher, rank: int, path: str) -> None:
    """Exit with the status another task wrote to ``path``, within ``ENDED_POLL`` s of
    it (a daemon thread: a task that ends otherwise never waits for it)."""
    def watch():
        while True:
            time.sleep(ENDED_POLL)
            with suppress(OSError, ValueError, KeyError):
                with open(path) as f:
                    said = json.load(f)
                if said["task"] != rank:
                    launcher.say(f"task {rank}: task {said['task']} ended the job with "
                                 f"status {said['code']}")
                    if rank == SCHEDULER_RANK:    # the job's files are task 0's to remove,
                        time.sleep(2 * ENDED_POLL)  # once the others have seen this one
                        _launch.remove_files([*_JOB_FILES, path])
                    _exit_now(int(said["code"]))
                return

    threading.Thread(target=watch, name="daskhpc-slurm-ended", daemon=True).start()


def _wait_for(path: str, seconds: float, read):
    """``read(path)`` once it succeeds, or None after ``seconds`` (the file is written
    by another task, maybe on another node of a shared file system)."""
    deadline = time.monotonic() + seconds
    while True:
        with suppress(OSError, ValueError, KeyError, _mpi_security.SecurityError):
            return read(path)
        if time.monotonic() > deadline:
            return None
        time.sleep(0.2)


def _read_address(path: str) -> str:
    with open(path) as f:
        return json.load(f)["address"]     # ValueError while half-written


# -- ending the job at once (what MPI_Abort does under mpiexec) ------------------------

def _exit_now(code: int) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _exit_soon(code: int) -> None:
    """Run on a worker (or its nanny): exit after the answer to the scheduler is out."""
    threading.Timer(0.2, _exit_now, (code,)).start()


def _end_job(scheduler, code: int, message: str | None = None) -> None:
    """The watch's abort on the scheduler task: every task left exits with ``code``."""
    watch = scheduler.plugins.get(_mpi_watch.NAME)
    if watch is not None:
        watch.closing = True      # once: the others' exits (the client's too) are no news
    if message is not None:
        print(f"daskhpc.slurm: {message}", file=sys.stderr, flush=True)
    _mpi_watch.record_status(code)
    _mpi_watch.quiet_logs()       # the comms the end closes are no news after that line
    asyncio.ensure_future(_end(scheduler, code))


async def _end(scheduler, code: int) -> None:
    from daskhpc._dask_internals import broadcast, run_message

    _write_ended(code, SCHEDULER_RANK)         # for tasks the messages below cannot reach
    # the client task (the watch told it already why, when the watch ends the job)
    scheduler.log_event(_mpi_watch.ABORT_TOPIC, {"code": code})
    msg = run_message(_exit_soon, code)
    nannies = [w for w, ws in scheduler.workers.items() if ws.nanny]
    with suppress(Exception):
        await asyncio.wait_for(broadcast(scheduler, msg), 5)
    if nannies:
        with suppress(Exception):
            await asyncio.wait_for(broadcast(scheduler, msg, nannies, nanny=True), 5)
    # the others look for the ended file every ENDED_POLL s: gone after they have seen it
    await asyncio.sleep(max(ABORT_GRACE, 2 * ENDED_POLL))
    _launch.remove_files([*_JOB_FILES, *_ENDED])
    _exit_now(code)


async def _end_from_client(code: int, dask_scheduler=None) -> None:
    _end_job(dask_scheduler, code)


def _abort(status: int) -> None:
    """The client task's abort (--timeout, no client): every task exits with ``status``."""
    from distributed import default_client

    _write_ended(status, 1)       # the tasks the scheduler cannot tell, or with no scheduler
    with suppress(Exception):
        default_client().run_on_scheduler(_end_from_client, status)
    _exit_now(status)


if __name__ == "__main__":  # pragma: no cover - run by srun
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(code)
