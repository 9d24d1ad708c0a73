"""Assertions and measurements for tests that run on a real Dask cluster.

Examples
--------
>>> from daskhpc.testing import assert_placement, inter_worker_bytes
>>> futures = submit_pinned(client, tasks, where, keys)         # doctest: +SKIP
>>> client.gather(futures)                                      # doctest: +SKIP
>>> assert_placement(client, tasks, where)                      # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from distributed import Client

__all__ = ["assert_placement", "inter_worker_bytes"]


def assert_placement(
    client: Client,
    futures_or_keys: Iterable[Any],
    expected_worker_by_key: Mapping[Any, str],
) -> None:
    """Assert that each task ran on, and only on, its expected worker.

    The evidence is each worker's own story of the key: a transition from
    ``executing`` to ``memory`` (or ``error``). Where the result is stored is no
    evidence: a consumer on another worker holds a replica of its inputs.

    Parameters
    ----------
    client : distributed.Client
    futures_or_keys : iterable of Future or key
        The tasks to check (they must have finished).
    expected_worker_by_key : mapping
        ``{key: worker address}``; may hold more keys than are checked.

    Raises
    ------
    AssertionError
        Listing every key that ran elsewhere, on several workers, or not at all.

    Examples
    --------
    >>> fs = submit_pinned(client, tasks, where, list(tasks))       # doctest: +SKIP
    >>> client.gather(fs)                                           # doctest: +SKIP
    >>> assert_placement(client, fs, where)                         # doctest: +SKIP

    .. warning::
       Reads ``WorkerState.story``, whose length is bounded by
       ``distributed.admin.low-level-log-length``.
    """
    keys = [getattr(f, "key", f) for f in futures_or_keys]
    missing = [k for k in keys if k not in expected_worker_by_key]
    if missing:
        raise KeyError(f"no expected worker for {missing[:3]}")

    def executed(keys, dask_worker):
        # Transition records read (key, start, finish, ...); only the worker
        # that ran the task has executing -> memory (or error) for it.
        return [
            entry[0]
            for entry in dask_worker.state.story(*keys)
            if len(entry) > 3 and entry[1] == "executing" and entry[2] in ("memory", "error")
        ]

    ran_on: dict[Any, set[str]] = {k: set() for k in keys}
    for worker, ran in client.run(executed, keys).items():
        for key in ran:
            if key in ran_on:
                ran_on[key].add(worker)
    wrong = {
        k: (sorted(ran_on[k]), expected_worker_by_key[k])
        for k in keys
        if ran_on[k] != {expected_worker_by_key[k]}
    }
    if wrong:
        lines = [
            f"  {k!r}: ran on {got or 'no worker'}, expected {want}"
            for k, (got, want) in wrong.items()
        ]
        raise AssertionError(
            f"{len(wrong)} of {len(keys)} tasks not placed as expected:\n" + "\n".join(lines)
        )


def inter_worker_bytes(client: Client) -> int:
    """Wire bytes sent between workers since they started, as far as logged.

    Client and scheduler gathers are excluded. For the traffic of one run use
    :class:`daskhpc.runtime.TransferLedger` instead; this is for a before/after
    difference in a test.

    Examples
    --------
    >>> before = inter_worker_bytes(client)                         # doctest: +SKIP
    >>> client.gather(submit_pinned(client, tasks, where, keys))    # doctest: +SKIP
    >>> inter_worker_bytes(client) - before                         # doctest: +SKIP
    1048867
    """
    from daskhpc.runtime._ledger import _log_since

    logs = client.run(_log_since, {}, 2.0)
    return sum(e["bytes"] for log in logs.values() for e in log["entries"])
