"""Long runs: the set-up of a run is linear in its steps, and what the scheduler holds at
once is bounded by the submission window, not by the number of units (counted, not timed)."""

from __future__ import annotations

from daskhpc.comm import Program
from daskhpc.runtime._steps import ProgramCode


class CountingList(list):
    """A list that counts the passes over it (``for``, comprehensions, ``enumerate``) and
    stops a quadratic caller at ``limit`` of them (it would run for hours)."""

    passes, limit = 0, 50

    def __iter__(self):
        self.passes += 1
        assert self.passes <= self.limit, f"{self.passes} passes over the steps"
        return super().__iter__()


def _noop(ctx):
    return None


def test_program_code_of_1e5_steps_passes_over_the_steps_a_bounded_number_of_times():
    # a9a at 2 parts, 30 epochs: ~10^5 steps; ProgramCode asked unit_of per step and each
    # call rebuilt unit_steps over all steps (10^5 passes: minutes of CPU before epoch 0)
    n = 100_000
    prog = Program(2, "long")
    for t in range(n):
        prog.step(_noop, report=t % 10 == 9)
    prog.steps = CountingList(prog.steps)
    code = ProgramCode(prog, {0: "w0", 1: "w0"}, None, None)
    assert code.unit_of_step[:11] == [0] * 10 + [1]
    assert code.unit_of_step[-1] == n // 10 - 1
    assert [prog.unit_of(t) for t in (0, 9, 10, n - 1)] == [0, 0, 1, n // 10 - 1]
    assert len(prog.unit_steps) == n // 10
    assert prog.steps.passes <= 5, prog.steps.passes
    # adding a step is seen (the cached list is rebuilt once)
    prog.step(_noop, report=True)
    assert prog.unit_steps[-1] == n and prog.unit_of(n) == n // 10
