"""SSGD on the workflow frame: one attempt's pinned graph, in windows of epochs.

Tasks (all with a hard worker restriction); P is the worker's parts (one label like
``"0+1"`` when it holds several):

``init`` (P)               the parts' states, created on their worker (``_tasks``)
``step`` (P, e, k, B, i)   sub-epoch k of epoch e of every part in P (updating blocks B),
                           as a group: one task per *bundle* (all messages from this
                           worker to one other worker after this sub-epoch), or one task
                           if the worker sends nothing. Inputs: the previous group's task
                           i=0 and the bundles its parts consume now. Whichever task of
                           the group runs first sweeps; the value of a task is its bundle,
                           the only H traffic, fetched by the receiving worker. Messages
                           between parts of one worker are read from the sender's state.
``evsend`` / ``eval``      test error after an evaluated epoch (see ``_runplan``)
``ckpt`` (p, e)            part p's state after epoch e, written to the checkpoint
``final`` (p)              W_p and the H rows p holds the newest copy of (after the run)

That is the graph mode. In the direct mode a worker runs a window of epochs in one task
``epoch`` (P, e) (``e``: its last epoch): init, sub-epochs, test errors, checkpoints and
finals inside it (``_tasks.epochs_direct``), every message pushed to its receiver.

Every part reports the end of each epoch (its loss partial sum), its test error and its
checkpoint as unit reports (``daskhpc.runtime.send_report``); the frame
(``daskhpc.runtime.run_job``, with the Job of :func:`ssgd_job`) turns them into the
history, marks checkpoint steps complete, and does placement, recovery, progress and
measurement.

Examples
--------
>>> from daskhpc.ssgd._setup import prepare                     # doctest: +SKIP
>>> out = run_job(client, ssgd_job(prepare(ratings, 4, strategy="hc")))  # doctest: +SKIP
>>> out.measured["inter_worker_bytes"]                          # doctest: +SKIP
"""

from __future__ import annotations

import functools

import numpy as np

from daskhpc.runtime import AttemptGraph, Exchange, GraphJob, Placement, register_once

from . import _tasks
from ._graph import STEP, WindowGraph
from ._parts import part_data
from ._serial import assemble
from ._checkpoint import fingerprint, restore, save_partition
from ._kernels import learning_rate
from ._setup import Setup

__all__ = ["ssgd_job", "attempt_graph", "ring_placement", "WINDOW"]

#: Epochs per submitted window (``Job.window``): the scheduler holds at most two windows
#: of tasks, however many epochs the run has (docs/ssgd.md).
WINDOW = 8
#: Sub-epochs of the first window in the direct mode (at least ``WINDOW`` epochs): a
#: window is one task per worker there, so it can be longer (the workers idle for a round
#: trip to the client between windows: a Dask dependency between windows would keep them
#: all in the scheduler); what bounds it is the size of the steps' specs it carries, which
#: the client builds before the first window is submitted (12 ms for 256 epochs of K = 2)
#: and while the window before runs for the others.
DIRECT_SUBEPOCHS = 512
#: Each next window of the direct mode is twice as long, up to this many sub-epochs: a
#: window's end stalls the workers (docs/benchmarks.md).
DIRECT_MAX_SUBEPOCHS = 4096


def attempt_graph(s: Setup, ctx, order_plugin: bool, timeline: list | None,
                  exchange: str = "graph") -> AttemptGraph:
    """The graph of the epochs ``ctx.todo`` on ``ctx.placement`` (from ``ctx.start``).

    ``exchange``: ``graph`` (a task group per sub-epoch, bundles fetched; the stratum-order
    plugin orders and records them) or ``direct`` (a task per worker and window of epochs,
    or ``units-per-task`` epochs, bundles pushed; the timeline comes from the parts' own
    step logs, and their epoch reports carry it to the dashboard)."""
    direct = exchange == "direct"
    if not ctx.todo:                   # the checkpoint is at the end: nothing to run
        return AttemptGraph({}, {}, [], collect=lambda _: ctx.start)
    run = s if ctx.start is None else s.resumed(ctx.todo[0], *ctx.start)
    K, pl = s.K, ctx.placement
    ck_epochs = range(run.E) if ctx.checkpoint is not None else ()
    if direct:
        order_plugin = False          # a task per window of epochs: nothing to order
    # where no stratum-order plugin records the step groups (the direct mode's epoch
    # tasks have none), the parts' epoch reports carry their sweeps as strata rows
    from ._plugin import installed

    rows_from_parts = direct or (not order_plugin and not installed(ctx.client))
    owner = [pl.worker(p) for p in range(K)]

    def made(p):
        d = part_data(run, p, owner, ck_epochs)
        d.topic = ctx.topic
        d.strata = f"{STEP}-{ctx.token}" if rows_from_parts else None
        return d

    # made and sent a part at a time: the client holds one part's ratings at once
    futures = ctx.store.put_each("part", range(K), made, transient=True)
    if run._blocks is not None and run._blocks[1] is not None:
        run._blocks = None        # 4 bytes a rating; made again if an attempt needs it
    if run.values is not None:       # a collection: the ratings are on the parts' workers
        from ._collect import with_values

        held = ctx.store["values"]
        futures = {p: ctx.client.submit(with_values, futures[p], held[p], pure=False,
                                        key=f"ssgd-values-{ctx.token}-{p}",
                                        workers=[pl.worker(p)], allow_other_workers=False)
                   for p in range(K)}
    paths = {(p, e): ctx.checkpoint.file(run.epoch0 + e + 1, f"part-{p}.npz")
             for p in range(K) for e in ck_epochs}
    # Futures (not their keys) in the tasks: the graph then knows they are data.
    builder = WindowGraph(run, pl.worker, [futures[p] for p in range(K)], ctx.token, paths,
                          direct=direct, per_task=ctx.units_per_task)
    size = max(1, int(ctx.window or (max(WINDOW, DIRECT_SUBEPOCHS // K) if direct
                                     else WINDOW)))
    # the direct mode's windows of one task per worker grow (DIRECT_MAX_SUBEPOCHS); a
    # window set by the job, or a task per few epochs (many tasks a window), stays
    most = max(size, DIRECT_MAX_SUBEPOCHS // K) if direct and not ctx.window and \
        not ctx.units_per_task else size
    last: dict = {}            # the last window's finals and the keys they come from

    def window(e0, n=size):
        e1 = min(e0 + n, run.E)
        tasks, where, follow = builder.window(e0, e1)
        wanted = [*follow["eval"].values(), *follow["ckpt"].values(),
                  *follow["final"].values(), *follow["done"]]
        last["final"] = follow["final"]
        last["wanted"] = wanted
        nxt = (lambda: window(e1, min(2 * n, most))) if e1 < run.E else None
        return AttemptGraph(tasks, where, wanted, collect=collect, next=nxt)

    if direct:
        register_once(ctx.client, Exchange(), Exchange.name)
    if order_plugin:
        from ._plugin import register

        register(ctx.client)

    def collect(values):
        got = dict(zip(last["wanted"], values))
        # direct mode: a worker's last task returns its parts' finals
        finals = {p: got[k][p] if direct else got[k] for p, k in last["final"].items()}
        if direct and timeline is not None:
            timeline[:] = _step_log_timeline(finals, pl, f"{STEP}-{ctx.token}", K)
        return assemble(run, finals.items())

    def cleanup():
        from ._plugin import fetch_timeline

        rows = fetch_timeline(ctx.client, f"{STEP}-{ctx.token}")
        if timeline is not None:
            timeline[:] = rows
        _publish_strata(ctx.client, rows)

    step, evsend = f"{STEP}-{ctx.token}", f"ssgd-evsend-{ctx.token}"

    def unit_of_key(key):
        if isinstance(key, tuple) and key and key[0] in (step, evsend):
            return run.epoch0 + int(key[2] if key[0] == step else key[3])
        return None

    plans = [(run.runplan.run_plan(), lambda ph: run.epoch0 + ph // K)]
    ev = run.runplan.eval_plan()
    if ev is not None:
        plans.append((ev, lambda ph: run.epoch0 + ph))
    g = window(0)
    g.plans, g.unit_of_key = plans, unit_of_key
    g.cleanup = cleanup if order_plugin else None
    g.worker_cleanup = (_tasks.cleanup, ctx.token)     # the frame's closing call runs it
    return g


def ring_placement(nparts: int, workers) -> Placement:
    """Consecutive parts on the same worker: parts ``[w K / W, (w + 1) K / W)`` on worker w.

    A block travels p -> p-1 -> p-2 ..., so with more parts than workers this keeps most
    ring neighbours together: their messages (including every distance-1 message, the
    ones P2P and H&C send after every sub-epoch) then stay inside a worker and need no
    task. Round robin would put every ring neighbour on another worker.

    Examples
    --------
    >>> ring_placement(4, ["a", "b"]).as_dict()
    {0: 'a', 1: 'a', 2: 'b', 3: 'b'}
    """
    workers = list(workers)
    W = len(workers)
    return Placement(nparts, workers, [workers[p * W // nparts] for p in range(nparts)])


def _publish_strata(client, timeline) -> None:
    """The stratum-order plugin's rows of the attempt, for the dashboard (its sampler can
    miss the last ones). The plan is the frame's to publish (the attempt's ``plans``, one
    definition with the report). Never fails the run: ``publish`` logs instead."""
    from daskhpc.dashboard import publish

    publish(client, "strata", rows=[{k: v for k, v in r.items() if k != "T"}
                                    for r in timeline])


def _step_log_timeline(finals: dict, placement, run: str, K: int) -> list[dict]:
    """Timeline rows (as the stratum-order plugin records them) from the parts' own step
    logs, for the direct mode: worker clocks, fine on one machine and for the order check
    of :func:`~daskhpc.ssgd.check_timeline` (one clock per worker)."""
    return [{"run": run, "part": p, "epoch": e, "subepoch": k, "T": (e, k), "block": b,
             "worker": placement.worker(p), "start": t0, "stop": t1, "held": False,
             "state": "memory"}
            for p, f in sorted(finals.items()) for e, k, b, t0, t1 in f["log"]]


def ssgd_job(s: Setup, *, checkpointing: bool = False, order_plugin: bool = True,
             placement=None, timeline: list | None = None, exchange: str = "graph",
             window: int | None = None):
    """The frame's Job for the run prepared in ``s`` (epochs are its units).

    ``timeline``, if given, receives the stratum-order plugin's rows of the last attempt.
    ``window``: epochs per submission (default ``WINDOW``; direct exchange:
    ``DIRECT_SUBEPOCHS`` sub-epochs, at least ``WINDOW`` epochs, each next window twice as
    long up to ``DIRECT_MAX_SUBEPOCHS``).
    """
    K, o = s.K, s.options
    evaluated = set(s.runplan.eval_epochs.tolist())

    def reporters(e):
        out = set(range(K))
        if e in evaluated:
            out |= {("eval", p) for p in range(K)}
        if checkpointing:
            out |= {("ckpt", p) for p in range(K)}
        return out

    def row(e, rep):
        loss = 0.0
        for p in range(K):                 # per part, then over parts: the serial order
            loss += rep[p]["loss"]
        out = {"epoch": e, "lr": learning_rate(o.lr, e), "train_loss": loss}
        if e in evaluated:
            total = 0.0
            for p in range(K):
                total += rep[("eval", p)]["sse"]
            out["test_rmse"] = float(np.sqrt(total / s.test.nnz))
        return out

    def attempt(ctx):
        return attempt_graph(s, ctx, order_plugin, timeline, exchange)

    return GraphJob(
        "ssgd", K, o.epochs, row, functools.partial(fingerprint, s), attempt=attempt,
        restore=lambda ck, n: restore(s, ck, n), reporters=reporters,
        savers=(lambda e: {("ckpt", p) for p in range(K)}) if checkpointing else None,
        placement=placement or functools.partial(ring_placement, K), warm_up=_tasks.warm_up,
        unit_name="epochs", opened=lambda ck: save_partition(s, ck), window=window,
        diverged_hint=f"try a smaller --lr than {o.lr:g}")

