"""Run a :class:`~daskhpc.comm.Program` on a Dask cluster: its steps as pinned task groups.

Graph exchange: per worker ``w`` (``"w0"``, ... in placement order) and step ``t`` a
group of tasks ``("<program>-<token>", w, t, receiver)`` reading the chain (``w``'s
group ``t - 1``) and the bundles ``(.., v, t - 1, w)`` of the workers ``v`` sending to
``w``: one transfer per communicating worker pair and step. Direct exchange: one task
per worker and window of steps (``steps_direct``; ``steps_single`` on one worker).
"""

from __future__ import annotations

import bisect

from daskhpc._workflows import exchange_mode
from daskhpc.runtime._fault import register_once, scatter_to
from daskhpc.runtime._graph import submit_pinned
from daskhpc.runtime._steps import (CodeRef, InlineCode, Packed, ProgramCode, final_group,
                                    init_group, step_group, step_group_in_loop, steps_direct,
                                    steps_single, unpack)

#: The steps' code goes in the attempt's graph (a task per worker) while its copies take
#: at most this many bytes, else it is scattered (distributed warns at a 10 MB graph).
GRAPH_CODE_BYTES = 4 << 20


def units_per_task() -> int:
    """``daskhpc.runtime.units-per-task``: units per direct-mode task (0: a whole window). A
    task costs a scheduler round trip (4-7 ms on 2 busy cores): more than a short unit."""
    from daskhpc import _config

    n = _config.get("runtime.units-per-task", 0)
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        from daskhpc.errors import InputError

        raise InputError(f"daskhpc.runtime.units-per-task must be an integer >= 0, not {n!r}")
    return n


def step_of_key(key) -> int | None:
    """The program step a task key belongs to (None for other keys)."""
    if isinstance(key, (tuple, list)) and len(key) == 4 and isinstance(key[2], int):
        return int(key[2])
    return None


class ProgramRunner:
    """One attempt of a program on ``placement``, as pinned tasks.

    Parameters
    ----------
    client : distributed.Client
    program : daskhpc.comm.Program
    placement : Placement
    statics, starts : dict
        ``{part: Future}`` of every part's static data, on its worker; ``{part: start}``
        for ``init`` (a checkpoint's arrays; None: a fresh start).
    token, topic : str
        Unique per attempt (keys, worker-side registry); event topic of the unit reports.
    checkpoint : str, optional
        Directory where parts write their state after each reported step.
    in_loop : bool
        Run the steps in the workers' event loops (short steps) instead of their threads.
    exchange : {"direct", "graph"}, optional
        As :class:`Job`; direct with every part on one worker: one task per window
        (:attr:`single`), no exchange at all.

    Examples
    --------
    >>> runner = ProgramRunner(client, program, placement, statics, token="ab12")  # doctest: +SKIP
    >>> futs = runner.submit(range(program.nsteps))                    # doctest: +SKIP
    >>> finals = runner.finals(client.gather(runner.finish()))         # doctest: +SKIP
    """

    def __init__(self, client, program, placement, statics: dict, *, starts=None,
                 token: str, topic: str | None = None, checkpoint: str | None = None,
                 in_loop: bool = False, exchange: str | None = None):
        self.direct = exchange_mode(exchange) == "direct"
        self.client, self.program, self.token = client, program, token
        self.name = f"{program.name}-{token}"
        workers = [w for w in placement.workers if placement.parts_of(w)]
        self.label = {w: f"w{i}" for i, w in enumerate(workers)}
        self.address = {lab: w for w, lab in self.label.items()}
        self.parts = {self.label[w]: tuple(placement.parts_of(w)) for w in workers}
        where = {p: self.label[placement.worker(p)] for p in range(program.nparts)}
        self.where = where
        #: every part on one worker, direct exchange: a window's steps in one task
        self.single = self.direct and len(self.parts) == 1
        #: direct exchange: units per task (0: the whole window)
        self.units_per_task = units_per_task()
        code = Packed(ProgramCode(program, where, topic, checkpoint, address=self.address,
                                  in_loop=in_loop))
        if self.direct and not self.single:
            from daskhpc.runtime._exchange import NAME, Exchange, transport

            transport()          # a bad setting fails here in one line, not in each worker
            register_once(client, Exchange(), NAME)
        # one copy per worker: small code in the graph (a scatter costs a round trip),
        # larger code scattered (distributed warns at a 10 MB graph), not broadcast (its
        # "replicate" event breaks WorkerWatch's stream)
        keys = {lab: f"daskhpc-code-{token}-{lab}" for lab in self.address}
        self._code_tasks: dict = {}          # key -> (task, worker) until first submitted
        if self.direct and len(code.blob) * len(keys) <= GRAPH_CODE_BYTES:
            self.code = {lab: InlineCode(code, (token, lab)) for lab in self.address}
        elif len(code.blob) * len(keys) <= GRAPH_CODE_BYTES:
            self.code = dict(keys)
            self._code_tasks = {keys[lab]: ((unpack, code.blob), w)
                                for w, lab in self.label.items()}
        else:
            self.code = {lab: scatter_to(client, {keys[lab]: code}, w)[keys[lab]]
                         for w, lab in self.label.items()}
        self.step_fn = step_group_in_loop if in_loop else step_group
        self._frontier: dict[tuple, object] = {}   # keys of the last step -> Future
        self._finals: list | None = None           # the last steps' tasks give the finals
        self._last = -1
        starts = starts or {}
        init = {lab: ([statics[p] for p in parts],
                      [starts.get(p) for p in parts] if starts else None)
                for lab, parts in self.parts.items()}
        # direct: the first window's task creates the parts (a round trip fewer)
        self._init: dict | None = init if self.direct else None
        if not self.direct:
            self._start(init)

    def _group(self, lab: str, t: int) -> list[tuple]:
        """Keys of worker ``lab``'s group at step t (the chain first)."""
        if t < 0:
            return [(f"{self.program.name}-init-{self.token}", lab)]
        if self.direct:
            return [(self.name, lab, t, "")]
        recv = sorted({self.where[d] for p in self.parts[lab]
                       for d in self.program.dests(t).get(p, [])} - {lab})
        return [(self.name, lab, t, r) for r in recv] or [(self.name, lab, t, "")]

    def _incoming(self, lab: str, t: int) -> list[tuple]:
        """Bundles other workers send to ``lab`` at step t."""
        if t < 0 or self.direct:
            return []
        senders = {self.where[s] for s, dsts in self.program.dests(t).items()
                   for d in dsts if self.where[d] == lab} - {lab}
        return [(self.name, v, t, lab) for v in sorted(senders)]

    def _start(self, init: dict) -> None:
        """Init tasks (one per worker) from ``{label: (statics, starts)}``."""
        tasks, where = {}, {}
        for lab, parts in self.parts.items():
            [key] = self._group(lab, -1)
            tasks[key] = (init_group, self.code[lab], self.token, lab, parts, *init[lab])
            where[key] = self.address[lab]
        futs = self._submit(tasks, where, list(tasks))
        self._frontier = dict(zip(tasks, futs))

    def submit(self, steps: range, final: bool = False) -> list:
        """Submit ``steps`` (continuing the last submitted); the futures of the new
        frontier. ``final``: the attempt's last steps (direct: its last task gives the final
        values)."""
        if steps.start != self._last + 1:
            raise ValueError(f"steps must continue at {self._last + 1}, not {steps.start}")
        if self.direct and not steps:
            raise ValueError("a direct-mode window has at least one step")
        tasks, where = {}, {}
        init, self._init = self._init, None

        def ref(key):
            return self._frontier.get(key, key)   # a Future from an earlier window

        def chain_of(lab, t):
            # the first window of a direct attempt creates the parts: no chain before it
            return None if init is not None else ref(self._group(lab, t - 1)[0])

        if self.direct:
            # one loop task per worker and segment of ``units_per_task`` units
            us = self.program.unit_steps          # the window's slice of it, not all of it
            mine = us[bisect.bisect_left(us, steps.start):bisect.bisect_left(us, steps.stop)]
            n = 0 if self.single else self.units_per_task
            ends = sorted(set(mine[n - 1::n] if n else []) | {steps[-1]})
            loop = steps_single if self.single else steps_direct
            lo = steps.start
            for hi in ends:
                for lab, parts in self.parts.items():
                    first = lo == steps.start
                    chain = chain_of(lab, lo) if first else ref(self._group(lab, lo - 1)[0])
                    [key] = self._group(lab, hi)
                    tasks[key] = (loop, self._code_of(lab), self.token, lab, lo, hi + 1,
                                  parts, chain,
                                  *(init[lab] if first and init else (None, None)),
                                  final and hi == ends[-1])
                    where[key] = self.address[lab]
                lo = hi + 1
            steps = range(steps.start, ends[-1] + 1)
        for t in ([] if self.direct else steps):
            for lab, parts in self.parts.items():
                chain = ref(self._group(lab, t - 1)[0])
                bundles = [ref(k) for k in self._incoming(lab, t - 1)]
                for key in self._group(lab, t):
                    tasks[key] = (self.step_fn, self.code[lab], self.token, lab, t, parts,
                                  key[3] or None, chain, *bundles)
                    where[key] = self.address[lab]
        last = steps.stop - 1
        keep = [k for lab in self.parts for k in self._group(lab, last)]
        futs = self._submit(tasks, where, keep)
        self._frontier = dict(zip(keep, futs))
        self._last = last
        if final and self.direct:
            self._finals = futs
        return futs

    def finish(self) -> list:
        """Submit the final tasks (one per worker) and return their futures, or those of the
        last steps when they give the final values."""
        if self._finals is not None:
            return self._finals
        if self._init is not None:            # nothing ran: the parts are made first
            init, self._init = self._init, None
            self._start(init)
        tasks, where = {}, {}
        for lab, parts in self.parts.items():
            key = (f"{self.program.name}-final-{self.token}", lab)
            chain = self._frontier.get(self._group(lab, self._last)[0])
            tasks[key] = (final_group, self._code_of(lab), self.token, lab, parts, chain)
            where[key] = self.address[lab]
        return self._submit(tasks, where, list(tasks))

    def _submit(self, tasks: dict, where: dict, keep: list) -> list:
        """``submit_pinned``, with the code's tasks in the first graph."""
        extra = list(self._code_tasks)
        for key, (task, worker) in self._code_tasks.items():
            tasks[key], where[key] = task, worker
        self._code_tasks = {}
        futs = submit_pinned(self.client, tasks, where, keep + extra)
        if extra:
            got = dict(zip(extra, futs[len(keep):]))
            self.code = {lab: got[key] for lab, key in self.code.items()}
        return futs[:len(keep)]

    def _code_of(self, lab: str):
        """The code argument of worker ``lab``'s next task: an InlineCode once, then a
        CodeRef."""
        code = self.code[lab]
        if isinstance(code, InlineCode):
            self.code[lab] = CodeRef(code.key)
        return code

    def code_futures(self) -> list:
        """Futures of the steps' code on the workers, if scattered or submitted."""
        return [c for c in self.code.values()
                if not isinstance(c, (str, InlineCode, CodeRef))]

    def frontier(self) -> list:
        """Futures the client must hold while the attempt runs (frontier and code)."""
        return list(self._frontier.values()) + self.code_futures()

    @staticmethod
    def finals(values: list[dict], nparts: int) -> list:
        """Per part, in part order, from the final tasks' ``{part: value}`` dicts."""
        out = [None] * nparts
        for d in values:
            for p, v in d.items():
                out[int(p)] = v
        return out
