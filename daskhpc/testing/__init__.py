"""Assertions and measurements for tests that run on a real Dask cluster.

Examples
--------
>>> from daskhpc.testing import assert_placement, inter_worker_bytes
>>> futures = submit_pinned(client, tasks, where, keys)         # doctest: +SKIP
>>> client.gather(futures)                                      # doctest: +SKIP
>>> assert_placement(client, tasks, where)                      # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import os
import signal
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from distributed.diagnostics.plugin import WorkerPlugin

from ._traced import Traced, traced

if TYPE_CHECKING:
    from distributed import Client

__all__ = ["assert_placement", "inter_worker_bytes", "KillOnce", "TaskKey", "Traced",
           "traced", "VALIDATE", "validated_client", "toy_program", "toy_row"]

#: Both state machines check their invariants after every transition.
VALIDATE = {"distributed.scheduler.validate": True, "distributed.worker.validate": True}


def validated_client(n_workers: int, **kwargs):
    """A client owning a fresh LocalCluster (worker processes under nannies, TCP,
    dashboard on a free local port) with the scheduler and workers validating every
    transition: the cluster every daskhpc test runs on. Use it as a context manager.

    Workers a nanny restarts after a kill are not validated (they read the config of
    their nanny's start).

    Examples
    --------
    >>> from daskhpc.runtime import worker_addresses
    >>> with validated_client(2) as client:                        # doctest: +SKIP
    ...     assert len(worker_addresses(client)) == 2
    """
    import dask.config

    from daskhpc.runtime import connect

    kwargs.setdefault("dashboard_address", "127.0.0.1:0")
    with dask.config.set(VALIDATE):
        return connect(n_workers=n_workers, **kwargs)


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
    from daskhpc.runtime import logged_transfers

    return sum(e["bytes"] for e in logged_transfers(client))


class KillOnce(WorkerPlugin):
    """A worker plugin that kills its worker process when a matching task starts, once.

    For fault-tolerance tests: the process dies for real (SIGKILL, as an out-of-memory
    kill or a failed node would end it), mid-run, at a chosen task. A nanny then starts
    a new worker process on a new address; that process gets the plugin too, so the
    ``marker`` file (created atomically by the killer) makes sure only one process dies.

    Parameters
    ----------
    match : callable
        ``match(key) -> bool``, evaluated on each worker for every task that starts
        executing.
    marker : str
        Path of a file that must not exist yet; created just before the kill.
    nth : int, default 1
        Kill at the ``nth`` matching task this worker process starts (the later units of
        a run, where the task keys do not say which unit is which).

    Examples
    --------
    >>> plugin = KillOnce(lambda k: isinstance(k, tuple) and k[2:4] == (1, 2),
    ...                   str(tmp_path / "killed"))                 # doctest: +SKIP
    >>> client.register_plugin(plugin, name="kill-once")            # doctest: +SKIP
    """

    def __init__(self, match, marker: str, nth: int = 1):
        self.match = match
        self.marker = marker
        self.nth = nth
        self.seen = 0

    def setup(self, worker) -> None:
        self.worker = worker

    def transition(self, key, start, finish, **kwargs) -> None:
        if finish != "executing" or not self.match(key):
            return
        self.seen += 1
        if self.seen < self.nth:
            return
        try:
            fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.write(fd, f"{self.worker.address} {key!r}\n".encode())
        os.close(fd)
        os.kill(os.getpid(), signal.SIGKILL)


class TaskKey:
    """A picklable key predicate for :class:`KillOnce`: tuple keys whose first item
    starts with ``prefix`` and whose items at the given positions have the given values.

    Examples
    --------
    >>> match = TaskKey("ssgd-step", {2: 3, 3: 1})      # epoch 3, sub-epoch 1
    >>> match(("ssgd-step-ab12", "0", 3, 1, "2", 0)), match(("ssgd-step-ab12", "0", 3, 2))
    (True, False)
    """

    def __init__(self, prefix: str, at: dict | None = None):
        self.prefix = prefix
        self.at = dict(at or {})

    def __call__(self, key) -> bool:
        if isinstance(key, str):
            return not self.at and key.startswith(self.prefix)
        if not isinstance(key, tuple) or not key or not str(key[0]).startswith(self.prefix):
            return False
        return all(i < len(key) and key[i] == v for i, v in self.at.items())


# -- a small program for tests of the runtime frame -----------------------------------

def _toy_init(ctx, start):
    if start is not None:
        ctx.state["x"] = np.array(start["x"])
        return
    rng = np.random.default_rng(ctx.part)
    ctx.state["x"] = rng.standard_normal(ctx.static)


def _toy_send(ctx, delay):
    if delay:
        time.sleep(delay)
    return {(ctx.part + 1) % ctx.nparts: ctx.state["x"]}


def _toy_mix(ctx):
    (src, other), = ctx.inbox.items()
    ctx.state["x"] = 0.5 * ctx.state["x"] + 0.25 * other + 0.01 * ctx.unit


def _toy_get(ctx):
    return ctx.state["x"]


def _toy_put(ctx, total):
    ctx.report(norm=float(np.linalg.norm(total)), first=float(ctx.state["x"][0]))


def _toy_save(ctx):
    return {"x": ctx.state["x"]}


def _toy_final(ctx):
    return ctx.state["x"]


def toy_program(nparts: int, units: int, *, length: int = 100, first_unit: int = 0,
                delay: float = 0.0):
    """A Program over ``nparts`` parts for tests of the frame: per unit a ring exchange of
    a ``length``-vector, a mix, a dense allreduce whose norm every part reports.

    Examples
    --------
    >>> from daskhpc.comm import run_local
    >>> finals, reports = run_local(toy_program(3, 2), [100] * 3)
    >>> len(reports), sorted(reports[0])
    (2, [0, 1, 2])
    """
    from daskhpc.comm import Plan, Program

    K = nparts
    prog = Program(K, "toy", init=_toy_init, final=_toy_final, save=_toy_save,
                   first_unit=first_unit)
    ring = Plan.from_messages(K, [(0, p, (p + 1) % K, [0]) for p in range(K)],
                              words_per_unit=length) if K > 1 else None
    for _ in range(first_unit, units):
        if ring is not None:
            prog.step(_toy_send, delay, sends=ring, label="send")
            prog.step(_toy_mix, label="mix")
        prog.allreduce(_toy_get, _toy_put, words=length, report=True, label="norm")
    return prog


def toy_row(unit: int, reports: dict) -> dict:
    """History row of :func:`toy_program`: the norm (equal on every part) and part 0's x[0]."""
    norms = {v["norm"] for v in reports.values()}
    assert len(norms) == 1, f"parts disagree on the allreduce: {norms}"
    return {"norm": norms.pop(), "first": reports[0]["first"]}


def workflow_call(mode: str, name: str, argv: list, client=None):
    """``(workflow, Call, RunOptions)`` of ``daskhpc <mode> <name> <argv>`` as the command
    line parses it (``client``: set as the run's client), to call a workflow's hooks
    the way the CLI does.

    Examples
    --------
    >>> wf, call, run = workflow_call("plan", "cpals", ["x.tns", "--parts", "2"])
    >>> wf.name, call.parts, call.options.rank, run.check_serial
    ('cpals', 2, 10, False)
    """
    from daskhpc import _workflows, cli

    args = cli.build_parser().parse_args([mode, name, *map(str, argv)])
    wf = _workflows.load(name)
    call, run = wf.call_of(args)
    return wf, call, dataclasses.replace(run, client=client) if client is not None else run
