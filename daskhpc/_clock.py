"""Where a worker's time in a run's steps goes: what the report calls ``execution.steps``.

A loop of steps on a worker keeps one :class:`StepClock` per run (``token``) and worker
label: the seconds its steps computed, waited for other workers' messages and sent its
own, and how many steps it ran. The Program engine's steps (``daskhpc.runtime._steps``)
and SSGD's direct loop use the same clocks; the attempt's cleanup answers with
:func:`step_times` in the run's closing call, and the frame puts the answers in the
report (``daskhpc.runtime._frame.step_split``). No dask here.

Examples
--------
>>> clock = step_clock("run-a", "w0")
>>> clock.compute += 0.002; clock.steps += 1
>>> step_times("run-a", forget=True)
{'compute_s': 0.002, 'wait_s': None, 'send_s': None, 'steps': 1}
>>> step_times("run-a")
{}
"""

from __future__ import annotations

__all__ = ["StepClock", "step_clock", "step_times", "compute_total", "CLOCKS"]

#: (token, worker label) -> StepClock, in each worker process
CLOCKS: dict = {}


class StepClock:
    """Seconds of a worker's steps in one run: ``compute`` (the step functions, with their
    reports and checkpoints), ``wait`` and ``send`` (timed by loops that exchange:
    ``exchange`` true), and ``steps``."""

    __slots__ = ("compute", "wait", "send", "steps", "exchange", "waited_on")

    def __init__(self):
        self.compute = self.wait = self.send = 0.0
        self.steps = 0
        self.exchange = False
        #: worker -> seconds of ``wait`` spent for its messages (shared among the workers
        #: whose messages had not arrived when the wait began)
        self.waited_on: dict = {}


def step_clock(token: str, label: str) -> StepClock:
    """The clock of run ``token``'s steps on this worker's label (made on first use)."""
    clock = CLOCKS.get((token, label))
    if clock is None:
        clock = CLOCKS[(token, label)] = StepClock()
    return clock


#: [compute seconds, steps] of the clocks already forgotten in this process (ended runs)
_ENDED = [0.0, 0]


def compute_total() -> tuple[float, int]:
    """``(compute seconds, steps)`` of every step timed in this process so far, the
    ended runs' included: a running total that only grows (the dashboard's heartbeat
    metric; the difference over a run is that run's ``compute_s`` and ``steps``).

    Examples
    --------
    >>> before = compute_total()
    >>> clock = step_clock("run-b", "w0")
    >>> clock.compute += 0.5; clock.steps += 2
    >>> _ = step_times("run-b", forget=True)
    >>> [round(a - b, 6) for a, b in zip(compute_total(), before)]
    [0.5, 2]
    """
    live = list(CLOCKS.values())
    return (_ENDED[0] + sum(c.compute for c in live), _ENDED[1] + sum(c.steps for c in live))


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
    if not got:
        return {}
    timed = any(c.exchange for c in got)
    waited_on: dict = {}
    for c in got:
        for who, s in c.waited_on.items():
            waited_on[who] = waited_on.get(who, 0.0) + s
    return {"compute_s": sum(c.compute for c in got),
            "wait_s": sum(c.wait for c in got) if timed else None,
            "send_s": sum(c.send for c in got) if timed else None,
            "steps": sum(c.steps for c in got),
            **({"waited_on_s": waited_on} if waited_on else {})}
