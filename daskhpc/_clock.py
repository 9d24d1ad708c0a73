"""Where a worker's time in a run's steps goes (the report's ``execution.steps``): one
:class:`StepClock` per run ``token`` and worker label, shared by the Program engine and
SSGD's direct loop, answered by :func:`step_times` at the attempt's cleanup. No dask here."""

from __future__ import annotations

#: (token, worker label) -> StepClock, in each worker process
CLOCKS: dict = {}


class StepClock:
    """Seconds of a worker's steps in one run: ``compute`` (the step functions, with their
    reports and checkpoints), ``wait`` and ``send`` (timed by loops that exchange:
    ``exchange`` true), and ``steps``."""

    __slots__ = ("compute", "wait", "send", "steps", "exchange", "waited_on", "in_flight")

    def __init__(self):
        self.compute = self.wait = self.send = 0.0
        self.steps = 0
        self.exchange = False
        #: sender -> seconds of ``wait`` that ended with its message (the last to come)
        self.waited_on: dict = {}
        #: sender -> the part of those seconds its message was on the wire (sent before
        #: the wait began, or during it): a slow link between the two
        self.in_flight: dict = {}

    def blame(self, sender: str, waited: float, flight: float) -> None:
        """A wait of ``waited`` s ended with ``sender``'s message, ``flight`` s of which it
        was on its way (:meth:`daskhpc.runtime.Exchange.wait` measures both)."""
        self.waited_on[sender] = self.waited_on.get(sender, 0.0) + waited
        self.in_flight[sender] = self.in_flight.get(sender, 0.0) + flight


def step_clock(token: str, label: str) -> StepClock:
    """The clock of run ``token``'s steps on this worker's label (made on first use)."""
    clock = CLOCKS.get((token, label))
    if clock is None:
        clock = CLOCKS[(token, label)] = StepClock()
    return clock


#: [compute seconds, steps] of the clocks already forgotten in this process (ended runs)
_ENDED = [0.0, 0]
#: waits of the clocks already forgotten: {"wait_s": s, "waited_on_s": {sender: s},
#: "in_flight_s": {sender: s}}
_ENDED_WAITED: dict = {"wait_s": 0.0, "waited_on_s": {}, "in_flight_s": {}}


def compute_total() -> tuple[float, int]:
    """``(compute seconds, steps)`` of every step timed in this process, ended runs included: a
    total that only grows (the dashboard's heartbeat metric; its difference over a run is that
    run's ``compute_s`` and ``steps``)."""
    live = list(CLOCKS.values())
    return (_ENDED[0] + sum(c.compute for c in live), _ENDED[1] + sum(c.steps for c in live))


def waited_total() -> dict:
    """This process's waits so far, ended runs included, as totals that only grow: ``wait_s``,
    and per sender ``waited_on_s`` and ``in_flight_s`` (the heartbeat metric whose differences
    over a run go to :func:`waited_for`)."""
    w = _ENDED_WAITED
    return _add_waits({"wait_s": w["wait_s"], "waited_on_s": dict(w["waited_on_s"]),
                       "in_flight_s": dict(w["in_flight_s"])}, list(CLOCKS.values()))


def _add_waits(into: dict, clocks: list) -> dict:
    for c in clocks:
        into["wait_s"] += c.wait
        for mine, theirs in ((into["waited_on_s"], c.waited_on),
                             (into["in_flight_s"], c.in_flight)):
            for who, sec in list(theirs.items()):
                mine[who] = mine.get(who, 0.0) + sec
    return into


def waited_for(per_worker: dict) -> tuple[str, float] | None:
    """The worker the others waited for, and its seconds of blame (None if none waited).

    ``per_worker``: a run's ``execution.steps`` ``per_worker``. A wait's seconds on the wire
    count against both ends of the link; the rest, the sender's lateness, against the sender,
    less its own waiting (lateness passed on): a slow link names its host, a straggler itself.
    """
    score: dict = {}
    late: dict = {}
    for w, v in per_worker.items():
        flight = v.get("in_flight_s") or {}
        for who, sec in (v.get("waited_on_s") or {}).items():
            f = min(flight.get(who, 0.0), sec)
            score[who] = score.get(who, 0.0) + f
            score[w] = score.get(w, 0.0) + f
            late[who] = max(late.get(who, 0.0), sec - f)
    for who, sec in late.items():
        own = (per_worker.get(who) or {}).get("wait_s") or 0.0
        score[who] = score.get(who, 0.0) + max(sec - own, 0.0)
    if not score or max(score.values()) <= 0:
        return None
    who = max(score, key=score.get)
    return who, float(score[who])


def step_times(token: str, forget: bool = False) -> dict:
    """``{"compute_s", "wait_s", "send_s", "steps"}`` of run ``token``'s steps on this
    worker, summed over its clocks (empty if it ran none; ``forget``: drop them). Waiting
    and sending are None where no loop that exchanges timed them: one worker's loop has
    none, and a group of tasks waits and sends in the scheduler's time, not its own."""
    got = [c for k, c in CLOCKS.items() if k[0] == token]
    if forget:
        for k in [k for k in CLOCKS if k[0] == token]:
            del CLOCKS[k]
        _ENDED[0] += sum(c.compute for c in got)
        _ENDED[1] += sum(c.steps for c in got)
        _add_waits(_ENDED_WAITED, got)
    if not got:
        return {}
    timed = any(c.exchange for c in got)
    waits = _add_waits({"wait_s": 0.0, "waited_on_s": {}, "in_flight_s": {}}, got)
    return {"compute_s": sum(c.compute for c in got),
            "wait_s": sum(c.wait for c in got) if timed else None,
            "send_s": sum(c.send for c in got) if timed else None,
            "steps": sum(c.steps for c in got),
            **({k: waits[k] for k in ("waited_on_s", "in_flight_s")}
               if waits["waited_on_s"] else {})}
