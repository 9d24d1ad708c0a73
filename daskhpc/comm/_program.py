"""A bulk-synchronous program over K parts: the common shape of the point-to-point workflows."""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ._allreduce import AllreduceSchedule
from ._plan import Plan


#: A fused step's label names this many calls; a longer chain its first and last.
LABELLED_CALLS = 3


class PlanMismatch(RuntimeError):
    """A step sent to other parts than its plan says."""


@dataclass(frozen=True)
class Step:
    """One step: ``fn(ctx, *args) -> outbox``; ``sends``: the Plan of its messages."""

    fn: Callable
    args: tuple = ()
    sends: Plan | None = None
    report: bool = False
    label: str = ""


class Context:
    """What a step function sees of its part: ``part``, ``nparts``, ``step``, ``unit`` (the
    iteration, which a reported step ends), ``static`` (the part's data, never changed),
    ``state`` (its mutable state, kept on its worker) and ``inbox`` (``{sender: payload}``
    of the previous step's messages to it, ascending by sender)."""

    __slots__ = ("part", "nparts", "step", "unit", "static", "state", "inbox", "reported")

    def __init__(self, part: int, nparts: int, static, state: dict):
        self.part, self.nparts = part, nparts
        self.static, self.state = static, state
        self.step, self.unit = -1, 0
        self.inbox: dict = {}
        self.reported: dict = {}

    def report(self, **values) -> None:
        """Values of this part for the current unit (a reported step delivers them)."""
        self.reported.update(values)


class Program:
    """The steps of a run over ``nparts`` parts.

    In step ``t`` every part runs the step's function on its state and its *inbox* (what
    was sent to it in step ``t - 1``) and returns its *outbox*; the step's
    :class:`~daskhpc.comm.Plan` fixes who sends to whom, and an outbox that differs raises
    :class:`PlanMismatch`. :func:`run_local` (the partition-aware serial reference) and
    ``daskhpc.runtime`` (a Dask cluster) run the same functions in the same order per
    part, so their results are equal bit for bit. Functions must be picklable; payloads
    are read-only to the receiver.

    Parameters
    ----------
    nparts : int
    name : str
        Used in task keys and reports.
    init : callable, optional
        ``init(ctx, start)``: fill ``ctx.state`` from ``ctx.static`` and ``start`` (None,
        or the part's arrays from a checkpoint) before the first step.
    final : callable, optional
        ``final(ctx) -> value``: the part's result after the last step.
    save : callable, optional
        ``save(ctx) -> {name: array}``: the part's checkpoint after every reported step.
    first_unit : int
        Number of the first unit (a program that resumes a run after ``u`` units).
    stop : callable, optional
        ``stop(ctx) -> bool`` on every part after each reported step: True ends the
        program after that unit (every part must give the same answer).

    Examples
    --------
    >>> from daskhpc.comm import Plan, Program, run_local
    >>> def init(ctx, start):
    ...     ctx.state["x"] = float(ctx.static)
    >>> def ring(ctx):                       # send x to the next part, add what arrives
    ...     ctx.state["x"] += sum(ctx.inbox.values())
    ...     return {(ctx.part + 1) % ctx.nparts: ctx.state["x"]}
    >>> prog = Program(3, "ring", init=init, final=lambda ctx: ctx.state["x"])
    >>> sends = Plan.from_messages(3, [(0, 0, 1, [0]), (0, 1, 2, [0]), (0, 2, 0, [0])])
    >>> _ = prog.step(ring, sends=sends)
    >>> _ = prog.step(ring, sends=sends)
    >>> run_local(prog, [1, 2, 3])[0]
    [4.0, 3.0, 5.0]
    """

    def __init__(self, nparts: int, name: str = "program", *, init: Callable | None = None,
                 final: Callable | None = None, save: Callable | None = None,
                 first_unit: int = 0, stop: Callable | None = None):
        if nparts < 1:
            raise ValueError(f"a program needs at least one part, got {nparts}")
        self.nparts = int(nparts)
        self.name = name
        self.init, self.final, self.save = init, final, save
        self.first_unit = int(first_unit)
        self.stop = stop
        self.steps: list[Step] = []
        self._dests: dict[int, dict] = {}
        self._plan: Plan | None = None
        self._ends: list[int] | None = None     # unit_steps, built once per change

    def step(self, fn: Callable, *args, sends: Plan | list | None = None,
             report: bool = False, label: str = "") -> int:
        """Append step ``fn(ctx, *args) -> {dst part: payload}`` (or None); returns its index.

        ``sends``: the Plan(s) of its messages, sent now whatever their phases (several are
        merged: one payload per receiver); ``report``: it ends a unit (the parts'
        ``ctx.report`` values go to the run); ``label``: its name in timelines.
        """
        if isinstance(sends, (list, tuple)):
            plans = [p for p in sends if p is not None]
            sends = Plan.merge([p.rephased(0) for p in plans]) if plans else None
        label = label or _name(fn)
        if sends is not None and sends.nparts != self.nparts:
            raise ValueError(f"step {label!r}: its plan is over {sends.nparts} parts, the "
                             f"program over {self.nparts}")
        self.steps.append(Step(fn, tuple(args), sends, bool(report), label))
        self._plan = self._ends = None
        return len(self.steps) - 1

    def fuse(self, fn: Callable, *args, sends: Plan | list | None = None,
             report: bool = False, label: str = "", after_report: bool = False) -> int:
        """Append a step that runs inside the last one, right after it: one round of tasks
        less (an SGD update and the next gradient, say). The last step must send nothing
        and, unless ``after_report``, not report (then ``fn`` runs after the unit's values
        were given and before its checkpoint: it must not change what ``save`` writes);
        both functions see the same inbox. Returns the step's index.
        """
        if not self.steps:
            return self.step(fn, *args, sends=sends, report=report, label=label)
        prev = self.steps[-1]
        if (prev.sends is not None and prev.sends.num_messages) or \
                (prev.report and not after_report):
            raise ValueError(f"step {prev.label!r} sends or reports: nothing can be fused "
                             "into it")
        # flat: fusing into a fused step extends its list in place (no recursion, no copy)
        calls = prev.args[0] if prev.fn is _chained else [(prev.fn, prev.args)]
        calls.append((fn, tuple(args)))
        new = label or _name(fn)
        text = f"{prev.label}+{new}" if len(calls) <= LABELLED_CALLS else \
            f"{prev.label.split('+', 1)[0]}+...+{new} ({len(calls)} calls)"
        try:
            t = self.step(_chained, calls, sends=sends, report=report or prev.report,
                          label=text)
        except ValueError:
            calls.pop()                            # (the last step stays as it was)
            raise
        self.steps[t - 1] = self.steps.pop()       # the new step takes the last one's place
        self._dests.pop(t - 1, None)
        self._dests.pop(t, None)
        self._plan = self._ends = None
        return t - 1

    def allreduce(self, get: Callable, put: Callable, *, words: int, label: str = "allreduce",
                  report: bool = False, op: Callable | None = None,
                  sends: Plan | None = None, fuse: bool = False, after_report: bool = False,
                  word_bytes: int = 8, name: str = "") -> int:
        """Append the steps of a dense allreduce (:class:`AllreduceSchedule`).

        ``get(ctx) -> array`` is each part's contribution (taken in the first step);
        ``put(ctx, total)`` hands every part the total, identical on all parts, in the
        last step (``report`` makes it a reported one). That step sends nothing: work
        after it is fused into it (:meth:`fuse`). Returns its index.

        Parameters
        ----------
        words : int
            Length of the array (for the plan).
        op : callable, optional
            ``op(lower, upper)`` combines two partials, the lower part id's first; default
            ``lower + upper`` (the total is then :func:`~daskhpc.comm.tree_sum`).
        sends : Plan, optional
            Other messages of the first step, delivered with the total: ``get`` returns
            ``(contribution, outbox)`` and ``put`` finds them in ``ctx.inbox``. One to the
            first round's partner travels in the same 1-D array, in front of the vector.
        fuse, after_report : bool
            Run the first step inside the program's last one (:meth:`fuse`).
        word_bytes, name : int, str
            Of the rounds' plans (default 8, ``label``).
        """
        whole = AllreduceSchedule(self.nparts).plan(words, name=name or label)
        nrounds = whole.nphases             # 0 for one part (then no plan has messages)
        last = -1
        for i in range(nrounds + 1):
            plan = None
            if i < nrounds:
                sel = whole.phase == i
                plan = Plan(self.nparts, np.zeros(int(sel.sum()), np.int64), whole.src[sel],
                            whole.dst[sel], volume=whole.volume[sel], unit="vectors",
                            words_per_unit=int(words), word_bytes=word_bytes, name=whole.name)
                plan = [sends, plan] if i == 0 and sends is not None else plan
            args = (_allreduce_round, label, i, get if i == 0 else None,
                    put if i == nrounds else None, op, int(words) if sends is not None else 0)
            kw = dict(sends=plan, report=report and i == nrounds, label=f"{label}-{i}")
            last = self.fuse(*args, after_report=after_report, **kw) if i == 0 and fuse \
                else self.step(*args, **kw)
        return last

    @property
    def nsteps(self) -> int:
        return len(self.steps)

    @property
    def unit_steps(self) -> list[int]:
        """Indices of the reported steps (unit u ends at ``unit_steps[u - first_unit]``);
        cached until a step is added. Read-only."""
        if self._ends is None:
            self._ends = [t for t, s in enumerate(self.steps) if s.report]
        return self._ends

    def unit_of(self, t: int) -> int:
        """The unit step ``t`` belongs to (a binary search in :attr:`unit_steps`)."""
        return self.first_unit + bisect.bisect_left(self.unit_steps, t)

    def units_of_steps(self) -> np.ndarray:
        """:meth:`unit_of` of every step, in one pass."""
        return self.first_unit + np.searchsorted(np.asarray(self.unit_steps, np.int64),
                                                 np.arange(self.nsteps))

    def dests(self, t: int) -> dict[int, list[int]]:
        """``{part: [receivers]}`` of step ``t`` (parts that send nothing are absent)."""
        if t not in self._dests:
            out: dict[int, list[int]] = {}
            plan = self.steps[t].sends
            if plan is not None:
                for s, d in sorted(set(zip(plan.src.tolist(), plan.dst.tolist()))):
                    out.setdefault(s, []).append(d)
            self._dests[t] = out
        return self._dests[t]

    def plan(self) -> Plan:
        """Every message of the program, phase = step index (what a run must send)."""
        if self._plan is None:
            sent = [(t, s.sends) for t, s in enumerate(self.steps) if s.sends is not None]
            empty = Plan(self.nparts, [], [], [], volume=[], nphases=self.nsteps)
            self._plan = Plan.stepped([empty, *(p for _, p in sent)],
                                      [0, *(t for t, _ in sent)], self.nsteps,
                                      name=self.name)
        return self._plan

    def check_outbox(self, t: int, part: int, outbox) -> dict:
        """``outbox`` as a dict, or :class:`PlanMismatch` if it is not what the plan says."""
        want = self.dests(t).get(part, [])
        got = {} if outbox is None else outbox
        if sorted(got) != want:
            raise PlanMismatch(f"{self.name} step {t} ({self.steps[t].label}): part {part} "
                               f"sent to parts {sorted(got)}, its plan says {want}")
        return got

    @staticmethod
    def stop_of(stop: Callable, name: str, ctxs) -> bool:
        """``stop(ctx)`` of every context in ``ctxs`` (a program's parts, or a worker's
        share of them): one answer, or :class:`PlanMismatch` when they disagree."""
        said = {bool(stop(ctx)) for ctx in ctxs}
        if len(said) > 1:
            raise PlanMismatch(f"{name} unit {ctxs[0].unit}: its parts disagree on whether "
                               f"to stop")
        return said.pop()

    def __repr__(self) -> str:
        return (f"Program({self.name}: {self.nparts} parts, {self.nsteps} steps, "
                f"{len(self.unit_steps)} units)")


def _name(fn) -> str:
    return getattr(fn, "__name__", None) or getattr(fn, "func", fn).__name__


def _chained(ctx: Context, calls: list):
    """A fused step (:meth:`Program.fuse`): the ``(fn, args)`` calls in order; all but the
    last send nothing."""
    for fn, args in calls[:-1]:
        if fn(ctx, *args):
            raise PlanMismatch(f"step {ctx.step}: a leading part of a fused step sent "
                               "messages")
    fn, args = calls[-1]
    return fn(ctx, *args)


def _allreduce_round(ctx: Context, label: str, i: int, get, put, op, split: int):
    """Round i of :meth:`Program.allreduce`: receive round i - 1, send round i. ``split``:
    the vector's length when other messages travel with round 0 (0: none do)."""
    rounds, key, st = AllreduceSchedule(ctx.nparts).rounds, ("allreduce", label), ctx.state
    out = {}
    if get is not None:
        st[key], out = get(ctx) if split else (get(ctx), {})
    value = st[key]
    if i > 0:
        rnd, inbox = rounds[i - 1], dict(ctx.inbox)
        src = rnd.receives().get(ctx.part)
        if src is not None:
            got = inbox[src]
            if split and i == 1:             # [the other message, the vector]
                got, inbox[src] = got[got.size - split:], got[:got.size - split]
                if not inbox[src].size:
                    del inbox[src]
            lo, hi = (value, got) if ctx.part < src else (got, value)
            value = st[key] = got if rnd.kind == "unfold" else \
                lo + hi if op is None else op(lo, hi)
        if split and i == 1:
            st[key + ("sent",)] = inbox      # round 0's company, for put
    if put is not None:
        del st[key]
        inbox = ctx.inbox
        if split:
            ctx.inbox = st.pop(key + ("sent",), {})
        put(ctx, value)
        ctx.inbox = inbox
        return None
    q = rounds[i].sends.get(ctx.part)
    if q is not None:
        out[q] = np.concatenate([out[q], value]) if q in out else value
    return out or None


def run_local(program: Program, statics, starts=None, *, on_report=None):
    """Run ``program`` in this process, every part in turn (:class:`Program`).

    ``statics``: every part's static data; ``starts``: per part, ``init``'s ``start``;
    ``on_report(unit, {part: values})`` after every reported step (true: stop after that
    unit). Returns ``(finals, reports)``: every part's ``final(ctx)`` (None without
    ``final``) and per unit ``{part: values}``.
    """
    K = program.nparts
    if len(statics) != K:
        raise ValueError(f"{len(statics)} parts' data for a program over {K} parts")
    ctxs = [Context(p, K, statics[p], {}) for p in range(K)]
    if program.init is not None:
        for p, ctx in enumerate(ctxs):
            program.init(ctx, None if starts is None else starts[p])
    reports = []
    outboxes: list[dict] = [{} for _ in range(K)]
    unit = program.first_unit
    for t, st in enumerate(program.steps):
        inboxes: list[dict] = [{} for _ in range(K)]
        for src in range(K):
            for dst, payload in outboxes[src].items():
                inboxes[dst][src] = payload
        new = []
        for p, ctx in enumerate(ctxs):
            ctx.step, ctx.unit, ctx.inbox = t, unit, inboxes[p]
            new.append(program.check_outbox(t, p, st.fn(ctx, *st.args)))
            ctx.inbox = {}
        outboxes = new
        if st.report:
            got = {p: dict(ctx.reported) for p, ctx in enumerate(ctxs)}
            for ctx in ctxs:
                ctx.reported = {}
            reports.append(got)
            said = on_report is not None and bool(on_report(unit, got))
            unit += 1
            if said or (program.stop is not None and
                        Program.stop_of(program.stop, program.name, ctxs)):
                break
    finals = [program.final(ctx) if program.final is not None else None for ctx in ctxs]
    return finals, reports


def run_local_history(program: Program, statics, row, starts=None, *, stop=None):
    """:func:`run_local` with the history a workflow reports: ``row(unit, reports)`` of
    every unit plus ``time_s``, the unit's wall time in this process; ``stop(history)``
    (optional) after every unit ends the program when true (the frame's ``Job.stop``).

    Examples
    --------
    >>> from daskhpc.comm import Program
    >>> prog = Program(2)
    >>> prog.step(lambda ctx: ctx.report(part=ctx.part) or {}, report=True)  # doctest: +SKIP
    >>> finals, hist = run_local_history(prog, [None, None],
    ...                                  lambda u, r: {"unit": u})           # doctest: +SKIP
    """
    import time

    history, last = [], [time.perf_counter()]

    def tick(unit, reports):
        now = time.perf_counter()
        history.append({**row(len(history), reports), "time_s": now - last[0]})
        last[0] = time.perf_counter()       # the row is not the next unit's time
        return stop is not None and stop(history)

    finals, _ = run_local(program, statics, starts, on_report=tick)
    return finals, history
