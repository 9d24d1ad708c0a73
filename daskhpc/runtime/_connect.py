"""Connect to a Dask cluster configured for pinned, communication-bound runs.

A cluster ``connect()`` starts has no work stealing, no task fusion and no active memory
manager (it would drop replicas made on purpose).
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import warnings
from typing import Any

import dask.config
from distributed import Client

from daskhpc import _config
from daskhpc._workflows import check_dashboard_address

from ._gc import frozen
from ._logs import quiet_dask_noise
from ._sigint import start_without_sigint

#: Set before a cluster that ``connect()`` starts is built: the scheduler and the
#: workers read these once, at start-up.
CLUSTER_CONFIG: dict[str, Any] = {
    # our placement is the schedule: nothing may move
    "distributed.scheduler.work-stealing": False,
    # ReduceReplicas drops replicas that a broadcast made on purpose.
    "distributed.scheduler.active-memory-manager.start": False,
    # Fusion and annotation merging drop or intersect worker restrictions
    # (docs/decisions.md, "The cluster's configuration").
    "optimization.fuse.active": False,
    "optimization.annotations.fuse": False,
    # Dask's MALLOC_TRIM_THRESHOLD_=65536 freezes glibc's mmap threshold at 128 kB: every
    # larger array is an mmap + page faults + munmap (docs/gcn.md)
    "distributed.nanny.pre-spawn-environ": {
        "MALLOC_TRIM_THRESHOLD_": 128 * 2**20, "MALLOC_MMAP_THRESHOLD_": 32 * 2**20,
        "OMP_NUM_THREADS": 1, "MKL_NUM_THREADS": 1, "OPENBLAS_NUM_THREADS": 1},
}

MPI_CLIENT_ENV = "DASKHPC_MPI_CLIENT"
DASHBOARD_PRELOAD = "daskhpc.dashboard.preload"
#: Worker preload of a LocalCluster: Ctrl-C is the client's (daskhpc/runtime/_sigint.py).
SIGINT_PRELOAD = "daskhpc.runtime._sigint"
#: Worker preload of a LocalCluster: Dask's noise kept off stderr (daskhpc/runtime/_logs.py).
LOGS_PRELOAD = "daskhpc.runtime._logs"


def connect(
    address: str | None = None,
    *,
    scheduler_file: str | None = None,
    n_workers: int | None = None,
    dashboard_address: str | None = None,
    processes: bool = True,
    security: Any = None,
    **cluster_kwargs: Any,
) -> Client:
    """Return a Client, starting a local cluster unless told where one is.

    Tried in order: ``DASKHPC_MPI_CLIENT=1`` (the daskhpc dask-mpi launcher's client rank)
    joins the scheduler dask-mpi started; ``address`` or ``scheduler_file`` (else a
    configured ``scheduler-address``) joins that scheduler; otherwise a ``LocalCluster`` of
    ``n_workers`` one-thread worker processes over TCP starts with :data:`CLUSTER_CONFIG`
    and the daskhpc dashboard pages.

    Parameters
    ----------
    address, scheduler_file : str, optional
        Scheduler address (``"tcp://10.0.0.1:8786"``), or a scheduler file written by
        ``dask scheduler`` or ``dask-mpi``.
    n_workers, dashboard_address : int, str, optional
        Local workers to start (default ``daskhpc.runtime.workers``), and the dashboard's
        (default ``daskhpc.runtime.dashboard-address``; a free port if that one is taken).
    security : distributed.security.Security, optional
        TLS credentials; default with ``scheduler_file``: :func:`scheduler_file_security`.
    processes : bool, default True
        Worker processes (only real TCP transfers give meaningful byte counts) or threads.
    **cluster_kwargs
        Passed on to :class:`distributed.LocalCluster`.

    Returns
    -------
    distributed.Client
        Closing it shuts down the local cluster it started (``client.cluster``).

    Notes
    -----
    A scheduler joined from the environment ignores ``n_workers`` and cluster options; with
    ``address`` or ``scheduler_file`` they are an error, and :data:`CLUSTER_CONFIG` is the
    starter's to set. Joining waits at most ``daskhpc.runtime.connect-timeout`` seconds
    (:class:`NoScheduler`); a refused connection fails at once.

    Examples
    --------
    >>> with connect(n_workers=2) as client:          # doctest: +SKIP
    ...     print(worker_addresses(client))
    ['tcp://127.0.0.1:40181', 'tcp://127.0.0.1:43911']
    """
    wait = connect_timeout()
    if os.environ.get(MPI_CLIENT_ENV) == "1":
        return _join(None, None, wait)
    if address is not None or scheduler_file is not None:
        if n_workers is not None or cluster_kwargs:
            raise TypeError(
                "n_workers and cluster options only apply to a cluster that "
                "connect() starts, not to an existing scheduler"
            )
        if address is not None and scheduler_file is not None:
            raise TypeError("give a scheduler address or a scheduler file, not both")
        if scheduler_file is not None:
            _wait_for_file(scheduler_file, wait)
        if security is None and scheduler_file is not None:
            security = scheduler_file_security(scheduler_file)
        return _join(address, scheduler_file, wait, security=security)
    if dask.config.get("scheduler-address", None):
        # Client() joins a configured scheduler, and would then refuse our
        # cluster options: join it without them.
        return _join(None, None, wait)

    if n_workers is None:
        n_workers = _config.get("runtime.workers")
    if int(n_workers) < 1:
        raise ValueError(f"n_workers must be at least 1, not {n_workers}")
    if dashboard_address is None:
        dashboard_address = _config.get("runtime.dashboard-address")
    check_dashboard_address(dashboard_address)
    cluster_kwargs.setdefault("threads_per_worker", _config.get("runtime.threads-per-worker"))
    cluster_kwargs.setdefault("protocol", _config.get("runtime.protocol"))
    if security is not None:
        cluster_kwargs["security"] = security
    if processes and "worker_class" not in cluster_kwargs:
        # explicit: also covers workers added later by cluster.scale()
        worker_preload = list(dask.config.get("distributed.worker.preload", None) or [])
        worker_preload += [m for m in (SIGINT_PRELOAD, LOGS_PRELOAD) if m not in worker_preload]
        cluster_kwargs["config"] = {
            **CLUSTER_CONFIG,
            "distributed.worker.preload": worker_preload,
            **cluster_kwargs.get("config", {}),
        }
    # the daskhpc dashboard pages, served with Dask's own
    preload = list(dask.config.get("distributed.scheduler.preload", None) or [])
    if DASHBOARD_PRELOAD not in preload:
        preload.append(DASHBOARD_PRELOAD)
    with dask.config.set({**CLUSTER_CONFIG, "distributed.scheduler.preload": preload}):
        # the Client starts the LocalCluster and closes it again
        quiet_dask_noise()
        with warnings.catch_warnings():
            # another process may take the probed port first: Dask then serves on
            # another one, which the client's dashboard_link names
            warnings.filterwarnings("ignore", message=r"Port \d+ is already in use",
                                    category=UserWarning)
            return start_without_sigint(lambda: Client(
                n_workers=n_workers,
                processes=processes,
                dashboard_address=free_dashboard_address(dashboard_address),
                direct_to_workers=direct_to_workers(local=True),
                **cluster_kwargs,
            ), _close_quietly)


def direct_to_workers(local: bool) -> bool | None:
    """``Client(direct_to_workers=...)`` by ``daskhpc.runtime.direct-to-workers``
    (``local``: a LocalCluster's client; None: Dask's default)."""
    value = _config.get("runtime.direct-to-workers", "local")
    if value == "local":
        return True if local else None
    return bool(value)


def _close_quietly(client: Client) -> None:
    """Close a cluster a Ctrl-C stopped right after its start, without log lines."""
    import logging

    logging.getLogger("distributed").setLevel(logging.CRITICAL + 1)
    client.close()


#: Seconds ``connect`` waits for a scheduler file and a scheduler's answer
#: (``daskhpc.runtime.connect-timeout``).
CONNECT_TIMEOUT_S = 30.0


class NoScheduler(ConnectionError):
    """No scheduler to join: refused, no answer in the bounded wait, or no scheduler file
    (the CLI prints the message alone)."""

    one_line = True


def connect_timeout() -> float:
    """The bounded wait of :func:`connect`, in seconds."""
    from dask.utils import parse_timedelta

    return float(parse_timedelta(_config.get("runtime.connect-timeout", CONNECT_TIMEOUT_S),
                                 "s"))


def _wait_for_file(scheduler_file, wait: float) -> None:
    """Wait (bounded) for a scheduler file another process writes (Dask would wait forever)."""
    import time

    from daskhpc.errors import InputError

    deadline = time.monotonic() + wait
    folder = os.path.dirname(os.path.abspath(scheduler_file))
    while True:
        if _scheduler_file_address(scheduler_file):   # (None: not there yet, half written)
            return
        if not os.path.isdir(folder):
            raise InputError(f"{scheduler_file}: no such scheduler file (its directory "
                             f"{folder} does not exist)")
        if time.monotonic() > deadline:
            state = "has no scheduler address" if os.path.exists(scheduler_file) else \
                "does not exist"
            raise NoScheduler(f"{scheduler_file}: the scheduler file {state} after waiting "
                             f"{wait:g} s (is the scheduler running? more time: "
                             "DASK_DASKHPC__RUNTIME__CONNECT_TIMEOUT=SECONDS)")
        time.sleep(0.05)


def _refused(address) -> bool:
    """Whether nothing listens at a TCP ``address``; unreachable hosts and TLS are left to
    the wait."""
    from distributed.comm import parse_address, parse_host_port

    try:
        scheme, loc = parse_address(address)
        if scheme != "tcp":
            return False
        host, port = parse_host_port(loc)
        with socket.create_connection((host, int(port)), timeout=1.0):
            return False
    except ConnectionRefusedError:
        return True
    except (OSError, ValueError, TypeError):
        return False


def _scheduler_file_address(scheduler_file):
    """The ``address`` a scheduler file holds, None if it cannot be read."""
    import json

    with contextlib.suppress(OSError, ValueError, AttributeError, TypeError):
        with open(scheduler_file) as f:
            return json.load(f).get("address")
    return None


def _join(address, scheduler_file, wait: float, security=None) -> Client:
    """Client of a running scheduler, or :class:`NoScheduler` (at once when refused)."""
    target = address or (_scheduler_file_address(scheduler_file) if scheduler_file else None)
    if target and _refused(target):
        where = f"{target} (from {scheduler_file})" if scheduler_file else target
        stale = "; the file may be a finished job's" if scheduler_file else ""
        raise NoScheduler(f"no Dask scheduler at {where}: connection refused (nothing "
                          f"listens there{stale})")
    try:
        return Client(address, scheduler_file=scheduler_file, security=security,
                      timeout=wait, direct_to_workers=direct_to_workers(local=False))
    except ValueError as e:         # "missing port number in address 'nonsense'", ...
        from daskhpc.errors import InputError

        what = f"scheduler address {address}" if address else \
            f"scheduler file {scheduler_file}" if scheduler_file else "scheduler address"
        raise InputError(f"{what}: {e}") from e
    except Exception as e:          # timeouts, refusals, and whatever a
        # service that is not a Dask scheduler answers (garbage frames: MemoryError)
        where = address or (f"the address in {scheduler_file}" if scheduler_file else
                            dask.config.get("scheduler-address", None) or "the MPI job")
        now = _scheduler_file_address(scheduler_file) if scheduler_file else None
        if now is not None:             # (read again: a scheduler may have rewritten it)
            where = f"{now} (from {scheduler_file})"
        raise NoScheduler(f"no Dask scheduler answered at {where} within {wait:g} s "
                          f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
                          ) from e


#: ``python -m daskhpc.mpi --scheduler-file F`` writes its job's TLS key and certificate
#: (one PEM file, mode 0600) to ``F`` + this.
CREDENTIALS_SUFFIX = ".tls.pem"


def scheduler_file_security(scheduler_file: str):
    """The client Security for the TLS credentials beside ``scheduler_file``, or None.

    Examples
    --------
    >>> scheduler_file_security("/nonexistent/scheduler.json") is None
    True
    """
    pem = str(scheduler_file) + CREDENTIALS_SUFFIX
    if not os.path.exists(pem):
        _plain_scheduler(scheduler_file, pem)
        return None
    from distributed.security import Security

    return Security(tls_ca_file=pem, tls_client_cert=pem, require_encryption=True)


def _plain_scheduler(scheduler_file, pem: str) -> None:
    # a TLS scheduler without credentials would fail deep in distributed: say why
    address = _scheduler_file_address(scheduler_file)
    if str(address).startswith("tls://") and not dask.config.get(
            "distributed.comm.tls.client.cert", None):
        from daskhpc.errors import InputError

        raise InputError(f"{scheduler_file}: the scheduler at {address} needs TLS "
                         f"credentials and {pem} is not there (pass security=, or run the "
                         "job with --insecure)")


def worker_addresses(client: Client) -> list[str]:
    """Addresses of the workers, in a stable order.

    Sorted by worker name (numbers numerically), then address: the same order on every call
    and every rank (LocalCluster names workers 0, 1, ...; dask-mpi by rank).

    Examples
    --------
    >>> worker_addresses(client)                      # doctest: +SKIP
    ['tcp://127.0.0.1:40181', 'tcp://127.0.0.1:43911']
    """
    workers = worker_info(client)
    return in_order({addr: info.get("name") for addr, info in workers.items()})


def worker_info(client: Client) -> dict:
    """``{address: info}`` of every worker as the scheduler has them now (``name``,
    ``nanny``, ``status``, ...)."""
    # not client.scheduler_info(): its cache's periodic refresh (n_workers=0) may
    # overwrite it between fetch and read, and every worker looks lost
    return dict(client.sync(client.scheduler.identity, n_workers=-1)["workers"])


def in_order(names: dict) -> list[str]:
    """The addresses of ``{address: worker name}`` in :func:`worker_addresses`'s order."""
    return sorted(names, key=lambda addr: (_natural(names[addr]), addr))


def _natural(name: object) -> tuple:
    # worker 10 after worker 9; names may be strings ("gpu-3")
    return tuple(
        (0, int(part), "") if part.isdigit() else (1, 0, part)
        for part in re.split(r"(\d+)", str(name))
        if part
    )


def free_dashboard_address(address: str | None) -> str | None:
    """``address``, or the same host with port 0 if its port is taken."""
    # LocalCluster falls back to a random port with a UserWarning: probe first
    if not address:
        return address
    host, _, port = address.rpartition(":")
    if not port.isdigit() or int(port) == 0:
        return address
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # Tornado binds with SO_REUSEADDR, so a port in TIME_WAIT is free to it.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host or "", int(port)))
        except OSError:
            return f"{host}:0"
    return address


@contextlib.contextmanager
def connected(run):
    """A client of the cluster ``run`` (:class:`~daskhpc.runtime.RunOptions`) names, for a
    run: ``run.client``, a new one (joining, or a LocalCluster of ``workers``, closed at the
    end), else ``get_client()``. A growing cluster is waited for (``run.worker_timeout``);
    the client's objects are frozen meanwhile (``_gc``)."""
    with frozen():
        yield from _connected(run)


def _connected(run):
    from daskhpc.runtime._scaling import wait_for_cluster

    if run.client is not None:
        wait_for_cluster(run.client, run.worker_timeout)
        yield run.client
        return
    if run.joins() or run.workers is not None:
        with connect(run.scheduler_address, scheduler_file=run.scheduler_file,
                     n_workers=run.workers, dashboard_address=run.dashboard_address) as c:
            yield c
        return
    from distributed import get_client

    client = get_client()
    wait_for_cluster(client, run.worker_timeout)
    yield client
