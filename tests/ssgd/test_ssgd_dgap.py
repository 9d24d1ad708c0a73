"""Strata, d-gap rows (eq. (7), Algorithm 2) and the run's messages against brute force."""

from __future__ import annotations

import numpy as np
import pytest

from daskhpc.ssgd._dgap import dgap_successors, pins_of, successors_by_connectivity
from daskhpc.ssgd._plan import Layout
from daskhpc.ssgd._runplan import RunPlan
from daskhpc.ssgd._strata import RingStrata


def random_case(K, N=50, M=40, density=0.12, seed=0):
    rng = np.random.default_rng(seed)
    rows, cols = np.nonzero(rng.random((N, M)) < density)
    return rows, cols, rng.integers(K, size=N), rng.integers(K, size=M)


@pytest.mark.parametrize("K,seed", [(4, 0), (5, 1)])
def test_ring_strata_follow_the_paper_schedule(K, seed):
    # sub-epoch k: worker p updates block ((p + seed) mod K + k) mod K, so a block travels
    # p -> p-1 -> p-2 ... (the ring order); the paper's public code uses the same rule.
    s = RingStrata(K, ring_seed=seed)
    for p in range(K):
        for k in range(K):
            assert s.block(p, k) == ((p + seed) % K + k) % K
            assert s.subepoch(p, s.block(p, k)) == k
    table = s.block(np.arange(K)[:, None], np.arange(K)[None, :])
    assert all(sorted(table[:, k]) == list(range(K)) for k in range(K))   # strata are correct
    # fixed distance (Definition 2): y updates every block d sub-epochs after x
    for x in range(K):
        for y in range(K):
            d = {(s.subepoch(y, b) - s.subepoch(x, b)) % K for b in range(K)}
            assert d == {s.distance(x, y)}


def test_random_strata_are_seeded_per_epoch():
    a, b = RingStrata(8, "random", seed=3), RingStrata(8, "random", seed=3)
    seeds = [a.epoch_seed(e) for e in range(10)]
    assert seeds == [b.epoch_seed(e) for e in range(10)] and len(set(seeds)) > 1


def eq7(rows, cols, rp, cb, K):
    """H_beta^{x,y} by the definition: rows x and y both update, and no part between
    them in x's ring order does."""
    have = [set() for _ in range(K)]
    for r, c in zip(rows, cols):
        have[rp[r]].add(int(c))
    out = set()
    for x in range(K):
        order = [(x - i) % K for i in range(K)]
        for j in have[x]:
            for y in order[1:]:
                if j in have[y]:
                    out.add((x, y, j))
                    break
    return out


@pytest.mark.parametrize("K", [2, 3, 4, 7, 16])
def test_algorithm2_equals_eq7_and_connectivity(K):
    rows, cols, rp, cb = random_case(K, seed=K)
    pc, pp = pins_of(rows, cols, rp, cb.size, K)
    a = set(zip(*(x.tolist() for x in dgap_successors(pc, pp, cb, K))))
    b = set(zip(*(x.tolist() for x in successors_by_connectivity(pc, pp, K))))
    assert a == b == eq7(rows, cols, rp, cb, K)


def test_algorithm2_with_more_than_64_rows_per_block():
    K = 3
    rows, cols, rp, cb = random_case(K, N=300, M=500, density=0.02, seed=9)
    pc, pp = pins_of(rows, cols, rp, cb.size, K)
    a = set(zip(*(x.tolist() for x in dgap_successors(pc, pp, cb, K))))
    assert a == eq7(rows, cols, rp, cb, K)


def simulated_hops(rows, cols, rp, cb, strata, E):
    """Every (src, dst, col, Tx, Ty): consecutive updates of a row by different parts."""
    K = strata.K
    have = {}
    for r, c in zip(rows, cols):
        have.setdefault(int(c), set()).add(int(rp[r]))
    hops = set()
    for j, parts in have.items():
        seq = sorted((e * K + int(strata.subepoch(p, cb[j], e)), p)
                     for e in range(E) for p in parts)
        for (t0, p0), (t1, p1) in zip(seq, seq[1:]):
            if p0 != p1:
                hops.add((p0, p1, j, t0, t1))
    return hops


@pytest.mark.parametrize("kind", ["ring", "random"])
@pytest.mark.parametrize("strategy", ["p2p", "hc"])
def test_run_messages_cover_exactly_the_needed_hops(kind, strategy):
    K, E = 4, 4
    rows, cols, rp, cb = random_case(K, seed=11)
    strata = RingStrata(K, kind, seed=5)
    lay = Layout.build(rows, cols, row_parts=rp, col_blocks=cb, nparts=K)
    rp_ = RunPlan.build(lay, strata, strategy, E)
    want = simulated_hops(rows, cols, rp, cb, strata, E)
    got = set()
    inst = rp_.instances
    for q, m, e, ts in zip(inst.pattern, inst.message, inst.epoch, inst.send):
        pat = rp_.patterns[q]
        for sg in range(pat.seg_ptr[m], pat.seg_ptr[m + 1]):
            Ty = e * K + pat.seg_ty[sg]
            if Ty >= E * K:
                continue
            for j in rp_.segment_rows(q, sg).tolist():
                got.add((int(pat.src[m]), int(pat.dst[m]), j, int(Ty), int(ts)))
    # Each needed hop arrives once, sent no earlier than the update and before the use.
    by_hop = {(s, d, j, ty): ts for s, d, j, ty, ts in got}
    assert len(by_hop) == len(got)
    assert {(s, d, j, t1) for s, d, j, t0, t1 in want} == set(by_hop)
    for s, d, j, t0, t1 in want:
        assert t0 <= by_hop[(s, d, j, t1)] < t1
