"""The kit's dask-free pieces: expand/fold plans, the dense allreduce, Program + run_local."""

import functools
import math

import numpy as np
import pytest

from daskhpc.comm import (AllreduceSchedule, Plan, PlanMismatch, Program, expand_plan,
                          fold_plan, row_volume, run_local, tree_sum)


def random_sets(n, K, seed):
    rng = np.random.default_rng(seed)
    owner = rng.integers(0, K, n)
    sets = [sorted(set(rng.choice(K, rng.integers(0, K + 1), replace=True).tolist()))
            for _ in range(n)]
    ptr = np.concatenate([[0], np.cumsum([len(s) for s in sets])])
    parts = np.array([p for s in sets for p in s], np.int64)
    return owner, ptr, parts, sets


@pytest.mark.parametrize("seed", range(5))
def test_expand_and_fold_match_a_brute_force_count(seed):
    K, n = 5, 40
    owner, ptr, parts, sets = random_sets(n, K, seed)
    # from the definition: row i goes from its owner to every other part of its set
    want = {}
    for i, s in enumerate(sets):
        for q in s:
            if q != owner[i]:
                want.setdefault((int(owner[i]), q), []).append(i)
    ex = expand_plan(owner, ptr, parts, K, words_per_unit=7)
    got = {(s, d): idx.tolist() for _, s, d, idx in ex.messages()}
    assert got == want
    fo = fold_plan(owner, ptr, parts, K)
    assert {(s, d): idx.tolist() for _, s, d, idx in fo.messages()} == \
        {(d, s): v for (s, d), v in want.items()}
    vol = row_volume(owner, ptr, parts)
    assert vol.tolist() == [len(set(s) | {int(owner[i])}) - 1 for i, s in enumerate(sets)]
    assert ex.report()["tot_vol"] == fo.report()["tot_vol"] == vol.sum()
    assert ex.report()["planned_bytes"] == vol.sum() * 7 * 8


def test_message_widths_and_placement():
    a = Plan.from_messages(3, [(0, 0, 1, [1, 2]), (0, 2, 1, [3])], words_per_unit=4)
    b = Plan.from_messages(3, [(0, 0, 1, [0])], words_per_unit=9)
    c = Plan.concat([a, b])
    assert c.message_bytes().tolist() == [64, 32, 72]
    assert c.report()["planned_bytes"] == 168
    # parts 0 and 2 on worker 0, part 1 on worker 1: everything is 0 -> 1, bundled by phase
    w = c.placed([0, 1, 0])
    assert w.nparts == 2 and w.num_messages == 2
    assert w.message_bytes().sum() == 168 and w.phase.tolist() == [0, 1]
    same = c.placed([0, 0, 0])
    assert same.num_messages == 0
    # a broadcast key fetched once per receiving worker
    bc = Plan(3, [0, 0], [0, 0], [1, 2], volume=[5, 5])
    assert bc.placed([0, 1, 1], broadcast=True).volume.tolist() == [5]
    assert bc.placed([0, 1, 1]).volume.tolist() == [10]


@pytest.mark.parametrize("P", [1, 2, 3, 4, 5, 6, 7, 8, 13])
def test_allreduce_schedule_sums_every_part_identically(P):
    sched = AllreduceSchedule(P)
    rng = np.random.default_rng(P)
    vals = [rng.standard_normal(6) for _ in range(P)]
    held = list(vals)
    for rnd in sched.rounds:
        held = [sched.combine(rnd, q, held[q], held[rnd.receives()[q]])
                if q in rnd.receives() else held[q] for q in range(P)]
    assert all(np.array_equal(h, held[0]) for h in held)
    assert np.array_equal(tree_sum(vals), held[0])
    assert np.allclose(held[0], np.sum(vals, axis=0), rtol=1e-13)
    p2 = 1 << (P.bit_length() - 1)
    extra = 2 if P != p2 else 0
    assert len(sched.rounds) == int(math.log2(p2)) + extra
    rep = sched.plan(words=6).report()
    assert rep["tot_msgs"] == p2 * int(math.log2(p2)) + 2 * (P - p2)
    assert rep["planned_bytes"] == rep["tot_msgs"] * 6 * 8


def _init(ctx, start):
    ctx.state["x"] = np.array([float(ctx.static)])


def _get(ctx):
    return ctx.state["x"] * 1.0


def _put(ctx, total):
    ctx.state["total"] = total
    ctx.report(total=float(total[0]))


def _shift(ctx, k):
    for src, v in ctx.inbox.items():
        ctx.state["x"] = ctx.state["x"] + v
    return {(ctx.part + k) % ctx.nparts: ctx.state["x"]}


def _final(ctx):
    return ctx.state["total"]


def ring(K, k=1):
    return Plan.from_messages(K, [(0, p, (p + k) % K, [0]) for p in range(K)])


@pytest.mark.parametrize("K", [1, 2, 3, 5])
def test_program_with_allreduce_runs_locally(K):
    prog = Program(K, "t", init=_init, final=_final)
    if K > 1:
        prog.step(_shift, 1, sends=ring(K))
        prog.step(_shift, 2 % K or 1, sends=ring(K, 2 % K or 1))
    prog.allreduce(_get, _put, words=1, report=True)
    finals, reports = run_local(prog, list(range(1, K + 1)))
    assert len(reports) == 1 and sorted(reports[0]) == list(range(K))
    assert all(np.array_equal(f, finals[0]) for f in finals)
    assert prog.plan().num_messages == (2 * K if K > 1 else 0) + \
        AllreduceSchedule(K).plan(1).num_messages
    assert prog.unit_steps == [prog.nsteps - 1]


def test_a_step_that_breaks_its_plan_is_refused():
    prog = Program(3, "bad", init=_init)
    prog.step(_shift, 2, sends=ring(3, 1))        # plan says p -> p+1, the step sends p -> p+2
    with pytest.raises(PlanMismatch, match="part 0 sent to parts \\[2\\], its plan says \\[1\\]"):
        run_local(prog, [1, 2, 3])


def test_merged_plans_in_one_step():
    prog = Program(2, "merge", init=_init)
    prog.step(functools.partial(_shift, k=1), sends=[ring(2), ring(2)])
    assert prog.dests(0) == {0: [1], 1: [0]}
    assert prog.plan().num_messages == 4


def test_merged_plans_keep_their_bytes_whatever_their_word_size():
    a = Plan.from_messages(2, [(0, 0, 1, [1, 2])], words_per_unit=3)                 # 48 B
    b = Plan(2, [0], [1], [0], volume=[5], words_per_unit=12, word_bytes=1)        # 60 B
    m = Plan.merge([Plan(2, [], [], [], volume=[], nphases=1), a, b])
    assert m.message_bytes().tolist() == [48, 60]
    prog = Program(2, "p")
    prog.step(_shift, 1, sends=b)
    assert prog.plan().report()["planned_bytes"] == 60 and prog.plan().word_bytes == 1


def _noop(ctx):
    ctx.state["seen"] = ctx.state.get("seen", 0) + 1


def test_fuse_runs_a_step_inside_the_last_one():
    plain = Program(3, "plain", init=_init, final=_final)
    plain.step(_noop)
    plain.step(_shift, 1, sends=ring(3))
    plain.step(_noop)
    plain.allreduce(_get, _put, words=1, report=True)
    fused = Program(3, "fused", init=_init, final=_final)
    fused.step(_noop)
    assert fused.fuse(_shift, 1, sends=ring(3)) == 0
    fused.step(_noop)
    fused.allreduce(_get, _put, words=1, report=True)
    assert fused.nsteps == plain.nsteps - 1 and fused.dests(0) == plain.dests(1)
    a, b = run_local(plain, [1, 2, 3]), run_local(fused, [1, 2, 3])
    assert all(np.array_equal(x, y) for x, y in zip(a[0], b[0])) and a[1] == b[1]
    with pytest.raises(ValueError, match="sends or reports"):
        fused.fuse(_noop)


def test_a_long_chain_of_fused_steps_is_flat():
    """Fusing into a fused step extends it: 5,000 fused calls at one part (where nothing
    is sent, so every call fuses into the one before) ran nested 5,000 deep and hit the
    recursion limit."""
    prog = Program(1, "chain", init=_init, final=lambda ctx: ctx.state["seen"])
    prog.step(_noop)
    for _ in range(5000):
        prog.fuse(_noop)
    assert prog.nsteps == 1
    assert run_local(prog, [1])[0] == [5001]
    # the label names the first and last calls of a long chain (it grew by every call's
    # name, 40 kB for a one-part linear epoch); a short chain names them all
    assert prog.steps[0].label == "_noop+...+_noop (5001 calls)"
    short = Program(1, "short")
    short.step(_noop, label="a")
    short.fuse(_noop, label="b")
    short.fuse(_noop, label="c")
    assert short.steps[0].label == "a+b+c"
    short.fuse(_noop, label="d")
    assert short.steps[0].label == "a+...+d (4 calls)"


def test_a_refused_fuse_leaves_the_chain_as_it_was():
    prog = Program(2, "chain", init=_init, final=lambda ctx: ctx.state["seen"])
    prog.step(_noop)
    prog.fuse(_noop)
    with pytest.raises(ValueError, match="over 3 parts"):
        prog.fuse(_noop, sends=ring(3))
    assert prog.nsteps == 1 and prog.steps[0].label == "_noop+_noop"
    assert run_local(prog, [1, 2])[0] == [2, 2]


def _sum_max(lo, hi):
    return np.array([lo[0] + hi[0], max(lo[1], hi[1])])


def _get_with_rows(ctx):
    p = float(ctx.part)
    return np.array([p + 1, p]), {q: np.full(q + 1, p) for q in range(ctx.nparts) if q != p}


def _put_with_rows(ctx, total):
    ctx.state["total"] = total
    ctx.report(total=total.tolist(), rows={q: v.tolist() for q, v in ctx.inbox.items()})


@pytest.mark.parametrize("K", [1, 2, 3, 5, 6])
def test_allreduce_with_an_op_other_messages_and_work_fused_around_it(K):
    """The hooks CP-ALS and GCN use: a combine other than the sum, messages that travel
    with the first round and arrive with the total, and steps fused before and after
    the rounds (after a reported step only when asked)."""
    every = Plan.from_messages(K, [(0, p, q, list(range(q + 1))) for p in range(K)
                                   for q in range(K) if q != p])
    prog = Program(K, "hooks", init=_init, final=_final)
    prog.step(_noop)
    last = prog.allreduce(_get_with_rows, _put_with_rows, words=2, op=_sum_max, sends=every,
                          fuse=True, report=True, label="ar", word_bytes=4, name="sum-max")
    sched = AllreduceSchedule(K)
    assert prog.nsteps == last + 1 == len(sched.rounds) + 1 and prog.unit_steps == [last]
    with pytest.raises(ValueError, match="sends or reports"):
        prog.fuse(_noop)
    after = (_shift, 1) if K > 1 else (_noop,)
    assert prog.fuse(*after, sends=ring(K) if K > 1 else None, after_report=True) == last
    assert prog.unit_steps == [last]
    finals, reports = run_local(prog, list(range(1, K + 1)))
    assert [reports[0][p]["total"] for p in range(K)] == [[K * (K + 1) / 2, K - 1.0]] * K
    assert [reports[0][p]["rows"] for p in range(K)] == \
        [{q: [float(q)] * (p + 1) for q in range(K) if q != p} for p in range(K)]
    if K > 1:
        assert prog.dests(last) == {p: [(p + 1) % K] for p in range(K)}
        assert prog.dests(0) == {p: [q for q in range(K) if q != p] for p in range(K)}
        # the first step's plan: the other messages and round 0's vectors (2 words of 4 B)
        assert prog.steps[0].sends.report()["planned_bytes"] == \
            every.report()["planned_bytes"] + 8 * len(sched.rounds[0].sends)
        middle = [s.sends for s in prog.steps[1:last]]
        assert all(p.name == "sum-max" and p.word_bytes == 4 for p in middle)


def _count(ctx):
    ctx.state["n"] = ctx.state.get("n", 0) + 1
    ctx.report(n=ctx.state["n"])


def _after_three(ctx):
    return ctx.state["n"] >= 3


def _part_zero_only(ctx):
    return ctx.part == 0


def test_a_stop_rule_ends_the_program_where_every_part_says_so():
    from daskhpc.comm import PlanMismatch

    prog = Program(2, "count", final=lambda ctx: ctx.state["n"], stop=_after_three)
    for _ in range(10):
        prog.step(_count, report=True)
    finals, reports = run_local(prog, [None, None])
    assert finals == [3, 3] and [r[0]["n"] for r in reports] == [1, 2, 3]
    split = Program(2, "split", stop=_part_zero_only)
    split.step(_count, report=True)
    with pytest.raises(PlanMismatch, match="split unit 0: its parts disagree on whether to "
                                           "stop"):
        run_local(split, [None, None])
