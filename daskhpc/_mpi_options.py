"""Options of the launchers, checked on every rank before start-up: what rank 1 will run
(parsed as the CLI will) and how the cluster listens, so that a typo ends the job before any
scheduler or worker exists. Only one rank prints the complaint."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys


class BadOptions(Exception):
    """Options that cannot work; the job ends with status 2 before start-up."""


#: The dashboard's default: this node's loopback only (docs/hpc.md shows the ssh tunnel).
DASHBOARD_ADDRESS = "localhost:8787"


class Job:
    """What rank 1 will run (a workflow, ``run_argv`` for the CLI, or a script) and how
    the cluster listens (``protocol``, ``secure``: TLS with per-job credentials)."""

    def __init__(self, kind: str, target: str, args: list[str]):
        self.kind, self.target, self.args = kind, target, args
        self.run_argv = ["run", target, *args] if kind == "workflow" else None
        self.scheduler_file: str | None = None
        self.dashboard_address: str | None = None
        self.secure = True
        self.protocol = "tls"
        self.worker_class = "distributed.Worker"
        self.worker_options: dict = {}


def resolve(opts, where: str = "mpiexec") -> Job:
    """The job the launcher's parsed options describe."""
    from daskhpc import _config, _mpi_security, _workflows

    target = opts.target
    if target in _workflows.available():
        job = Job("workflow", target, list(opts.args))
        job.scheduler_file, job.dashboard_address = check_workflow_args(job.run_argv, where)
    elif target.endswith(".py"):
        if not os.path.isfile(target):
            raise BadOptions(f"{target}: no such script")
        job = Job("script", target, list(opts.args))
    else:
        known = ", ".join(sorted(_workflows.available())) or "none"
        raise BadOptions(f"{target!r} is neither a workflow ({known}) nor a .py script")
    # launcher-level options win over the same options given to the workflow
    job.scheduler_file = opts.scheduler_file or job.scheduler_file
    job.dashboard_address = opts.dashboard_address or job.dashboard_address or DASHBOARD_ADDRESS
    job.worker_class, job.worker_options = check_worker(opts.worker_class, opts.worker_options)
    protocol = opts.protocol or _config.get("runtime.protocol")
    job.secure = not opts.insecure
    if job.secure:
        try:
            job.protocol = _mpi_security.tls_protocol(protocol)
        except _mpi_security.SecurityError as e:
            raise BadOptions(str(e)) from None
        if not _mpi_security.available():
            raise BadOptions("a private cluster (the default) needs the `cryptography` package: "
                             "pip install cryptography, or pass --insecure on a network "
                             "secured otherwise")
    elif protocol == "tls":
        raise BadOptions(f"--protocol {protocol} needs the job's TLS credentials: drop --insecure")
    else:
        job.protocol = protocol
    return job


def check_worker(worker_class: str, options: str | None) -> tuple[str, dict]:
    """``--worker-class`` (importable) and ``--worker-options`` (a JSON object), checked."""
    from daskhpc._dask_internals import import_term

    try:
        import_term(worker_class)
    except (ImportError, AttributeError, ValueError) as e:
        raise BadOptions(f"--worker-class {worker_class}: cannot import it ({e})") from None
    if options is None:
        return worker_class, {}
    try:
        values = json.loads(options)
    except ValueError as e:
        raise BadOptions(f"--worker-options is not JSON ({e}): {options}") from None
    if not isinstance(values, dict):
        raise BadOptions(f"--worker-options must be a JSON object, e.g. "
                         f"'{{\"memory_limit\": \"4GB\"}}', not {options}")
    return worker_class, values


def check_workflow_args(run_argv: list[str], where: str = "mpiexec"
                        ) -> tuple[str | None, str | None]:
    """Parse ``daskhpc run ...`` as the CLI will, before any cluster exists."""
    from daskhpc import cli

    values = vars(cli.parse(run_argv))      # SystemExit(2): a bad option, said in one line
    if values.get("broken"):
        raise BadOptions(values["broken"])
    for opt in ("workers", "scheduler_address"):
        if values.get(opt) is not None:
            raise BadOptions(f"--{opt.replace('_', '-')} does not apply under {where}: the "
                              "workers are the ranks from 2 on")
    return values.get("scheduler_file"), values.get("dashboard_address")


@contextlib.contextmanager
def quiet_unless(loud: bool):
    """Silence stdout/stderr on ranks that must not repeat rank 0's messages."""
    saved = sys.stdout, sys.stderr
    if not loud:
        sys.stdout = sys.stderr = io.StringIO()
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def env_rank() -> int | None:
    # The rank before MPI is initialised, from the launcher's environment
    # (Hydra/MPICH, Open MPI, SLURM srun, PMIx); None when run without one.
    for var in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID"):
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return None
