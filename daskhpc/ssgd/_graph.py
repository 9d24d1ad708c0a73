"""The pinned graph of all epochs of an SSGD attempt (see ``_job`` for the task table)."""

from __future__ import annotations

import pickle

import numpy as np

from . import _tasks
from ._setup import Setup

STEP = "ssgd-step"


class WindowGraph:
    """The graph of an attempt, built one window of epochs at a time.

    No task of a window depends on another window's (that would keep every task of the run
    in the scheduler): part states carry over on the workers, and a bundle read after its
    window is fetched by a ``stash`` task on its receiver (:class:`~daskhpc.ssgd._tasks.Stashed`).
    """

    def __init__(self, s: Setup, where_part, data, token: str, ckpt_paths=None,
                 direct: bool = False, per_task: int = 0):
        self.s, self.where_part, self.data, self.token = s, where_part, data, token
        self.ckpt_paths = ckpt_paths or {}
        self.direct = direct
        self.per_task = per_task         # direct mode: epochs per task (0: the window)
        self.name = {x: f"ssgd-{x}-{token}" for x in ("init", "evsend", "eval", "ckpt", "final")}
        self.step_name = f"{STEP}-{token}"
        self.team: dict[str, list[int]] = {}           # worker -> its parts, ascending
        for p in range(s.K):
            self.team.setdefault(where_part(p), []).append(p)
        inst = s.runplan.instances
        # instances by epoch (stable: within a send time, the order of the full list,
        # so that every window numbers a bundle's tasks alike)
        order = np.argsort(inst.epoch, kind="stable")
        self._inst = [a[order] for a in (inst.pattern, inst.message, inst.epoch, inst.send)]
        K = s.K
        reach = max([int(max(p.ts.max(initial=0), p.seg_ty.max(initial=0)))
                     for p in s.runplan.patterns] + [0]) + 1
        # an instance of epoch e is sent and read before (e + spans) K; a bundle mixes
        # instances of the same send time, so a window needs 2 spans of epochs before it
        self._back = 2 * -(-reach // K)
        self._evaluated = set(s.runplan.eval_epochs.tolist())

    def label(self, xs):
        return xs[0] if len(xs) == 1 else "+".join(map(str, xs))

    def group_key(self, w, T, i=0):
        """Task i of the group that runs sub-epoch T of every part on worker w."""
        if T < 0:
            return (self.name["init"], self.label(self.team[w]))
        e, k = divmod(T, self.s.K)
        return (self.step_name, self.label(self.team[w]), e, k,
                self.label([int(self.s.strata.block(p, k, e)) for p in self.team[w]]), i)

    def epoch_key(self, w, e):
        """The direct mode's task of worker w whose last epoch is e (-1: the init task)."""
        return _tasks.epoch_key(self.token, self.label(self.team[w]), e) if e >= 0 else \
            self.group_key(w, -1)

    def first(self, p, T):
        """Graph mode: the first task of the group that runs sub-epoch T of part p."""
        return self.group_key(self.where_part(p), T)

    def _messages(self, e0: int, e1: int):
        """``(bundles, consumers, last)`` of the instances that matter to epochs e0 .. e1 - 1:
        ``bundles[(w, ts)][w_dst] = (key, [(q, m, src)])``, ``consumers[(dst, T)]`` the inputs
        of each step, ``last[key]`` a bundle's last reader."""
        s, K, E = self.s, self.s.K, self.s.E
        rp = s.runplan
        q_, m_, e_, ts_ = self._inst
        lo, hi = np.searchsorted(e_, [e0 - self._back, e1])
        bundles: dict[tuple, dict] = {}
        consumers: dict[tuple, list] = {}
        last: dict = {}
        wp = self.where_part
        for q, m, e, ts in zip(q_[lo:hi].tolist(), m_[lo:hi].tolist(), e_[lo:hi].tolist(),
                               ts_[lo:hi].tolist()):
            pat = rp.patterns[q]
            src, dst = int(pat.src[m]), int(pat.dst[m])
            ws, wd = wp(src), wp(dst)
            if ws == wd:
                key, ids = None, (dst, q, m, e, src, ts, 0)
            else:
                group = bundles.setdefault((ws, ts), {})
                if wd not in group:
                    group[wd] = (self.group_key(ws, ts, len(group)), [])
                key, items = group[wd]
                ids = (dst, q, m, e, -1, ts, len(items))
                items.append((q, m, src))
            a, b = pat.seg_ptr[m], pat.seg_ptr[m + 1]
            for T in sorted(set((e * K + pat.seg_ty[a:b]).tolist())):
                if T < E * K:
                    consumers.setdefault((dst, T), []).append((key, ids))
                    if key is not None:
                        last[key] = max(last.get(key, -1), T)
        return bundles, consumers, last

    def window(self, e0: int, e1: int):
        """``(tasks, workers, follow)`` of epochs ``e0 .. e1 - 1``; ``follow`` holds the ``eval``,
        ``ckpt`` and ``final`` keys and ``done``, the other keys to wait for."""
        s, K, E = self.s, self.s.K, self.s.E
        rp, data, token, name = s.runplan, self.data, self.token, self.name
        T0, T1 = e0 * K, e1 * K
        direct = self.direct

        def mine(e):
            """Is a task of epoch ``e`` (-1: the init task) in this window?"""
            return e0 <= e < e1 or (e < 0 and e0 == 0)

        tasks, where = {}, {}

        def put(key, w, *task):
            tasks[key], where[key] = task, w

        bundles, consumers, last = self._messages(e0, e1)
        done = []
        for w, parts in self.team.items():
            team = [data[p] for p in parts]
            if direct:        # the tasks also create the states and return the finals
                self._direct_epochs(tasks, where, w, parts, team, e0, e1, consumers, bundles,
                                    last)
                if e1 < E:
                    done.append(self.epoch_key(w, e1 - 1))
                continue
            if e0 == 0:
                put(self.group_key(w, -1), w, _tasks.init, team, token)
            for T in range(T0, T1):
                inbox = [c for p in parts for c in consumers.get((p, T), [])]
                meta = np.array([ids for _, ids in inbox], np.int64).reshape(-1, 7)
                deps = [c if mine(ids[5] // K) else _tasks.Stashed(str(c))
                        for c, ids in inbox if c is not None]
                group = list(bundles.get((w, T), {}).values()) or [(self.group_key(w, T), [])]
                prev = T - 1 if T else -1
                chain = self.group_key(w, prev) if mine(prev // K if T else -1) else None
                for key, items in group:
                    # the step runs in the worker's event loop (see _tasks.work_in_loop)
                    put(key, w, _tasks.work_in_loop, team, token, T,
                        np.array(items, np.int64).reshape(-1, 3), meta, chain, *deps)
            done.append(self.group_key(w, T1 - 1))
            if e1 == E:
                for p in parts:
                    put((name["final"], p), w, _tasks.final, data[p], token,
                        self.group_key(w, E * K - 1))
        if not direct and e1 < E:
            # bundles sent in this window and read after it: to their receivers' registries
            for (ws, ts), group in bundles.items():
                for wd, (key, _) in group.items():
                    if T0 <= ts < T1 and last.get(key, -1) >= T1:
                        stash = (f"ssgd-stash-{token}", self.label(self.team[wd]), *key[1:])
                        put(stash, wd, _tasks.stash, token, str(key), last[key], key)
                        done.append(stash)

        evals = {}
        for e in [e for e in rp.eval_epochs.tolist() if e0 <= e < e1 and not direct]:
            q = 0 if s.strata.fixed else e
            ev = rp.eval_pattern(e)
            inbox: dict[int, list] = {}
            end = (e + 1) * K - 1
            for m in range(ev["src"].size):
                src, dst = int(ev["src"][m]), int(ev["dst"][m])
                key = (name["evsend"], q, m, e)
                put(key, self.where_part(src), _tasks.eval_send, data[src], token, e, q, m,
                    self.first(src, end))
                inbox.setdefault(dst, []).append((m, key))
            for p in range(K):
                got = inbox.get(p, [])
                key = (name["eval"], p, e)
                put(key, self.where_part(p), _tasks.evaluate, data[p], token, e, q,
                    np.array([m for m, _ in got], np.int64), self.first(p, end),
                    *[k for _, k in got])
                evals[(p, e)] = key
        ckpts = {}
        for (p, e), path in self.ckpt_paths.items():
            if direct or not e0 <= e < e1:     # direct: the epoch task writes it
                continue
            # after the part's last sub-epoch of e; nothing waits for it (off the critical
            # path), and it reads H versions that stay for two more visits of each block
            key = (name["ckpt"], p, e)
            put(key, self.where_part(p), _tasks.checkpoint, data[p], token, e, path,
                self.first(p, (e + 1) * K - 1), *([evals[(p, e)]] if (p, e) in evals else []))
            ckpts[(p, e)] = key
        final = {p: self.epoch_key(self.where_part(p), E - 1) if direct else
                 (name["final"], p) for p in range(K)}
        follow = {"eval": evals, "ckpt": ckpts, "done": done,
                  "final": final if e1 == E else {}}
        return tasks, where, follow

    def _direct_epochs(self, tasks, where, w, parts, team, e0, e1, consumers, bundles, last):
        """Worker w's direct-mode tasks for epochs e0 .. e1 - 1, ``per_task`` epochs each."""
        K = self.s.K
        epochs = []
        for e in range(e0, e1):
            steps = []
            for T in range(e * K, (e + 1) * K):
                inbox = [c for p in parts for c in consumers.get((p, T), [])]
                meta = np.array([ids for _, ids in inbox], np.int64).reshape(-1, 7)
                waits = [c for c, _ in inbox if c is not None]
                out = [(wd, key, np.array(items, np.int64).reshape(-1, 3))
                       for wd, (key, items) in bundles.get((w, T), {}).items()]
                drop = sorted({c for c in waits if last[c] == T}, key=str)
                steps.append((T, meta, waits, drop, out))
            ckpts = {p: self.ckpt_paths[(p, e)] for p in parts if (p, e) in self.ckpt_paths}
            epochs.append((e, steps, self._eval_spec(w, parts, e), ckpts))
        n = self.per_task or len(epochs)
        prev = None
        for i in range(0, len(epochs), n):
            chunk = epochs[i:i + n]
            key = self.epoch_key(w, chunk[-1][0])
            # the specs as one pickle: the scheduler walks nested lists and tuples for keys
            tasks[key] = (_tasks.epochs_direct, team, self.token, self.label(parts),
                          pickle.dumps(chunk, protocol=5), prev, chunk[0][0] == 0,
                          chunk[-1][0] == self.s.E - 1)
            where[key] = w
            prev = key

    def _eval_spec(self, w, parts, e):
        """Direct mode: epoch e's test error on worker w, ``(q, sends, needs)`` (None if not
        evaluated); ``sends = [(receiver or None, key, [(mail id, m, src)])]``,
        ``needs = {part: [(m, mail id)]}``."""
        if e not in self._evaluated:
            return None
        s = self.s
        q = 0 if s.strata.fixed else e
        ev = s.runplan.eval_pattern(e)
        sends: dict = {}
        needs: dict = {p: [] for p in parts}
        for m in range(ev["src"].size):
            src, dst = int(ev["src"][m]), int(ev["dst"][m])
            ws, wd = self.where_part(src), self.where_part(dst)
            mid = (self.name["evsend"], q, m, e)
            if ws == w:
                to = None if wd == w else wd
                key = None if to is None else (self.name["evsend"], q, self.label(parts), e,
                                               self.label(self.team[wd]))
                sends.setdefault(to, (to, key, []))[2].append((mid, m, src))
            if wd == w:
                needs[dst].append((m, mid))
        return q, list(sends.values()), needs
