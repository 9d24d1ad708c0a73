"""Watch an MPI job's Dask cluster and carry its exit status to every rank.

Under ``mpiexec`` a lost rank stays lost and pinned tasks would wait forever:
:class:`JobWatch` (a scheduler preload) ends the job with :data:`LOST_RANK` when a worker or
the client rank leaves early, telling the client rank why (:data:`ABORT_TOPIC`).
:func:`record_status` carries the exit status to every rank before shutdown (not an MPI
collective: one would hang on a lost peer).
"""

from __future__ import annotations

import logging
import sys
import time

from distributed.diagnostics.plugin import SchedulerPlugin

NAME = "daskhpc-mpi-watch"
#: The event topic on which the scheduler tells the client rank that the job ends, and why.
ABORT_TOPIC = "daskhpc-job-abort"
#: Exit status of a job that lost a rank (0 success, 1 failure, 2 bad options).
LOST_RANK = 3
#: Seconds between printing why the job ends and aborting it.
ABORT_GRACE = 0.5

_status: dict[str, int | None] = {"code": None}
#: Loggers silenced on the scheduler and workers once the job's status is in.
QUIET_AT_SHUTDOWN = ("distributed", "distributed.scheduler", "distributed.worker",
                     "distributed.nanny", "distributed.core", "distributed.comm")
#: ``abort(scheduler, code, message)`` of a launcher without MPI (:func:`set_abort`).
_hooks: dict = {"abort": None}


def _mpi_abort(code: int, message: str) -> None:
    import asyncio

    from mpi4py import MPI

    print(f"daskhpc.mpi: {message}", file=sys.stderr, flush=True)
    # Abort, not sys.exit (the other ranks may wait forever), after a moment for
    # mpiexec's output forwarding and the event to the client rank: the lines saying why
    try:
        asyncio.get_running_loop().call_later(ABORT_GRACE, MPI.COMM_WORLD.Abort, code)
    except RuntimeError:                  # no event loop here: wait in this thread
        time.sleep(ABORT_GRACE)
        MPI.COMM_WORLD.Abort(code)


def quiet_logs() -> None:
    """Silence Dask's loggers in this process: the job's end is decided and said."""
    for name in QUIET_AT_SHUTDOWN:
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)


class JobWatch(SchedulerPlugin):
    """End the MPI job when a rank leaves the cluster before the job is over; ``abort(code,
    message)`` defaults to printing the message and ``MPI.COMM_WORLD.Abort(code)``."""

    name = NAME

    def __init__(self, abort=None):
        self.abort = abort or _mpi_abort
        self.closing = False
        self.job_client: str | None = None
        self.names: dict[str, object] = {}

    def add_worker(self, scheduler, worker: str) -> None:
        # remember the rank now: in remove_worker the WorkerState is gone
        ws = scheduler.workers.get(worker)
        self.names[worker] = ws.name if ws is not None else None

    def remove_worker(self, scheduler, worker: str, **kwargs) -> None:
        if self.closing:
            return
        rank = self.names.get(worker)
        self._end(scheduler, LOST_RANK, f"worker rank {rank} ({worker}) left the cluster before "
                                        "the job finished; a lost rank ends the job "
                                        f"(exit status {LOST_RANK})")

    def remove_client(self, scheduler, client: str) -> None:
        if self.closing or client != self.job_client:
            return
        self._end(scheduler, LOST_RANK, "the client rank (1) disconnected before the job "
                                        f"finished; ending the job (exit status {LOST_RANK})")

    def _end(self, scheduler, code: int, message: str) -> None:
        # once: the other ranks' exits that follow are no news
        self.closing = True
        # the comms the end closes would log CRITICAL tracebacks after the line saying why
        quiet_logs()
        try:
            scheduler.log_event(ABORT_TOPIC, {"code": code, "message": message})
        except Exception:  # noqa: BLE001, S110 - the job ends either way
            pass
        self.abort(code, message)


def set_abort(hook) -> None:
    """Make the watch end the job with ``hook(scheduler, code, message)`` instead of
    ``MPI_Abort`` (``python -m daskhpc.slurm``); call before the scheduler starts."""
    _hooks["abort"] = hook


def dask_setup(scheduler) -> None:
    """Preload hook: install :class:`JobWatch` on the scheduler."""
    hook = _hooks["abort"]
    abort = None if hook is None else (lambda code, message: hook(scheduler, code, message))
    scheduler.add_plugin(JobWatch(abort=abort), idempotent=True)


# -- called from the client rank through run_on_scheduler / run -----------------------

def listen_for_end(client, name: str, exit_now=None) -> None:
    """Print, on the client rank, why the scheduler ends the job (``name: message``); then
    ``exit_now(code)`` if given (without MPI, nothing else ends this process)."""
    def on_end(event) -> None:
        msg = event[1]
        if msg.get("message"):
            print(f"{name}: the scheduler ends the job: {msg['message']}", file=sys.stderr,
                  flush=True)
        if exit_now is not None:
            exit_now(int(msg["code"]))

    client.subscribe_topic(ABORT_TOPIC, on_end)


def watch_client(client_id: str, dask_scheduler=None) -> None:
    """Tell the watch which client is the job's (its disconnect ends the job)."""
    dask_scheduler.plugins[NAME].job_client = client_id


def record_status(code: int, dask_scheduler=None, dask_worker=None) -> None:
    """Store the job's exit status in this process; on the scheduler also stand the watch down."""
    _status["code"] = int(code)
    if dask_scheduler is not None and NAME in dask_scheduler.plugins:
        dask_scheduler.plugins[NAME].closing = True
    if dask_scheduler is not None or dask_worker is not None:
        # the status is decided: the races of closing a busy cluster ("Scheduler was
        # unaware of this worker", failed heartbeats) are no news to the user
        quiet_logs()


def received_status() -> int | None:
    """The exit status the client rank sent, or None if it never did."""
    return _status["code"]
