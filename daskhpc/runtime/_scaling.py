"""A run on a cluster that is still growing: wait (bounded) for the workers it was scaled
to."""

from __future__ import annotations

import time

from daskhpc import _config
from daskhpc.errors import InputError

#: Seconds a run waits for the workers its cluster was scaled to
#: (``daskhpc.runtime.worker-timeout``; ``worker_timeout=`` of a run wins).
WORKER_TIMEOUT_S = 120.0
#: Seconds between two looks at the scheduler while waiting.
POLL_S = 0.2


class WorkersMissing(TimeoutError):
    """Fewer workers joined than the cluster was scaled to, within the bounded wait (the CLI
    prints the message alone)."""

    one_line = True


def worker_timeout(value=None) -> float:
    """The bounded wait in seconds: ``value`` (a number or ``"2 minutes"``), else the
    config."""
    from dask.utils import parse_timedelta

    if value is None:
        value = _config.get("runtime.worker-timeout", WORKER_TIMEOUT_S)
    return float(parse_timedelta(value, "s"))


def wait_for_cluster(client, timeout=None) -> None:
    """Return once the client's cluster has every worker it was scaled to.

    A run places its parts on the workers it sees when it starts, so after
    ``cluster.scale(4)`` (a dask-jobqueue cluster whose jobs join minutes later) it waits
    for the cluster's ``plan``, at most ``daskhpc.runtime.worker-timeout`` seconds. A client
    without a cluster object here waits for one worker. Adaptive scaling is refused: it
    retires workers that hold pinned parts while they wait, a lost worker every time.

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

    Examples
    --------
    >>> cluster.scale(2); client = Client(cluster)                 # doctest: +SKIP
    >>> wait_for_cluster(client)       # returns once both are in  # doctest: +SKIP
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
    # the scheduler's own count, as worker_info (_connect imports this module)
    return len(client.sync(client.scheduler.identity, n_workers=-1)["workers"])


def _planned(cluster) -> int | None:
    """How many workers the cluster was asked for, or None if it does not say."""
    try:
        return len(cluster.plan)
    except (AttributeError, TypeError, NotImplementedError):
        return None


def _refuse_adaptive(cluster) -> None:
    # Cluster.adapt() keeps its Adaptive in _adaptive (as distributed's repr reads it)
    adaptive = getattr(cluster, "_adaptive", None)
    if adaptive is not None and getattr(adaptive, "state", None) in ("starting", "running"):
        raise InputError(
            "the cluster scales adaptively (cluster.adapt()), which retires workers that "
            "hold a run's pinned parts while they wait: stop it (the object adapt() "
            "returned: .stop()) and cluster.scale(n) to the workers the run should use")
