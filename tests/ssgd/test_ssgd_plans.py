"""Epoch plans: exact counts on a hand case, the paper code's counts, ml-latest-small bounds."""

from __future__ import annotations

import math

import ssgd_reference
import numpy as np
import pytest

from daskhpc.hypergraph import write_pair_file
from daskhpc.ssgd import plan
from daskhpc.ssgd._plan import Layout, epoch_pattern, send_times
from daskhpc.ssgd._strata import RingStrata

# The hand case (K = 3, columns in blocks [0, 0, 1, 1, 2, 2], row i in part i):
#   row 0: columns 0 1 2 3 4    row 1: columns 0 2 3    row 2: columns 1 2 5
# Updaters: c0 {0,1}, c1 {0,2}, c2 {0,1,2}, c3 {0,1}; c4, c5 one each (never move).
# Part p updates block (p + k) mod 3 in sub-epoch k; the next updater after p is p-1.
HAND_ROWS = [0, 0, 0, 0, 0, 1, 1, 1, 2, 2, 2]
HAND_COLS = [0, 1, 2, 3, 4, 0, 2, 3, 1, 2, 5]


def hand_layout():
    return Layout.build(np.array(HAND_ROWS), np.array(HAND_COLS),
                        row_parts=np.array([0, 1, 2]), col_blocks=np.array([0, 0, 1, 1, 2, 2]),
                        nparts=3)


def messages(pat):
    out = {}
    for m in range(pat.num_messages):
        lo, hi = pat.col_ptr[pat.seg_ptr[m]], pat.col_ptr[pat.seg_ptr[m + 1]]
        out[(int(pat.ts[m]) % 3, int(pat.src[m]), int(pat.dst[m]))] = sorted(pat.cols[lo:hi].tolist())
    return out


def test_hand_case_p2p_messages_and_metrics():
    pat = epoch_pattern(hand_layout(), RingStrata(3), "p2p")
    # (sub-epoch sent after, src, dst) -> rows; derived by hand in the comment above.
    assert messages(pat) == {(0, 0, 1): [0], (0, 0, 2): [1], (1, 0, 2): [2], (1, 0, 1): [3],
                             (2, 1, 0): [0], (0, 1, 0): [2, 3], (1, 2, 0): [1], (2, 2, 1): [2]}
    r = pat.plan(rank=16).report()
    assert (r["tot_vol"], r["tot_msgs"]) == (9, 8)
    assert (r["sum_max_vol"], r["max_max_vol"]) == (5, 2)
    assert (r["sum_max_msgs"], r["max_max_msgs"], r["max_msgs"]) == (5, 2, 4)
    assert r["planned_bytes"] == 9 * 16 * 8


def test_hand_case_hold_and_combine_merges_a_window():
    pat = epoch_pattern(hand_layout(), RingStrata(3), "hc")
    # 0 -> 1 is at distance 2: the rows 0 updated in sub-epochs 0 and 1 (c0, c3) leave
    # together after sub-epoch 1; 1 -> 0 (distance 1) still sends every sub-epoch.
    assert messages(pat) == {(1, 0, 1): [0, 3], (0, 1, 0): [2, 3], (2, 1, 0): [0],
                             (0, 0, 2): [1], (1, 2, 0): [1], (1, 0, 2): [2], (2, 2, 1): [2]}
    r = pat.plan(rank=16).report()
    assert (r["tot_vol"], r["tot_msgs"]) == (9, 7)
    assert (r["sum_max_vol"], r["max_max_vol"]) == (6, 3)
    assert (r["sum_max_msgs"], r["max_max_msgs"]) == (4, 2)


def test_hand_case_dsgd():
    r = epoch_pattern(hand_layout(), RingStrata(3), "dsgd").plan(rank=16).report()
    assert (r["tot_vol"], r["tot_msgs"], r["sum_max_vol"], r["max_max_vol"]) == (18, 9, 6, 2)
    assert (r["sum_max_msgs"], r["max_max_msgs"]) == (3, 1)


def test_window_rule_is_the_public_codes():
    # smart_schedule_msg_send for every (px, py, sub-epoch) of K = 6 and a few seeds.
    K = 6
    for seed in (0, 2):
        s = RingStrata(K, ring_seed=seed)
        for px in range(K):
            for py in range(K):
                if px == py:
                    continue
                d = s.distance(px, py)
                tx = np.arange(K)
                ours = send_times("hc", tx, tx + d, K) % K
                # Algorithm 3: held rows leave in the last sub-epoch of their window of d
                ref = [((i // d) * d + d - 1) % K for i in tx]
                assert ours.tolist() == ref


@pytest.mark.parametrize("K", [2, 3, 4, 5, 8])
@pytest.mark.parametrize("strategy,comm_type", [("dsgd", 0), ("p2p", 1), ("hc", 3)])
def test_counts_match_brute_force_for_the_same_partition_file(tmp_path, K, strategy, comm_type):
    rng = np.random.default_rng(K)
    N, M = 40, 30
    dense = rng.random((N, M)) < 0.15
    dense[np.arange(N), rng.integers(M, size=N)] = True      # no empty row
    dense[rng.integers(N, size=M), np.arange(M)] = True      # no empty column
    rows, cols = np.nonzero(dense)
    rp, cp = rng.integers(K, size=N), rng.integers(K, size=M)
    pfile = tmp_path / "parts.txt"
    write_pair_file(pfile, rp, cp)
    rep = plan((rows, cols, np.ones(rows.size), (N, M)), K, strategy=strategy,
               partition_file=pfile, test_fraction=0.0)["plan"]
    mm_msg, sm_msg, tot_msg, mm_vol, sm_vol, tot_vol = ssgd_reference.counts(rows, cols, rp, cp,
                                                                             K, comm_type)
    ours = (rep["max_max_msgs"], rep["sum_max_msgs"], rep["tot_msgs"], rep["max_max_vol"],
            rep["sum_max_vol"], rep["tot_vol"])
    assert ours == (mm_msg, sm_msg, tot_msg, mm_vol, sm_vol, tot_vol)


@pytest.mark.parametrize("strategy,comm_type", [("dsgd", 0), ("p2p", 1), ("hc", 3)])
def test_biased_counts_and_words_match_brute_force(tmp_path, strategy, comm_type):
    # K = 4: the biased model moves the same rows in the same messages, each one word
    # longer (its bias); the words are counted independently, per row.
    K, F = 4, 8
    rng = np.random.default_rng(K)
    N, M = 40, 30
    dense = rng.random((N, M)) < 0.15
    dense[np.arange(N), rng.integers(M, size=N)] = True
    dense[rng.integers(N, size=M), np.arange(M)] = True
    rows, cols = np.nonzero(dense)
    rp, cp = rng.integers(K, size=N), rng.integers(K, size=M)
    pfile = tmp_path / "parts.txt"
    write_pair_file(pfile, rp, cp)
    rep = plan((rows, cols, np.ones(rows.size), (N, M)), K, strategy=strategy, rank=F,
               partition_file=pfile, test_fraction=0.0, biased=True)["plan"]
    mm_msg, sm_msg, tot_msg, mm_vol, sm_vol, tot_vol = ssgd_reference.counts(rows, cols, rp, cp,
                                                                             K, comm_type)
    assert (rep["max_max_msgs"], rep["sum_max_msgs"], rep["tot_msgs"], rep["max_max_vol"],
            rep["sum_max_vol"], rep["tot_vol"]) == (mm_msg, sm_msg, tot_msg, mm_vol, sm_vol,
                                                    tot_vol)
    assert rep["words_per_unit"] == F + 1
    words = ssgd_reference.words(rows, cols, rp, cp, K, comm_type, F, biased=True)
    assert words == ssgd_reference.words(rows, cols, rp, cp, K, comm_type, F) + tot_vol
    assert rep["planned_bytes"] == 8 * words


def test_plan_report_max_max_vol_is_the_paper_metric():
    # Section VI: max-max vol = max over sub-epochs of the largest per-part send volume;
    # Plan.report computes it per phase, and our phase is the sub-epoch.
    lay = hand_layout()
    pat = epoch_pattern(lay, RingStrata(3), "hc")
    per = np.zeros((3, 3), int)                                 # [sub-epoch, part]
    for m, vol in enumerate(pat.volume()):
        per[pat.ts[m] % 3, pat.src[m]] += vol
    r = pat.plan().report()
    assert r["max_max_vol"] == per.max(axis=1).max()
    assert r["sum_max_vol"] == per.max(axis=1).sum()
    assert r["phases"] == 3


@pytest.fixture(scope="module")
def ml_reports(ml_small):
    # One partition per (K, rows); the three strategies share it (as ``plan`` would).
    from daskhpc.ssgd._setup import prepare

    out = {}
    for K in (2, 4, 8):
        for part in ("random", "hp"):
            s = prepare(ml_small, K, partition=part, test_fraction=0.0, epochs=1)
            for st in ("dsgd", "p2p", "hc"):
                out[(K, part, st)] = epoch_pattern(s.layout, s.strata, st).plan(16).report()
    return out


@pytest.mark.parametrize("K", [2, 4, 8])
def test_ml_small_bounds(ml_reports, K):
    r = ml_reports
    for part in ("random", "hp"):
        dsgd, p2p, hc = (r[(K, part, s)] for s in ("dsgd", "p2p", "hc"))
        assert dsgd["tot_vol"] == 9724 * K
        assert p2p["tot_vol"] < dsgd["tot_vol"] and hc["tot_vol"] < dsgd["tot_vol"]
        assert hc["tot_vol"] == p2p["tot_vol"]                 # H&C only regroups rows
        assert hc["tot_msgs"] <= p2p["tot_msgs"]
        assert hc["max_msgs"] <= K * math.log2(K)             # per part per epoch (eq. 12)
    for st in ("p2p", "hc"):
        assert r[(K, "hp", st)]["tot_vol"] < r[(K, "random", st)]["tot_vol"]


def test_ml_small_exact_counts_pinned(ml_reports):
    # Regression pins (seed 0, full matrix, fixed ring seed 0).
    r = ml_reports[(8, "random", "p2p")]
    h = ml_reports[(8, "random", "hc")]
    assert (r["tot_vol"], r["tot_msgs"], h["tot_msgs"]) == (29653, 448, 184)
