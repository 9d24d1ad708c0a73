"""Plans against an independent count from the paper's definitions (sections 3.1, 3.2).

The count below never calls the plan code, connectivity_sets or expand/fold_plan: for
every mode n it fills a dense boolean table ``need[i, p]`` ("part p needs row i of U_n")
straight from the nonzeros:

* coarse grain (3.1): part p needs U_n(i, :) when, in some other mode m, it computes a
  nonzero whose mode-n index is i, i.e. p = mu_m(i_m);
* fine grain (3.2): part p needs U_n(i, :) (and produces a partial M_n(i, :)) when it
  holds a nonzero of slice i.

The owner mu_n(i) sends the row to every other such part (expand, Algorithm 3 line 3 /
Algorithm 4 line 5); in the fine grain those parts first send their partial rows to the
owner (fold, Algorithm 4 line 2). Messages between one pair of parts are combined.
"""

from __future__ import annotations

import numpy as np
import pytest

from daskhpc.cpals import as_tensor
from daskhpc.cpals._assign import Distribution, pairs_csr
from daskhpc.cpals._plan import iteration_plan, mode_plans

KS = [2, 4, 8, 16, 32]
METHODS = [("coarse", "hp"), ("coarse", "block"), ("fine", "hp"), ("fine", "random")]


def need_table(X, d, n):
    need = np.zeros((X.shape[n], d.nparts), dtype=bool)
    if d.grain == "fine":
        need[X.coords[n], d.nnz_parts] = True
    else:
        for m in range(X.order):
            if m != n:
                need[X.coords[n], d.owners[m][X.coords[m]]] = True
    return need


def brute_force_messages(X, d, n):
    """(src, dst, row) of the expand of mode n, one per row sent, sorted (the fold is
    the same reversed)."""
    need = need_table(X, d, n)
    owner = d.owners[n]
    rows, parts = np.nonzero(need)
    keep = parts != owner[rows]
    return _sorted(np.stack([owner[rows[keep]], parts[keep], rows[keep]], axis=1))


def plan_messages(plan):
    """(src, dst, row) of every row a plan sends, sorted."""
    per = np.diff(plan.ptr)
    return _sorted(np.stack([np.repeat(plan.src, per), np.repeat(plan.dst, per),
                             plan.indices], axis=1))


def _sorted(t):
    t = np.asarray(t, dtype=np.int64).reshape(-1, 3)
    return t[np.lexsort(t.T[::-1])]


def slow(name, K, grain, part):
    """ml-latest-small hypergraph partitions take 5-20 s each: all but fine-hp at K = 2
    (the case with many displaced rows) are slow tests."""
    if name == "mlsmall" and part == "hp" and (K >= 4 or grain == "coarse"):
        return [pytest.mark.slow]
    return []


CASES = [pytest.param(name, K, g, p, marks=slow(name, K, g, p), id=f"{name}-{g}-{p}-{K}")
         for name in ("nations", "umls", "mlsmall") for K in KS for g, p in METHODS]


@pytest.mark.parametrize("name, K, grain, part", CASES)
def test_plan_equals_the_brute_force_count(setup_of, name, K, grain, part):
    s = setup_of(name, K, grain, part)
    X, d = s.tensor, s.dist
    tot = 0
    for n, mp in enumerate(s.plans):
        want = brute_force_messages(X, d, n)
        assert np.array_equal(plan_messages(mp["expand"]), want)
        pairs = np.unique(want[:, :2], axis=0)
        assert mp["expand"].num_messages == len(pairs)        # one message per pair
        per_part = np.bincount(mp["expand"].src, minlength=K)
        if grain == "fine":
            # fold = expand reversed: the same rows, each message in the other direction
            assert np.array_equal(plan_messages(mp["fold"]), _sorted(want[:, [1, 0, 2]]))
            assert mp["fold"].num_messages == len(pairs)
            per_part = per_part + np.bincount(mp["fold"].src, minlength=K)
            assert per_part.max() <= 2 * (K - 1)
            tot += 2 * len(want)
        else:
            assert mp["fold"] is None
            assert per_part.max() <= K - 1
            tot += len(want)
    r = s.iteration_plan().report()
    assert r["tot_vol"] == tot
    assert r["unit"] == "rows" and r["words_per_unit"] == s.R
    assert r["phases"] == (2 if grain == "fine" else 1) * X.order
    assert r["planned_bytes"] == tot * s.R * 8


@pytest.mark.parametrize("name, K, grain, part", [c for c in CASES if c.values[2] == "fine"])
def test_fine_grain_volume_is_twice_km1_plus_displaced_rows(setup_of, name, K, grain, part):
    from daskhpc.cpals._plan import partition_section

    s = setup_of(name, K, grain, part)
    X, d = s.tensor, s.dist
    km1 = displaced = 0
    for n in range(X.order):
        need = need_table(X, d, n)
        lam = need.sum(axis=1)
        km1 += int(np.maximum(lam - 1, 0).sum())
        own_in = need[np.arange(X.shape[n]), d.owners[n]]
        displaced += int(np.count_nonzero((lam > 0) & ~own_in))
    assert s.iteration_plan().report()["tot_vol"] == 2 * (km1 + displaced)
    sec = partition_section(X, d, s.plans, 0.03)
    assert (sec["km1"], sec["displaced_rows"]) == (km1, displaced)
    # the fine-grain load: every part processes its nonzeros in every mode; hp respects
    # KaHyPar's bound (1 + eps) ceil(nnz / K), random is balanced to one nonzero
    load = np.bincount(d.nnz_parts, minlength=K)
    bound = np.floor(1.03 * np.ceil(X.nnz / K)) if part == "hp" else np.ceil(X.nnz / K)
    assert load.max() <= bound


def test_paper_figure_1_toy():
    """Nonzeros (1,2,3), (2,3,1), (3,1,2); mu_A = 0, mu_B = 1, mu_C = 2: every row of
    every mode goes to the two other parts, 3 x 3 x 2 = 18 rows per iteration; none
    when one part owns everything."""
    X = as_tensor(([[0, 1, 2], [1, 2, 0], [2, 0, 1]], [1.0, 1.0, 1.0], (3, 3, 3)))
    fig1 = Distribution("coarse", "given", 3, [np.full(3, p) for p in range(3)])
    r = iteration_plan(X, fig1, rank=10).report()
    assert (r["tot_vol"], r["tot_msgs"], r["max_msgs"]) == (18, 6, 2)
    assert plan_messages(mode_plans(X, fig1, 10)[0]["expand"]).tolist() == \
        [[0, 1, 0], [0, 1, 1], [0, 1, 2], [0, 2, 0], [0, 2, 1], [0, 2, 2]]
    alone = Distribution("coarse", "given", 3, [np.zeros(3, np.int64)] * 3)
    assert iteration_plan(X, alone, rank=10).report()["tot_vol"] == 0


def _hp_slow(name, K, grain="fine"):
    return slow(name, K, grain, "hp")


@pytest.mark.parametrize("name, K", [pytest.param(n, K, marks=_hp_slow(n, K))
                                     for n in ("umls", "mlsmall") for K in KS])
def test_fine_hp_moves_at_most_half_of_fine_random(setup_of, name, K):
    hp = setup_of(name, K, "fine", "hp").iteration_plan().report()["tot_vol"]
    rnd = setup_of(name, K, "fine", "random").iteration_plan().report()["tot_vol"]
    assert hp <= 0.5 * rnd


@pytest.mark.parametrize("name, K", [pytest.param(n, K, marks=_hp_slow(n, K, "coarse"))
                                     for n in ("nations", "umls", "mlsmall") for K in KS])
def test_coarse_hp_km1_is_the_volume_and_beats_block(setup_of, name, K):
    hp = setup_of(name, K, "coarse", "hp")
    vol = hp.iteration_plan().report()["tot_vol"]
    assert hp.dist.km1 == vol          # km1 of the coarse hypergraph = rows per iteration
    assert vol <= setup_of(name, K, "coarse", "block").iteration_plan().report()["tot_vol"]


def test_block_slices_have_about_equal_nonzeros(tensor):
    from daskhpc.cpals._assign import distribute

    X = tensor("mlsmall")
    d = distribute(X, 4, grain="coarse", partition="block")
    for n in range(2):                            # 610 users, 9724 movies: fine enough
        owners = d.owners[n]
        assert np.all(np.diff(owners) >= 0)       # consecutive ranges
        load = d.loads(X, n)
        heaviest = np.bincount(X.coords[n]).max()
        assert load.max() - load.min() <= 2 * heaviest


def test_modes_table_matches_the_plans(setup_of):
    from daskhpc.cpals._plan import mode_table

    s = setup_of("umls", 8, "fine", "random")
    rows = mode_table(s.tensor, s.dist, s.plans)
    for n, row in enumerate(rows):
        mp = s.plans[n]
        vol = np.bincount(mp["fold"].src, mp["fold"].volume, 8) + \
            np.bincount(mp["expand"].src, mp["expand"].volume, 8)
        assert row["vol_max"] == vol.max() and row["vol_avg"] == pytest.approx(vol.mean())
        assert row["load_max"] == np.bincount(s.dist.nnz_parts).max()
    assert sum(r["vol_total"] for r in rows) == s.iteration_plan().report()["tot_vol"]


@pytest.mark.parametrize("grain", ["fine", "coarse"])
def test_label_propagation_starts_from_the_block_partition(tensor, monkeypatch, grain):
    """Where `auto` gives up on Mt-KaHyPar (forced here on UMLS), hp refines the grain's
    block partition, so it never moves more rows than that start."""
    from daskhpc.cpals._assign import Distribution, coarse_block, distribute, fine_start
    from daskhpc.hypergraph import _auto

    monkeypatch.setattr(_auto, "DETERMINISTIC_WORK", 0.0)
    monkeypatch.setattr(_auto, "MTKAHYPAR_WORK", 0.0)
    X, K = tensor("umls"), 8
    d = distribute(X, K, grain=grain, partition="hp")
    assert d.partitioner == "lp" and "block partition" in d.choice["rule"]
    if grain == "fine":
        from daskhpc import hypergraph as hg

        start = Distribution("fine", "start", K, [], fine_start(X, K))
        h = hg.tensor_fine((X.coords, X.shape))
        km1 = [hg.metrics(h, p, K)["km1"] for p in (d.nnz_parts, start.nnz_parts)]
        assert km1[0] <= km1[1]
        assert np.bincount(d.nnz_parts).max() <= np.floor(1.03 * np.ceil(X.nnz / K))
    else:
        offsets = np.cumsum([0, *X.shape])
        parts = coarse_block(X, K)
        block = Distribution("coarse", "block", K, [parts[offsets[m]:offsets[m + 1]]
                                                    for m in range(3)])
        assert iteration_plan(X, d, 10).report()["tot_vol"] <= \
            iteration_plan(X, block, 10).report()["tot_vol"]


@pytest.mark.parametrize("nrows, nparts, entries", [(40, 3, 500), (40, 130, 500),
                                                    (5000, 3, 50), (3000, 200, 50)])
def test_row_part_sets_by_bits_and_by_sort_equal_the_sets(nrows, nparts, entries):
    """pairs_csr takes a bit per (row, part) when that is smaller than sorting the pairs
    (the first two cases) and a counting sort otherwise (the last two): both give
    every row's distinct parts ascending."""
    rng = np.random.default_rng(nparts)
    rows, parts = rng.integers(0, nrows, entries), rng.integers(0, nparts, entries)
    ptr, got = pairs_csr(rows, parts, nrows, nparts)
    want = [sorted(set(parts[rows == i].tolist())) for i in range(nrows)]
    assert [got[ptr[i]:ptr[i + 1]].tolist() for i in range(nrows)] == want


@pytest.mark.parametrize("grain, part", [("fine", "random"), ("coarse", "block")])
def test_an_iteration_pays_a_floor_a_step_of_its_program(setup_of, grain, part):
    from daskhpc.comm import CostModel
    from daskhpc.cpals._layouts import iteration_cost
    from daskhpc.cpals._program import program

    s = setup_of("umls", 4, grain, part, iters=2, tol=0)
    # nothing costs but the floor: the program's steps of one iteration (2 iterations
    # and the final reported step), N (L + 1) fine, N L coarse, L = 2 rounds at K = 4
    c = iteration_cost(s, CostModel(alpha=0.0, beta=0.0, flop_s=0.0, dense_flop_s=0.0,
                                    floor_s=1.0))
    assert c.seconds == (program(s).nsteps - 1) / 2 == s.N * (3 if grain == "fine" else 2)
    # the loads at the dense rate, none at the sparse one
    assert iteration_cost(s, CostModel(alpha=0.0, beta=0.0, flop_s=1.0,
                                       dense_flop_s=0.0)).seconds == 0.0
