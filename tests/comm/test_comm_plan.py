"""The Plan and its report: hand cases with every metric, validation, cost model."""

import numpy as np
import pytest

from daskhpc.comm import CostModel, Plan


def hand_plan():
    # K=3, two phases:
    #   phase 0: 0->1 [rows 4,5], 2->1 [6], 0->2 [7]
    #   phase 1: 1->0 [4], 2->0 [6, 8, 9]
    return Plan.from_messages(3, [(0, 0, 1, [4, 5]), (0, 2, 1, [6]), (0, 0, 2, [7]),
                                  (1, 1, 0, [4]), (1, 2, 0, [6, 8, 9])], words_per_unit=16)


def test_report_hand_case():
    r = hand_plan().report()
    assert r["tot_vol"] == 8
    # per-part send totals: part0 3, part1 1, part2 4
    assert r["max_vol"] == 4 and r["avg_vol"] == pytest.approx(8 / 3)
    # phase maxima: phase0 part0 sends 3; phase1 part2 sends 3
    assert r["sum_max_vol"] == 6 and r["max_max_vol"] == 3
    assert r["tot_msgs"] == 5
    # messages per part: part0 2, part1 1, part2 2; phase maxima 2 and 1
    assert r["max_msgs"] == 2 and r["sum_max_msgs"] == 3 and r["max_max_msgs"] == 2
    assert r["phases"] == 2 and r["unit"] == "rows" and r["words_per_unit"] == 16
    assert r["planned_bytes"] == 8 * 16 * 8


def test_tables():
    p = hand_plan()
    assert p.send_volume().tolist() == [[3, 0, 1], [0, 1, 3]]
    assert p.recv_volume().tolist() == [[0, 3, 1], [4, 0, 0]]
    assert p.comm_matrix().tolist() == [[0, 2, 1], [1, 0, 0], [3, 1, 0]]
    assert p.per_phase()["max_msgs"] == [2, 1]
    ph, s, d, idx = p.message(4)
    assert (ph, s, d, idx.tolist()) == (1, 2, 0, [6, 8, 9])
    assert [m[1] for m in p.messages(phase=0)] == [0, 2, 0]


def test_volume_only_plan_and_concat():
    a = Plan(2, [0, 0], [0, 1], [1, 0], volume=[5, 7], unit="nonzeros")
    b = Plan(2, [0], [1], [0], volume=[3], nphases=2, unit="nonzeros")
    c = Plan.concat([a, b])
    assert c.nphases == 3 and c.phase.tolist() == [0, 0, 1]
    assert c.report()["tot_vol"] == 15 and c.report()["sum_max_vol"] == 7 + 3 + 0
    assert c.indices is None


def test_empty_plan():
    p = Plan(4, [], [], [], volume=[], nphases=3)
    r = p.report()
    assert r["tot_vol"] == 0 and r["phases"] == 3 and r["max_max_msgs"] == 0


def test_validation():
    with pytest.raises(ValueError, match="itself"):
        Plan.from_messages(2, [(0, 1, 1, [0])])
    with pytest.raises(ValueError, match=r"\[0, 2\)"):
        Plan.from_messages(2, [(0, 0, 2, [0])])
    with pytest.raises(ValueError, match="indices"):
        Plan(2, [0], [0], [1])


def test_alpha_beta_estimate():
    p = hand_plan()
    # phase 0: part0 sends 2 msgs, 3 rows; part2 1 msg, 1 row -> part0 dominates
    # phase 1: part2 1 msg, 3 rows; part1 1 msg, 1 row
    alpha, beta = 1e-3, 1e-9
    row = 16 * 8
    expect = (2 * alpha + 3 * row * beta) + (alpha + 3 * row * beta)
    assert p.estimate_time(alpha, beta) == pytest.approx(expect)
    assert CostModel(alpha, beta).plan_time(p) == pytest.approx(expect)


def test_tokenize_is_deterministic():
    assert hand_plan().__dask_tokenize__() == hand_plan().__dask_tokenize__()


def test_expand_fold_counting_sort_match_lexsort():
    """The counting sort by (src, dst) gives the three-key sort's messages and rows, and
    ``placed`` the bundles of ``np.unique``."""
    from daskhpc.comm import expand_plan, fold_plan

    rng = np.random.default_rng(3)
    for _ in range(10):
        K, n = int(rng.integers(2, 30)), int(rng.integers(1, 400))
        sizes = rng.integers(0, K + 1, n)
        lam_ptr = np.concatenate([[0], np.cumsum(sizes)])
        lam_parts = np.concatenate([np.sort(rng.choice(K, s, replace=False)) for s in sizes])
        owner = rng.integers(0, K, n)
        row = np.repeat(np.arange(n), sizes)
        keep = lam_parts != owner[row]
        for plan, src, dst in ((expand_plan, owner[row][keep], lam_parts[keep]),
                               (fold_plan, lam_parts[keep], owner[row][keep])):
            p = plan(owner, lam_ptr, lam_parts, K)
            order = np.lexsort((row[keep], dst, src))
            assert np.array_equal(p.indices, row[keep][order])
            pairs = np.unique(src * K + dst)
            assert np.array_equal(p.src * K + p.dst, pairs)
            assert np.array_equal(p.volume, np.bincount(src * K + dst)[pairs])
            w = rng.integers(0, 3, K)
            q = p.placed(w)
            sel = w[p.src] != w[p.dst]
            key = w[p.src[sel]] * 3 + w[p.dst[sel]]
            groups, inv = np.unique(key, return_inverse=True)
            assert np.array_equal(q.src * 3 + q.dst, groups)
            assert np.array_equal(q.volume, np.bincount(inv, p.volume[sel]).astype(np.int64))
