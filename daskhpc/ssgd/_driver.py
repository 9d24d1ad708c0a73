"""The distributed run: one pinned Dask graph for all epochs, measured against its plan.

Tasks (all with a hard worker restriction, ``daskhpc.runtime.submit_pinned``); P is
the worker's parts (one label like ``"0+1"`` when it holds several):

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
``final`` (p)              W_p, the H rows p holds the newest copy of, the loss partial
                           sums and step times (after the run)

The client submits the graph once and gathers only the evaluation floats and, after the
last epoch, the factors.

Examples
--------
>>> from daskhpc.ssgd._setup import prepare                     # doctest: +SKIP
>>> out = run_distributed(client, prepare(ratings, 4, strategy="hc"))  # doctest: +SKIP
>>> out["measured"]["inter_worker_bytes"]                       # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import sys
import time
import uuid

import numpy as np

from daskhpc.runtime import Placement, TransferLedger, submit_pinned, worker_addresses

from . import _tasks
from ._kernel import learning_rate
from ._partdata import all_part_data
from ._serial import initial_factors
from ._setup import Setup

__all__ = ["run_distributed", "build_graph", "ring_placement", "STEP"]

STEP = "ssgd-step"


def build_graph(s: Setup, where_part, data, token: str, ckpt_paths=None):
    """The run's tasks, their workers, and the keys the client follows.

    Parameters
    ----------
    s : Setup
    where_part : callable
        Part -> worker address.
    data : list
        Each part's scattered :class:`~daskhpc.ssgd._tasks.PartData` (a Future).
    token : str
        Makes the keys of this run unique (and names its worker-side states).
    ckpt_paths : dict, optional
        ``{(p, e): path}``: part p writes its checkpoint of epoch e there.

    Returns
    -------
    tasks, workers : dict
    follow : dict
        ``eval[(p, e)]``, ``ckpt[(p, e)]`` and ``final[p]`` keys.
    """
    K, E = s.K, s.E
    rp = s.runplan
    tasks, where = {}, {}
    name = {x: f"ssgd-{x}-{token}" for x in ("init", "evsend", "eval", "ckpt", "final")}
    step_name = f"{STEP}-{token}"
    team: dict[str, list[int]] = {}                 # worker -> its parts, ascending
    for p in range(K):
        team.setdefault(where_part(p), []).append(p)

    def label(xs):
        return xs[0] if len(xs) == 1 else "+".join(map(str, xs))

    def group_key(w, T, i=0):
        """Task i of the group that runs sub-epoch T of every part on worker w."""
        if T < 0:
            return (name["init"], label(team[w]))
        e, k = divmod(T, K)
        return (step_name, label(team[w]), e, k,
                label([int(s.strata.block(p, k, e)) for p in team[w]]), i)

    # The messages each worker sends after each sub-epoch, bundled per receiving worker:
    # bundles[(w, ts)][w_dst] = [(q, m, src), ...], one task (and one transfer) each.
    # A message between parts on the same worker is no task and no dependency: the
    # receiver's group comes after the sender's in the worker's chain and reads the
    # rows from the sender's state (nothing moves, nothing to schedule).
    # consumers[(dst, T)] = [(bundle key or None, (dst, q, m, e, src or -1, ts, slot))].
    bundles: dict[tuple, dict] = {}
    consumers: dict[tuple, list] = {}
    inst = rp.instances
    for q, m, e, ts in zip(inst.pattern.tolist(), inst.message.tolist(),
                           inst.epoch.tolist(), inst.send.tolist()):
        pat = rp.patterns[q]
        src, dst = int(pat.src[m]), int(pat.dst[m])
        ws, wd = where_part(src), where_part(dst)
        if ws == wd:
            key, ids = None, (dst, q, m, e, src, ts, 0)
        else:
            group = bundles.setdefault((ws, ts), {})
            if wd not in group:
                group[wd] = (group_key(ws, ts, len(group)), [])
            key, items = group[wd]
            ids = (dst, q, m, e, -1, ts, len(items))
            items.append((q, m, src))
        lo, hi = pat.seg_ptr[m], pat.seg_ptr[m + 1]
        for T in sorted(set((e * K + pat.seg_ty[lo:hi]).tolist())):
            if T < E * K:
                consumers.setdefault((dst, T), []).append((key, ids))

    for w, parts in team.items():
        mine = [data[p] for p in parts]
        tasks[group_key(w, -1)] = (_tasks.init, mine, token)
        where[group_key(w, -1)] = w
        for T in range(E * K):
            inbox = [c for p in parts for c in consumers.get((p, T), [])]
            meta = np.array([ids for _, ids in inbox], np.int64).reshape(-1, 7)
            deps = [c for c, _ in inbox if c is not None]
            group = list(bundles.get((w, T), {}).values()) or [(group_key(w, T), [])]
            for key, items in group:
                # the step runs in the worker's event loop (see _tasks.work_in_loop)
                tasks[key] = (_tasks.work_in_loop, mine, token, T,
                              np.array(items, np.int64).reshape(-1, 3), meta,
                              group_key(w, T - 1), *deps)
                where[key] = w
        for p in parts:
            key = (name["final"], p)
            tasks[key] = (_tasks.final, data[p], token, group_key(w, E * K - 1))
            where[key] = w

    def first(p, T):
        return group_key(where_part(p), T)

    evals = {}
    for e in rp.eval_epochs.tolist():
        q = 0 if s.strata.fixed else e
        ev = rp.eval_pattern(e)
        inbox: dict[int, list] = {}
        end = (e + 1) * K - 1
        for m in range(ev["src"].size):
            src, dst = int(ev["src"][m]), int(ev["dst"][m])
            key = (name["evsend"], q, m, e)
            tasks[key] = (_tasks.eval_send, data[src], token, e, q, m, first(src, end))
            where[key] = where_part(src)
            inbox.setdefault(dst, []).append((m, key))
        for p in range(K):
            got = inbox.get(p, [])
            key = (name["eval"], p, e)
            tasks[key] = (_tasks.evaluate, data[p], token, e, q,
                          np.array([m for m, _ in got], np.int64), first(p, end),
                          *[k for _, k in got])
            where[key] = where_part(p)
            evals[(p, e)] = key
    ckpts = {}
    for (p, e), path in (ckpt_paths or {}).items():
        # after the part's last sub-epoch of e; nothing waits for it (off the critical
        # path), and it reads H versions that stay for two more visits of each block
        key = (name["ckpt"], p, e)
        tasks[key] = (_tasks.checkpoint, data[p], token, e, path, first(p, (e + 1) * K - 1),
                      *([evals[(p, e)]] if (p, e) in evals else []))
        where[key] = where_part(p)
        ckpts[(p, e)] = key
    follow = {"eval": evals, "ckpt": ckpts,
              "final": {p: (name["final"], p) for p in range(K)}}
    return tasks, where, follow


def run_distributed(client, s: Setup, *, progress: bool = False, placement=None,
                    order_plugin: bool = True, low_latency: bool = True, checkpoint=None,
                    max_restarts: int = 3) -> dict:
    """Run the prepared SSGD on ``client``; see the module docstring.

    Parameters
    ----------
    client : distributed.Client
    s : Setup
    progress : bool
        Draw a progress bar on standard error (one tick per finished epoch).
    placement : daskhpc.runtime.Placement, optional
        Part -> worker; default :func:`ring_placement`.
    order_plugin : bool
        Register the stratum-order scheduler plugin (``_plugin``) and return its timeline.
    low_latency : bool
        Unbatch the scheduler <-> worker control messages during the run
        (:func:`daskhpc.runtime.low_latency`).
    checkpoint : SSGDCheckpoint, optional
        Write a checkpoint after every epoch and start from its newest complete epoch
        (``--resume``); a lost worker then costs the epochs since that one.
    max_restarts : int
        Lost-worker recoveries before the run gives up.

    Returns
    -------
    dict
        ``W``, ``H``, ``history`` (per epoch of the run: lr, train_loss, test_rmse,
        time_s), ``measured`` (transfer ledger report of the last attempt), ``ledger``,
        ``timeline``, ``run_s``, ``placement``, ``setup`` (of the last attempt: its epochs
        are the ones the ledger measured), ``recoveries``, ``resumed_from``.

    Notes
    -----
    A worker lost mid-run is noticed from the scheduler's events (``WorkerWatch``);
    the attempt is cancelled, its parts are re-placed (``replace_lost``: the nanny's
    new worker first) and the run starts again from the newest complete checkpoint, or
    from the start without one. The remaining epochs use the same strata, learning
    rates and update orders, so W and H are those of an undisturbed run bit for bit.
    """
    from daskhpc.runtime import WorkerLost, replace_lost

    placement = placement or ring_placement(s.K, worker_addresses(client))
    if order_plugin:
        from ._plugin import register

        register(client)
    client.run(_tasks.warm_up)
    run, before, resumed_from = s, [], None
    if checkpoint is not None:
        checkpoint.catch_up(s)         # a job that died may have written more than it marked
    if checkpoint is not None and checkpoint.latest() is not None:
        run, before = checkpoint.restore(s)
        resumed_from = run.epoch0
    recoveries: list[dict] = []
    if run.E == 0:          # the checkpoint is already at the last epoch: nothing to run
        W, H = run.start
        return {"W": W.copy(), "H": H.copy(), "history": before, "measured": {},
                "ledger": None, "timeline": None, "run_s": 0.0, "token": None,
                "placement": placement.as_dict(), "setup": run, "recoveries": recoveries,
                "resumed_from": resumed_from}
    t0 = time.perf_counter()
    while True:
        try:
            out = _attempt(client, run, placement, progress, order_plugin, low_latency,
                           checkpoint)
            break
        except WorkerLost as lost:
            t_lost = time.perf_counter()
            if len(recoveries) >= max_restarts:
                raise RuntimeError(f"ssgd: {lost}; gave up after {max_restarts} "
                                   "recoveries") from lost
            placement = replace_lost(client, placement, lost.lost)
            if checkpoint is not None:
                checkpoint.catch_up(s)     # epochs whose files were all written in time
            if checkpoint is not None and checkpoint.latest() is not None:
                run, before = checkpoint.restore(s)
            else:
                run, before = s, []
            recoveries.append({"lost": sorted(lost.lost), "restart_epoch": run.epoch0,
                               "after_s": round(t_lost - t0, 3),
                               "replace_s": round(time.perf_counter() - t_lost, 3),
                               "placement": {str(p): w for p, w in
                                             placement.as_dict().items()}})
    out["history"] = before + out["history"]
    out.update(setup=run, recoveries=recoveries, resumed_from=resumed_from,
               run_s=time.perf_counter() - t0)
    return out


def _attempt(client, s: Setup, placement, progress: bool, order_plugin: bool,
             low_latency: bool, checkpoint) -> dict:
    """One try at the (rest of the) run on ``placement``; raises ``WorkerLost``."""
    from daskhpc.runtime import WorkerWatch, gather_watching, release_futures

    K, E = s.K, s.E
    token = uuid.uuid4().hex[:10]
    ck_epochs = range(E) if checkpoint is not None else ()
    datas = all_part_data(s, [placement.worker(p) for p in range(K)], ck_epochs)
    topic = f"ssgd-progress-{token}" if progress else None
    for d in datas:
        d.progress = topic
    futures = [client.scatter(d, workers=[placement.worker(p)], hash=False)
               for p, d in enumerate(datas)]
    paths = {(p, e): checkpoint.part_file(s.epoch0 + e, p)
             for p in range(K) for e in ck_epochs}
    # Futures (not their keys) in the tasks: the graph then knows they are data.
    tasks, where, follow = build_graph(s, placement.worker, futures, token, paths)
    wanted = [*follow["eval"].values(), *follow["ckpt"].values(), *follow["final"].values()]
    _publish(client, s, placement, f"ssgd {s.options.strategy} K={K} ({token})", None)
    bar = _Bar(E, K) if progress else None
    if bar:
        client.subscribe_topic(topic, bar)
    owners = {placement.worker(p) for p in range(K)}
    futs = []
    t0 = time.perf_counter()
    try:
        with _maybe_low_latency(client, low_latency), TransferLedger(client) as ledger, \
                WorkerWatch(client, owners) as watch:
            futs = submit_pinned(client, tasks, where, wanted)
            # an epoch is complete when all its part files exist (written atomically)
            saver = (lambda: checkpoint.catch_up(s)) if checkpoint is not None else None
            values = dict(zip(wanted, gather_watching(client, futs, watch, on_poll=saver)))
            if saver:
                saver()
        run_s = time.perf_counter() - t0
    finally:
        if bar:
            client.unsubscribe_topic(topic)
            bar.close()
        # after a loss: drop our interest, and the scheduler forgets what still waits or
        # runs elsewhere (release_futures says why not client.cancel)
        release_futures(futs)
        client.run(_tasks.cleanup, token)
    timeline = None
    if order_plugin:
        from ._plugin import fetch_timeline

        timeline = fetch_timeline(client, f"{STEP}-{token}")
        _publish(client, s, placement, None, timeline)
    finals = {p: values[k] for p, k in follow["final"].items()}
    evals = {pe: values[k] for pe, k in follow["eval"].items()}
    W, H = _assemble(s, finals)
    del futures, futs
    return {"W": W, "H": H, "history": _history(s, finals, evals),
            "measured": ledger.report(), "ledger": ledger, "timeline": timeline,
            "run_s": run_s, "placement": placement.as_dict(), "token": token}


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


def _maybe_low_latency(client, on: bool):
    if on:
        from daskhpc.runtime import low_latency

        return low_latency(client)
    return contextlib.nullcontext()


def _publish(client, s: Setup, placement, name, timeline) -> None:
    """Feed the daskhpc dashboard pages (a run and its plan; later its strata rows).
    Never fails the run: ``publish`` logs and returns False when it cannot."""
    try:
        from daskhpc.dashboard import plan_matrix, publish
    except ImportError:                                   # pragma: no cover
        return
    workers = list(placement.workers)
    if timeline is not None:
        publish(client, "strata", rows=[{k: v for k, v in r.items() if k != "T"}
                                        for r in timeline])
        return
    owner = [workers.index(placement.worker(p)) for p in range(s.K)]
    publish(client, "run", name=name, workflow="ssgd", workers=workers)
    publish(client, "plan", matrix=plan_matrix(s.runplan.epoch_plan(), owner, len(workers)),
            workers=workers, unit="bytes per epoch")


class _Bar:
    """Text progress bar fed by the parts' end-of-epoch events."""

    def __init__(self, epochs: int, parts: int):
        self.epochs, self.parts = epochs, parts
        self.seen: dict[int, int] = {}
        self.done = -1

    def __call__(self, event) -> None:
        _, msg = event
        e = int(msg["epoch"])
        self.seen[e] = self.seen.get(e, 0) + 1
        done = sum(1 for c in self.seen.values() if c == self.parts)
        if done == self.done:
            return
        self.done = done
        fill = int(30 * done / self.epochs)
        sys.stderr.write(f"\rssgd [{'#' * fill}{'.' * (30 - fill)}] epoch {done}/{self.epochs}")
        sys.stderr.flush()

    def close(self) -> None:
        sys.stderr.write("\n")


def _history(s: Setup, finals: dict, evals: dict) -> list[dict]:
    """Per epoch: training loss (summed per part, then over parts, as the serial run
    does), test RMSE where evaluated, and the epoch's wall time from the step log."""
    K, E = s.K, s.E
    hist = []
    prev_end = None
    for e in range(E):
        loss = 0.0
        for p in range(K):
            loss += finals[p]["loss"][e]
        spans = [(t0, t1) for p in range(K) for (ee, _, _, t0, t1) in finals[p]["log"] if ee == e]
        end = max(t1 for _, t1 in spans)
        begin = min(t0 for t0, _ in spans) if prev_end is None else prev_end
        row = {"epoch": s.epoch0 + e, "lr": learning_rate(s.options.lr, s.epoch0 + e),
               "train_loss": loss,
               "time_s": end - begin}
        if (0, e) in evals:
            sse = 0.0
            for p in range(K):
                sse += float(evals[(p, e)])
            row["test_rmse"] = float(np.sqrt(sse / s.test.nnz))
        hist.append(row)
        prev_end = end
    return hist


def _assemble(s: Setup, finals: dict) -> tuple[np.ndarray, np.ndarray]:
    """Full W and H from the parts' final pieces (rows nobody updated stay initial)."""
    W, H = initial_factors(s)
    for p, f in finals.items():
        W[s.layout.row_parts == p] = f["W"]
        H[f["cols"]] = f["rows"]
    return W, H
