"""The distributed algorithm as a Program, run in one process (run_local): equal to the
plain serial reference to rounding, bit for bit on reruns, resumable from its
checkpoints, sending exactly what its plan says."""

from __future__ import annotations

import numpy as np
import pytest

from daskhpc.comm import AllreduceSchedule, Program, run_local
from daskhpc.cpals import assemble, program, statics
from daskhpc.cpals._program import row, stop
from daskhpc.cpals._serial import run_serial

METHODS = [("fine", "hp"), ("fine", "random"), ("coarse", "hp"), ("coarse", "block")]


def rel(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


def run(s):
    finals, reports = run_local(program(s), statics(s))
    lam, factors = assemble(s, finals)
    return lam, factors, [row(s, u, r)["fit"] for u, r in enumerate(reports)], finals


@pytest.mark.parametrize("name", ["nations", "umls"])
@pytest.mark.parametrize("K", [1, 2, 4])
@pytest.mark.parametrize("grain, part", METHODS)
def test_partition_aware_reference_equals_serial(setup_of, name, K, grain, part):
    s = setup_of(name, K, grain, part, rank=10, iters=20, tol=0.0)
    ser = run_serial(s.tensor, 10, 20, 0.0, 0)
    lam, factors, fits, finals = run(s)
    assert len(fits) == 20
    assert rel(lam, ser["lam"]) <= 1e-9
    for a, b in zip(factors, ser["factors"]):
        assert rel(a, b) <= 1e-9
    assert max(abs(a - h["fit"]) / h["fit"] for a, h in zip(fits, ser["history"])) <= 1e-9
    lam2, factors2, fits2, _ = run(s)                     # the same run again: same bits
    assert np.array_equal(lam, lam2) and fits == fits2
    assert all(np.array_equal(a, b) for a, b in zip(factors, factors2))


@pytest.mark.parametrize("grain, part", [("fine", "random"), ("coarse", "block")])
def test_one_part_is_the_serial_code_bit_for_bit(setup_of, grain, part):
    # one part runs the serial iteration itself: not merely to rounding
    s = setup_of("umls", 1, grain, part, rank=10, iters=8, tol=0.0)
    ser = run_serial(s.tensor, 10, 8, 0.0, 0)
    lam, factors, fits, _ = run(s)
    assert np.array_equal(lam, ser["lam"]) and fits == [h["fit"] for h in ser["history"]]
    assert all(np.array_equal(a, b) for a, b in zip(factors, ser["factors"]))


@pytest.mark.slow
@pytest.mark.parametrize("K", [2, 4])
@pytest.mark.parametrize("grain, part", METHODS)
def test_partition_aware_reference_equals_serial_mlsmall(setup_of, K, grain, part):
    s = setup_of("mlsmall", K, grain, part, rank=16, iters=20, tol=0.0)
    ser = run_serial(s.tensor, 16, 20, 0.0, 0)
    lam, factors, fits, _ = run(s)
    assert rel(lam, ser["lam"]) <= 1e-9
    assert all(rel(a, b) <= 1e-9 for a, b in zip(factors, ser["factors"]))


@pytest.mark.parametrize("K", [3, 5])
def test_non_power_of_two_parts(setup_of, K):
    """The all-reduce folds the extra parts in and out: still the serial result."""
    s = setup_of("umls", K, "fine", "random", rank=6, iters=5, tol=0.0)
    lam, factors, fits, _ = run(s)
    ser = run_serial(s.tensor, 6, 5, 0.0, 0)
    assert all(rel(a, b) <= 1e-9 for a, b in zip(factors, ser["factors"]))


@pytest.mark.parametrize("grain, part", [("fine", "random"), ("coarse", "block")])
def test_steps_per_iteration(setup_of, grain, part):
    """coarse: N L steps per iteration, fine: N (L + 1), L = all-reduce rounds; the
    first step of the run and the standalone last one add one. One part: the serial
    iteration in one step."""
    from daskhpc.cpals._api import steps_per_iteration

    for K in (1, 2, 4, 3):
        s = setup_of("nations", K, grain, part, iters=3)
        L = len(AllreduceSchedule(K).rounds)
        per = 1 if K == 1 else 3 * (L + 1 if grain == "fine" else L)
        prog = program(s)
        assert steps_per_iteration(s) == per
        assert prog.nsteps == 3 * per + (0 if K == 1 else 1)
        assert len(prog.unit_steps) == 3


def test_program_plan_is_the_iteration_plan_plus_the_allreduce(setup_of):
    """Every factor row the run sends is in the iteration plan, once per iteration."""
    s = setup_of("umls", 4, "fine", "hp", iters=3)
    whole = program(s).plan()
    it = s.iteration_plan().report()
    ar = s.allreduce_plan().report()
    words = int((whole.volume * whole.message_words()).sum())
    assert words == 3 * (it["tot_vol"] * s.R + ar["planned_bytes"] // 8)


@pytest.mark.parametrize("grain, part", [("fine", "hp"), ("coarse", "block")])
def test_resume_from_a_checkpoint_is_bit_identical(setup_of, grain, part):
    """save() after iteration 2, a new program from unit 3 started from it: the same
    factors and fits as the uninterrupted run."""
    s = setup_of("nations", 4, grain, part, rank=5, iters=6, tol=0.0)
    prog, st = program(s), statics(s)
    full_finals, full_reports = run_local(prog, st)
    # replay the first three iterations and take every part's checkpoint as its final
    head = Program(s.K, "head", init=prog.init, final=prog.save, save=prog.save)
    for t in range(prog.unit_steps[2] + 1):
        stp = prog.steps[t]
        head.step(stp.fn, *stp.args, sends=stp.sends, report=stp.report, label=stp.label)
    starts, _ = run_local(head, st)
    tail_finals, tail_reports = run_local(program(s, first_unit=3), st, starts)
    assert [r[0]["fit"] for r in tail_reports] == [r[0]["fit"] for r in full_reports[3:]]
    for a, b in zip(tail_finals, full_finals):
        assert all(np.array_equal(x, y) for x, y in zip(a[1], b[1]))
        assert np.array_equal(a[2], b[2])


def test_stop_rule_and_rows(setup_of):
    s = setup_of("nations", 2, "fine", "random", tol=1e-3)
    assert not stop(s, [{"fit": 0.3}])
    assert stop(s, [{"fit": 0.3}, {"fit": 0.3005}])
    assert not stop(s, [{"fit": 0.3}, {"fit": 0.302}])
    assert row(s, 4, {0: {"fit": 0.5}, 1: {"fit": 0.5}}) == {"iteration": 4, "fit": 0.5}


def test_statics_hold_only_the_parts_own_data(setup_of):
    s = setup_of("umls", 4, "coarse", "hp")
    st = statics(s)
    X, d = s.tensor, s.dist
    for p, ps in enumerate(st):
        for n in range(3):
            # coarse grain: a part holds every nonzero of the slices it owns, in every mode
            owned = np.flatnonzero(d.owners[n] == p)
            nz_in_owned = np.isin(X.coords[n], owned).sum()
            assert ps.work[n].size == nz_in_owned
            assert np.array_equal(ps.rows[n][ps.own[n]], owned)
    # replication: the union is at most N times the tensor
    assert X.nnz <= sum(ps.vals.size for ps in st) <= 3 * X.nnz


@pytest.mark.parametrize("K", [1, 3])
def test_coarse_members_and_work_are_the_owned_slices(setup_of, K):
    """part_members against its definition: a part holds the nonzeros of the slices it
    owns in any mode (ascending) and works in mode n on those of its mode-n slices
    (None where that is all it holds: one part); the local coordinates map back."""
    from daskhpc.cpals._parts import part_members

    s = setup_of("umls", K, "coarse", "hp")
    X, d = s.tensor, s.dist
    members, work = part_members(s)
    st = statics(s)
    for p in range(K):
        mine = [d.owners[n][X.coords[n]] == p for n in range(3)]
        assert np.array_equal(members[p], np.flatnonzero(np.any(mine, axis=0)))
        for n in range(3):
            want = np.flatnonzero(mine[n][members[p]])
            if work[p][n] is None:
                assert want.size == members[p].size
            else:
                assert np.array_equal(work[p][n], want)
            assert np.array_equal(st[p].rows[n][st[p].coords[n]], X.coords[n][members[p]])
        assert np.array_equal(st[p].vals, X.vals[members[p]])
    assert all(w is None for w in work[0]) == (K == 1)


def test_fingerprint_changes_with_what_changes_the_run(setup_of):
    from daskhpc.cpals._program import fingerprint

    a = fingerprint(setup_of("nations", 2, "fine", "random"))
    assert a == fingerprint(setup_of("nations", 2, "fine", "random"))
    assert a != fingerprint(setup_of("nations", 2, "fine", "random", rank=5))
    hp = fingerprint(setup_of("nations", 2, "fine", "hp"))
    assert a["partition_sha1"] != hp["partition_sha1"]
    assert a["tensor_sha1"] != fingerprint(setup_of("umls", 2, "fine", "random"))["tensor_sha1"]
