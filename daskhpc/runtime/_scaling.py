"""A run on a cluster that is still growing: wait (bounded) for the workers it was scaled to.

In a notebook on a login node, ``cluster = SLURMCluster(...); cluster.scale(4)`` returns at
once and the batch jobs join later (minutes, in a busy queue). A run places its parts on
the workers it sees when it starts, so it waits for every worker the cluster was asked
for (the cluster's ``plan``: :class:`distributed.SpecCluster` and every dask-jobqueue
cluster) and fails with one line if they do not come within
``daskhpc.runtime.worker-timeout`` seconds.

Adaptive scaling (``cluster.adapt()``) is refused: it retires idle workers, and a worker
that holds pinned parts and waits for its next unit looks idle to it; a retired owner is a
lost worker to the run (a restart from the checkpoint), every time.

Examples
--------
>>> from distributed import Client, LocalCluster
>>> cluster = LocalCluster(n_workers=0, processes=False)       # doctest: +SKIP
>>> cluster.scale(2); client = Client(cluster)                 # doctest: +SKIP
>>> wait_for_cluster(client)       # returns once both are in  # doctest: +SKIP
"""

from __future__ import annotations

import time

from daskhpc import _config
from daskhpc.errors import InputError

__all__ = ["WorkersMissing", "wait_for_cluster", "worker_timeout"]

#: Seconds a run waits for the workers its cluster was scaled to
#: (``daskhpc.runtime.worker-timeout``; ``worker_timeout=`` of a run wins).
WORKER_TIMEOUT_S = 120.0
#: Seconds between two looks at the scheduler while waiting.
POLL_S = 0.2


class WorkersMissing(TimeoutError):
    """Fewer workers joined than the cluster was scaled to, within the bounded wait (the
    message says how many and what to do; the CLI prints it alone)."""

    one_line = True


def worker_timeout(value=None) -> float:
    """The bounded wait in seconds: ``value`` (a number or ``"2 minutes"``), else the config.

    Examples
    --------
    >>> worker_timeout(5), worker_timeout("2 minutes")
    (5.0, 120.0)
    """
    from dask.utils import parse_timedelta

    if value is None:
        value = _config.get("runtime.worker-timeout", WORKER_TIMEOUT_S)
    return float(parse_timedelta(value, "s"))


def wait_for_cluster(client, timeout=None) -> None:
    """Return once the client's cluster has every worker it was scaled to.

    A client without a cluster object in this process (a scheduler address or file) waits
    for one worker only: its workers are whoever joined.

    Parameters
    ----------
    client : distributed.Client
    timeout : float or str, optional
        Seconds (default :func:`worker_timeout`).

    Raises
    ------
    InputError
        The cluster scales adaptively, or it has no worker and was asked for none.
    WorkersMissing
        Not every worker joined in time.
    """
    cluster = getattr(client, "cluster", None)
    if cluster is not None:
        _refuse_adaptive(cluster)
    have = _joined(client)
    # a joined scheduler (no cluster object here) says nothing of its plan: at least one
    need = _planned(cluster) if cluster is not None else 1
    if need is None or have >= need:
        if have == 0 and need == 0:
            raise InputError("the cluster has no workers and was asked for none: "
                             "cluster.scale(n) first (the run places its parts on them)")
        return
    wait = worker_timeout(timeout)
    deadline = time.monotonic() + wait
    while have < need:
        if time.monotonic() > deadline:
            fewer = f" (cluster.scale({have}))" if have else ""
            raise WorkersMissing((
                f"no worker joined the scheduler at {client.scheduler.address} in {wait:g} "
                "s: start workers for it" if cluster is None else
                f"{have} of the {need} workers this run needs joined in {wait:g} s (the "
                f"cluster was scaled to {need}): scale the cluster to the workers you can "
                f"get{fewer}") + ", or wait longer (worker_timeout=SECONDS, or "
                "daskhpc.runtime.worker-timeout)")
        time.sleep(POLL_S)
        have = _joined(client)
        if cluster is not None:
            _refuse_adaptive(cluster)      # adapt() may be called from another thread
            need = _planned(cluster) or 0  # scale() from another thread counts


def _joined(client) -> int:
    # the scheduler's own count (connect.worker_addresses's way: not the client's cache);
    # this module is imported by _connect, so it does not import it back
    return len(client.sync(client.scheduler.identity, n_workers=-1)["workers"])


def _planned(cluster) -> int | None:
    """How many workers the cluster was asked for, or None if it does not say (a cluster
    class that is no SpecCluster)."""
    try:
        return len(cluster.plan)
    except (AttributeError, TypeError, NotImplementedError):
        return None


def _refuse_adaptive(cluster) -> None:
    # Cluster.adapt() keeps its Adaptive in _adaptive (distributed's own repr reads it the
    # same way); a stopped one no longer scales
    adaptive = getattr(cluster, "_adaptive", None)
    if adaptive is not None and getattr(adaptive, "state", None) in ("starting", "running"):
        raise InputError(
            "the cluster scales adaptively (cluster.adapt()), which retires workers that "
            "hold a run's pinned parts while they wait: stop it (the object adapt() "
            "returned: .stop()) and cluster.scale(n) to the workers the run should use")
