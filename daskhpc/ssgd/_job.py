"""SSGD on the workflow frame: one attempt's pinned graph, in windows of epochs.

Graph mode: ``init`` (P) creates the states of a worker's parts P; ``step`` (P, e, k, B,
i) runs sub-epoch k of epoch e as a group, one task per *bundle* (all messages to one
other worker), whose value is the only H traffic; ``evsend`` / ``eval``, ``ckpt`` (p, e)
and ``final`` (p). Direct mode: one ``epoch`` (P, e) task per worker and window
(``_tasks.epochs_direct``), messages pushed."""

from __future__ import annotations

import functools

import numpy as np

from daskhpc.runtime import AttemptGraph, Exchange, GraphJob, Placement, register_once

from . import _tasks
from ._graph import STEP, WindowGraph
from ._collect import with_values
from ._parts import part_data, part_values
from ._serial import assemble
from ._checkpoint import fingerprint, restore, save_partition
from ._kernels import learning_rate
from ._setup import Setup

#: Epochs per submitted window (``Job.window``): the scheduler holds at most two windows
#: of tasks, however many epochs the run has (docs/ssgd.md).
WINDOW = 8
#: Sub-epochs of the first window in the direct mode (at least ``WINDOW`` epochs): one
#: task per worker, bounded by the size of the step specs the client builds for it.
DIRECT_SUBEPOCHS = 512
#: Each next window of the direct mode is twice as long, up to this many sub-epochs: a
#: window's end stalls the workers (docs/benchmarks.md).
DIRECT_MAX_SUBEPOCHS = 4096


def attempt_graph(s: Setup, ctx, order_plugin: bool, timeline: list | None,
                  exchange: str = "graph") -> AttemptGraph:
    """The graph of the epochs ``ctx.todo`` on ``ctx.placement`` (from ``ctx.start``)."""
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

    # made and sent a part at a time, its values after its ids: the client holds one
    # kind of one part's ratings at once (a collection's values are on the workers)
    futures = ctx.store.put_each("part", range(K), made, transient=True)
    held = ctx.store["values"] if run.values is not None else ctx.store.put_each(
        "vals", range(K), lambda p: part_values(run, p), transient=True)
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
        if direct and timeline is not None:     # rows as the plugin records them
            timeline[:] = [{"run": f"{STEP}-{ctx.token}", "part": p, "epoch": e,
                            "subepoch": k, "T": (e, k), "block": b, "worker": pl.worker(p),
                            "start": t0, "stop": t1, "held": False, "state": "memory"}
                           for p, f in sorted(finals.items()) for e, k, b, t0, t1 in f["log"]]
        return assemble(run, finals.items())

    def cleanup():
        from daskhpc.dashboard import publish

        from ._plugin import fetch_timeline

        rows = fetch_timeline(ctx.client, f"{STEP}-{ctx.token}")
        if timeline is not None:
            timeline[:] = rows
        # the attempt's rows for the dashboard (its sampler can miss the last)
        publish(ctx.client, "strata", rows=[{k: v for k, v in r.items() if k != "T"}
                                            for r in rows])

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
    """Consecutive parts on the same worker: parts ``[w K / W, (w + 1) K / W)`` on worker w,
    so most ring neighbours (every distance-1 message of P2P and H&C) share a worker and
    their messages need no task."""
    workers = list(workers)
    W = len(workers)
    return Placement(nparts, workers, [workers[p * W // nparts] for p in range(nparts)])


def ssgd_job(s: Setup, *, checkpointing: bool = False, order_plugin: bool = True,
             placement=None, timeline: list | None = None, exchange: str = "graph",
             window: int | None = None):
    """The frame's Job for the run prepared in ``s`` (epochs are its units)."""
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
