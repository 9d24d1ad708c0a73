"""The pinned graph of all epochs of an SSGD attempt (see ``_driver`` for the task table).

Examples
--------
>>> tasks, where, follow = build_graph(setup, placement.worker, part_futures, "ab12")  # doctest: +SKIP
>>> sorted(follow)                                                                   # doctest: +SKIP
['ckpt', 'eval', 'final']
"""

from __future__ import annotations

import numpy as np

from . import _tasks
from ._setup import Setup

__all__ = ["build_graph", "STEP"]

STEP = "ssgd-step"


def build_graph(s: Setup, where_part, data, token: str, ckpt_paths=None,
                direct: bool = False):
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
    direct : bool
        The direct exchange mode (``daskhpc.runtime._exchange``): one task per worker and
        epoch runs its K sub-epochs in a loop (:func:`~daskhpc.ssgd._tasks.epoch_direct`)
        and pushes every bundle to its receiving worker, instead of a task group per
        sub-epoch whose bundles the receivers fetch. The same sweeps, the same numbers.

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

    def epoch_key(w, e):
        return (f"ssgd-epoch-{token}", label(team[w]), e) if e >= 0 else group_key(w, -1)

    for w, parts in team.items():
        mine = [data[p] for p in parts]
        tasks[group_key(w, -1)] = (_tasks.init, mine, token)
        where[group_key(w, -1)] = w
        if direct:
            _direct_epochs(tasks, where, w, parts, mine, token, K, E, consumers, bundles,
                           epoch_key)
            key = epoch_key(w, E - 1)
            for p in parts:
                tasks[(name["final"], p)] = (_tasks.final, data[p], token, key)
                where[(name["final"], p)] = w
            continue
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
        w = where_part(p)
        return epoch_key(w, T // K) if direct else group_key(w, T)

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
    if direct:
        # a worker's next epoch waits for the test-error sends it hosts, and for the test
        # error and checkpoint of its parts' last epoch: they read H as the epoch left it
        # (a whole epoch of sweeps later the versions they need would be gone; the graph
        # mode's per-sub-epoch tasks interleave with them instead), and a send left
        # behind a running epoch task would never run: that task holds the worker's
        # thread while it waits for pushes from a worker that waits for this send
        after = [*evals.items(), *ckpts.items()]
        after += [((int(rp.eval_pattern(k[3])["src"][k[2]]), k[3]), k) for k in tasks
                  if isinstance(k, tuple) and k[0] == name["evsend"]]
        for (p, e), key in after:
            nxt = epoch_key(where_part(p), e + 1)
            if nxt in tasks:
                tasks[nxt] = (*tasks[nxt], key)
    follow = {"eval": evals, "ckpt": ckpts,
              "final": {p: (name["final"], p) for p in range(K)}}
    return tasks, where, follow


def _direct_epochs(tasks, where, w, parts, mine, token, K, E, consumers, bundles, epoch_key):
    """One task per epoch on worker w: per sub-epoch, what it waits for (the bundle keys
    of its inputs from other workers, in ``meta`` order), what it may then drop (bundles
    read for the last time), and the bundles it pushes ``(receiver, key, items)``."""
    uses: dict = {}
    per_T = []
    for T in range(E * K):
        inbox = [c for p in parts for c in consumers.get((p, T), [])]
        meta = np.array([ids for _, ids in inbox], np.int64).reshape(-1, 7)
        waits = [c for c, _ in inbox if c is not None]
        for c in waits:
            uses[c] = T
        out = [(wd, key, np.array(items, np.int64).reshape(-1, 3))
               for wd, (key, items) in bundles.get((w, T), {}).items()]
        per_T.append((T, meta, waits, out))
    for e in range(E):
        steps = []
        for T, meta, waits, out in per_T[e * K:(e + 1) * K]:
            drop = sorted({c for c in waits if uses[c] == T}, key=str)
            steps.append((T, meta, waits, drop, out))
        tasks[epoch_key(w, e)] = (_tasks.epoch_direct, mine, token, steps, epoch_key(w, e - 1))
        where[epoch_key(w, e)] = w
