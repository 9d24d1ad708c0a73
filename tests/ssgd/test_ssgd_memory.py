"""What the client holds for SSGD, counted: a random partition builds no nets, and a
collection's ratings are placeholders of no memory on the client."""

from __future__ import annotations

import tracemalloc

import numpy as np
import scipy.sparse as sp

from daskhpc.hypergraph import column_net, partition
from daskhpc.ssgd import prepare
from daskhpc.ssgd._assign import assign, row_weights
from daskhpc.ssgd._data import Ratings, placeholder, split
from daskhpc.testing import traced


def ratings(nnz=200_000, n=4_000, m=1_000, seed=0) -> Ratings:
    rng = np.random.default_rng(seed)
    key = np.sort(rng.choice(np.unique(rng.integers(0, n * m, int(nnz * 1.2))), nnz,
                             replace=False))
    return Ratings(key // m, key % m, rng.integers(1, 11, key.size) / 2.0, (n, m))


def test_random_rows_are_those_of_the_column_net_model():
    r = ratings(20_000, 500, 200)
    for K, seed in ((2, 0), (5, 3)):
        full = column_net(sp.coo_array((r.vals, (r.rows, r.cols)), shape=r.shape), 16)
        a = assign(r, K, partition="random", seed=seed, rank=16)
        assert np.array_equal(a.row_parts, partition(full, K, "random", seed=seed).parts)
    h = row_weights(r, 16)
    assert h.num_pins == 0 and h.vertex_weights.sum() == r.nnz


def test_a_random_partition_allocates_no_pins():
    r = ratings()
    assign(r, 4, partition="random", seed=1)     # kernels compiled outside the count
    with traced() as t:
        assign(r, 4, partition="random", seed=1)
    peak = t.peak
    # the nets alone would be 8 bytes a rating (int64 pins), their CSC conversion more;
    # what is left is per row (weights, order, parts) and per column (blocks)
    assert peak < 2 * r.nnz, peak
    assert peak < 64 * (r.shape[0] + r.shape[1]) + 65536, peak


def test_placeholder_ratings_stay_placeholders():
    r = ratings(50_000)
    r = Ratings(r.rows, r.cols, placeholder(r.nnz), r.shape)
    assert r.vals.strides == (0,) and r.nnz == 50_000
    train, test = split(r, 0.1, seed=2)
    for part in (train, test):
        assert part.vals.strides == (0,) and part.vals.size == part.nnz
        assert not part.vals.any()
    assert train.nnz + test.nnz == r.nnz
    # a real array is still copied in as float64
    assert Ratings([0], [0], [4], (1, 1)).vals.dtype == np.float64


def test_prepare_on_placeholders_copies_no_values():
    r = ratings(100_000)
    ph = Ratings(r.rows, r.cols, placeholder(r.nnz), r.shape)
    prepare(ph, 2, partition="random", epochs=1, test_fraction=0.1)   # kernels compiled
    with traced() as t:
        s = prepare(ph, 2, partition="random", epochs=1, test_fraction=0.1)
    with_ph = t.peak
    assert s.train.vals.strides == (0,) and s.test.vals.strides == (0,)
    with traced() as t:
        prepare(r, 2, partition="random", epochs=1, test_fraction=0.1)
    real = t.peak
    # the values of train and test (8 bytes a rating) are not made
    assert real - with_ph > 6 * r.nnz, (real, with_ph)


def test_part_data_holds_32_bit_local_rows():
    from daskhpc.ssgd._parts import part_data

    r = ratings(30_000, 600, 300)
    s = prepare(r, 3, partition="random", epochs=1, test_fraction=0.1)
    datas = [part_data(s, p) for p in range(s.K)]
    held = sum(b.nbytes for d in datas for b in d.bli + d.blj)
    assert sum(b.size for d in datas for b in d.bli) == s.train.nnz
    assert held == 8 * s.train.nnz                  # 4 bytes a row and 4 a column
    assert all(b.dtype == np.int32 for d in datas for b in d.bli + d.blj)


def test_a_frame_leaves_its_ratings_and_ids_on_the_workers(client2, tmp_path):
    """From Parquet files read by the workers, the split, partition, plans and part data
    allocate per row and column on the client, not per rating (the path that gathered
    the ids held 50+ bytes a rating)."""
    import dask.dataframe as dd
    import pandas as pd

    from daskhpc.ssgd._collect import read_input
    from daskhpc.ssgd._parts import part_data

    def frame(r, name, parts):
        for k, sel in enumerate(np.array_split(np.arange(r.nnz), parts)):
            pd.DataFrame({"u": r.rows[sel], "i": r.cols[sel], "r": r.vals[sel]}).to_parquet(
                tmp_path / f"{name}-{k}.parquet")
        return dd.read_parquet(sorted(map(str, tmp_path.glob(f"{name}-*.parquet"))))

    def run(data):
        inp = read_input(client2, data)
        try:
            s = prepare(inp, 2, partition="random", epochs=1, test_fraction=0.1)
            return s, [part_data(s, p, [0, 1]) for p in range(s.K)]
        finally:
            inp.values.release()

    run(frame(ratings(5_000, 400, 100), "warm", 2))     # imports and compilations first
    r = ratings(300_000, 3_000, 500)
    data = frame(r, "big", 4)
    tracemalloc.start()
    try:
        s, datas = run(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert s.train.on_workers and s.train.nnz + s.test.nnz == r.nnz
    assert all(b is None for d in datas for b in d.bli)       # made on the part's worker
    assert np.diff(s.blocks()).sum() == s.train.nnz
    # measured 5.5 bytes a rating here, mostly fixed (Dask's messages, the part data);
    # one copy of the ids (int64) on the client would be 16
    assert peak < 8 * r.nnz, peak


def test_parts_hold_32_bit_ids_and_ratings_where_they_keep_every_value():
    from daskhpc.ssgd._collect import with_values
    from daskhpc.ssgd._parts import part_data, part_values

    def part_data_with_values(s, p):
        return with_values(part_data(s, p), part_values(s, p))

    r = ratings(20_000, 800, 300)               # half stars: float32 keeps them
    s = prepare(r, 2, partition="random", epochs=1, test_fraction=0.1)
    held = 0
    for p in range(2):
        d = part_data_with_values(s, p)
        for b in range(2):
            assert d.bli[b].dtype == d.blj[b].dtype == np.int32
            assert d.bval[b].dtype == np.float32
            held += d.bli[b].nbytes + d.blj[b].nbytes + d.bval[b].nbytes
        assert d.test_val.dtype == np.float32
    # 12 bytes a training rating on the workers (int64 ids and float64: 24)
    assert held == 12 * s.train.nnz
    odd = Ratings(r.rows, r.cols, r.vals + 0.1, r.shape)     # not float32 numbers
    d = part_data_with_values(prepare(odd, 2, partition="random", epochs=1), 0)
    assert d.bval[0].dtype == np.float64 and d.bli[0].dtype == np.int32


def test_a_parts_ids_and_values_are_made_apart():
    from daskhpc.ssgd._collect import with_values
    from daskhpc.ssgd._parts import part_data, part_values

    r = ratings(1_000_000, 20_000, 2_000)
    r = Ratings(r.rows.astype(np.int32), r.cols.astype(np.int32), r.vals.astype(np.float32),
                r.shape)
    s = prepare(r, 2, partition="random", epochs=1, test_fraction=0.1)
    part_values(s, 0), part_data(s, 0)                 # imports first
    n, n_test = int(np.diff(s.blocks())[:2].sum()), s.test_of(0).size
    with traced() as t:
        d = part_data(s, 0)
    # the ids: 8 bytes a training rating, 12 a test rating (its columns' int64 search),
    # and per row and column; with the values it was 12 and 16
    assert all(v is None for v in d.bval) and d.test_val is None
    assert t.held < 8 * n + 12 * n_test + 32 * sum(s.train.shape), t.held
    with traced() as t:
        vals = part_values(s, 0)
    assert t.held < 4 * (n + n_test) + 4_096, t.held
    full = with_values(d, vals)
    for b, want in enumerate(s.block_ratings(0)[2]):
        assert np.array_equal(full.bval[b], want)
    assert np.array_equal(full.test_val, s.test.vals[s.test_of(0)])


def test_32_bit_ratings_give_the_same_numbers():
    from daskhpc._narrow import narrow_values
    from daskhpc.ssgd._data import mean_of
    from daskhpc.ssgd._serial import value_quality
    from daskhpc.ssgd._setup import Options

    r = ratings(30_000, 900, 400)
    v32 = narrow_values(r.vals)
    assert v32.dtype == np.float32 and np.array_equal(v32, r.vals)
    assert narrow_values(r.vals + 0.1).dtype == np.float64
    assert mean_of(v32) == mean_of(r.vals) == r.mean()
    rng = np.random.default_rng(1)
    W, H = rng.random((r.shape[0], 4)), rng.random((r.shape[1], 4))
    o = Options(rank=4)
    wide = value_quality(r.rows, r.cols, r.vals, r.vals[:500], W, H, o, 0.0, (0.5, 5.0))
    narrow = value_quality(r.rows.astype(np.int32), r.cols.astype(np.int32), v32, v32[:500],
                           W, H, o, 0.0, (0.5, 5.0))
    assert wide == narrow


def test_a_collection_piece_is_32_bit_where_that_keeps_every_value():
    import pandas as pd

    from daskhpc.io._collections_ratings import _rating_piece

    df = pd.DataFrame({"u": [5, 7, 5], "i": [1, 1, 2], "r": [4.5, 3.0, 0.5]})
    umap, imap = np.array([5, 7]), np.array([1, 2])
    ids, vals, missing = _rating_piece(df, ["u", "i", "r"], umap, imap)
    assert ids.dtype == np.int32 and vals.dtype == np.float32 and missing == [False, False]
    assert ids.tolist() == [[0, 1, 0], [0, 0, 1]] and vals.tolist() == [4.5, 3.0, 0.5]
    df["r"] = [4.1, 3.0, 0.5]
    assert _rating_piece(df, ["u", "i", "r"], umap, imap)[1].dtype == np.float64


def test_the_keeper_gives_the_numbers_and_digests_of_64_bit_ratings():
    from daskhpc.ssgd._collect import _keeper_stats

    r = ratings(5_000, 300, 100)
    ids = np.stack([r.rows, r.cols])
    mask = np.zeros(r.nnz, bool)
    mask[::7] = True
    wide = _keeper_stats((ids, r.vals), None, mask, r.shape)
    narrow = _keeper_stats((ids.astype(np.int32), r.vals.astype(np.float32)), None, mask,
                           r.shape)
    assert wide == narrow and wide["repeat"] is None
    assert wide["ntrain"] == r.nnz - mask.sum()


def write_csv(r: Ratings, path) -> str:
    with open(path, "w") as f:
        f.write("userId,movieId,rating\n")
        f.writelines(f"{u},{i},{v:g}\n" for u, i, v in zip(r.rows * 3 + 1, r.cols + 7, r.vals))
    return str(path)


def test_a_file_is_read_as_32_bit_triplets_without_a_matrix(tmp_path, monkeypatch):
    from daskhpc import _narrow
    from daskhpc.ssgd._input import load

    r = ratings(1_000_000, 20_000, 2_000)
    path = write_csv(r, tmp_path / "r.csv")
    load(path)                                   # imports first
    monkeypatch.setattr(_narrow.counts, "__defaults__", (1 << 14,))   # chunks of counts
    with traced() as t:
        inp = load(path)
    held, peak = t.held, t.peak
    t = inp.ratings
    assert (t.rows.dtype, t.cols.dtype, t.vals.dtype) == (np.int32, np.int32, np.float32)
    assert np.array_equal(t.vals, r.vals) and t.order == "file"
    # 12 bytes a rating held (the reader's int64 triplets and CSR matrix were 36 more);
    # at the peak a 32-bit key a rating more (the repeated-pair check, compared a block
    # at a time) or a dense id column's lookup (ids shifted in place), and a block of the
    # file (its line count); empty rows and columns counted without int64 ids (8 more)
    assert 12 * r.nnz <= held < 13 * r.nnz, held
    assert peak < 17 * r.nnz + (1 << 20), peak
    assert inp.ratings.nnz == r.nnz and inp.file_shape == r.shape


def test_a_files_split_is_a_reordering_not_a_copy(tmp_path):
    from daskhpc.ssgd._data import holdout_mask, wide_digest
    from daskhpc.ssgd._input import load

    r = ratings(1_000_000, 20_000, 2_000)
    inp = load(write_csv(r, tmp_path / "r.csv"))
    file_order = [a.copy() for a in (inp.ratings.rows, inp.ratings.cols, inp.ratings.vals)]
    holdout_mask(20_000, 0.1, 0)                 # its kernel compiled first
    with traced() as t:
        train, test = split(inp.ratings, 0.1, seed=3)
    held = t.held
    assert held < 2 * r.nnz, held                   # views: no 12 bytes a rating
    whole = (inp.ratings.rows, inp.ratings.cols, inp.ratings.vals)
    for part in (train, test):
        assert all(np.shares_memory(a, b) for a, b in
                   zip((part.rows, part.cols, part.vals), whole))
    is_test = holdout_mask(r.nnz, 0.1, 3)
    for a, part_a in zip(file_order, ("rows", "cols", "vals")):
        assert np.array_equal(getattr(train, part_a), a[~is_test])
        assert np.array_equal(getattr(test, part_a), a[is_test])
    # the checkpoint digest is still of file order (and of 64-bit numbers)
    assert inp.ratings.digest() == wide_digest(*file_order)
    again = split(inp.ratings, 0.1, seed=3)          # the same split: the same views
    assert np.shares_memory(again[0].rows, train.rows)
    other = split(inp.ratings, 0.2, seed=3)          # another one: copies, file order kept
    assert not np.shares_memory(other[0].rows, train.rows)
    assert other[1].nnz == round(0.2 * r.nnz)
    given = ratings(1_000)                           # the caller's arrays are not reordered
    rows = given.rows.copy()
    split(given, 0.1, seed=0)
    assert np.array_equal(given.rows, rows)


def test_a_parts_blocks_are_made_a_chunk_at_a_time_without_positions(monkeypatch):
    from daskhpc.ssgd import _setup

    r = ratings(2_000_000, 40_000, 10_000)
    r = Ratings(r.rows.astype(np.int32), r.cols.astype(np.int32), r.vals.astype(np.float32),
                r.shape)                                # a file's 12 bytes a rating
    s = prepare(r, 3, partition="random", epochs=1, test_fraction=0.1)
    t, a = s.train, s.assignment
    stable = np.argsort(a.row_parts[t.rows] * 3 + a.col_blocks[t.cols], kind="stable")
    monkeypatch.setattr(_setup, "BLOCKS_CHUNK", 4_096)
    s._blocks = None
    with traced() as m:
        ptr = s.blocks()
    assert m.peak < 40 * 4_096 and ptr[-1] == t.nnz, m.peak   # a chunk's keys, no more
    with traced() as m:
        got = s.block_ratings(1)
    held, peak = m.held, m.peak
    n = int(ptr[6] - ptr[3])
    for b in range(3):
        sel = stable[ptr[3 + b]:ptr[4 + b]]
        for x, whole in zip(got, (t.rows, t.cols, t.vals)):
            assert x[b].dtype == whole.dtype and np.array_equal(x[b], whole[sel])
    # the part's 12 bytes a rating, and a chunk's (measured: 32 bytes a chunk's rating);
    # the blocks' positions were 4 bytes a rating of the whole matrix on top
    assert 12 * n <= held < 12 * n + 16_384, held
    assert peak < 12 * n + 48 * 4_096 + 16_384 < 12 * n + 4 * t.nnz, peak


def test_the_mean_of_float32_ratings_is_summed_a_chunk_at_a_time_where_exact():
    from daskhpc.ssgd._data import mean_of

    v = (np.random.default_rng(1).integers(1, 11, 2_000_000) / 2).astype(np.float32)
    wide = v.astype(np.float64)
    with traced() as t:
        got = mean_of(v, chunk=1 << 14)
    peak = t.peak
    assert got == float(wide.mean())
    # per chunk: no float64 copy of the whole (8 bytes a rating)
    assert peak < v.size, peak
    odd = np.random.default_rng(0).random(300_000).astype(np.float32) * 1e6
    odd[0] = 1e-6                                     # partial sums not exact: widened
    assert mean_of(odd, chunk=1 << 14) == float(odd.astype(np.float64).mean())


def test_value_quality_holds_a_chunk_of_terms(monkeypatch):
    from daskhpc.ssgd import _serial
    from daskhpc.ssgd._setup import Options

    rng = np.random.default_rng(2)
    n, shape = 1_000_000, (3_000, 800)
    rows, cols = (rng.integers(0, k, n).astype(np.int32) for k in shape)
    vals = (rng.integers(1, 11, n) / 2).astype(np.float32)
    W, H = rng.random((shape[0], 4)), rng.random((shape[1], 4))
    o = Options(rank=4)
    monkeypatch.setattr(_serial, "CHUNK", 8_192)
    _serial.value_quality(rows[:10], cols[:10], vals[:10], vals[:2], W, H, o, 3.0,
                          (0.5, 5.0))
    with traced() as t:
        q = _serial.value_quality(rows, cols, vals, vals[:1000], W, H, o, 3.0, (0.5, 5.0))
    peak = t.peak
    # the terms and the clipped errors of every rating would be 16 bytes a rating (a
    # chunk's are 16 bytes a chunk's)
    assert peak < 2 * n, peak
    assert np.isfinite(q["final_objective"]) and q["final_train_rmse"] > 0


def test_transient_part_data_is_sent_a_part_at_a_time_and_not_kept():
    import weakref

    from daskhpc.runtime._store import PartStore

    class Placement:
        def worker(self, p):
            return "w"

    store = PartStore(None, Placement(), "run")
    refs, sent = [], []

    def scatter(name, values):
        # the parts sent before are gone: the client holds one part's data at a time
        assert all(ref() is None for ref in refs[:-1])
        sent.append(sorted(values))
        store.futures.setdefault(name, {}).update({p: f"future-{p}" for p in values})

    def make(p):
        a = np.zeros(10)
        refs.append(weakref.ref(a))
        return a

    store._scatter = scatter
    futures = store.put_each("part", range(3), make, transient=True)
    assert futures == {p: f"future-{p}" for p in range(3)}
    assert sent == [[0], [1], [2]]
    assert store.data["part"] == {0: None, 1: None, 2: None}
    assert all(ref() is None for ref in refs)


def test_the_held_out_draw_is_numpys_without_its_64_bit_arange():
    from daskhpc.ssgd._data import holdout_mask

    for nnz, fraction, seed in ((20_000, 0.1, 0), (100_003, 0.3, 5), (50_000, 0.9, 1),
                                (300_000, 0.021, 7), (5_000, 0.5, 2), (300_000, 0.01, 3)):
        want = np.zeros(nnz, bool)
        n_test = round(fraction * nnz)
        want[np.random.default_rng([seed, 0x55D]).choice(nnz, n_test, replace=False)] = True
        assert np.array_equal(holdout_mask(nnz, fraction, seed), want), (nnz, fraction)
    holdout_mask(20_000, 0.1, 0)
    n = 2_000_000
    with traced() as t:
        mask = holdout_mask(n, 0.1, 4)
    # a 32-bit arange, its tail and a batch of draws (Generator.choice holds an int64
    # arange: 8 bytes an item)
    assert mask.sum() == n // 10 and t.peak < 4.5 * n + (1 << 20), t.peak


def test_counts_make_no_64_bit_copy():
    from daskhpc._narrow import counts

    ids = np.random.default_rng(0).integers(0, 1_000, 2_000_000).astype(np.int32)
    with traced() as t:
        got = counts(ids, 1_000, chunk=1 << 14)
    assert np.array_equal(got, np.bincount(ids, minlength=1_000))
    assert t.peak < ids.nbytes / 4, t.peak      # np.bincount's copy: 2 ids.nbytes


def test_the_seen_pattern_is_made_once_the_values_are_let_go(tmp_path, monkeypatch):
    import weakref

    import scipy.sparse as sp

    from daskhpc.ssgd._api import _named
    from daskhpc.ssgd._input import load
    from daskhpc.ssgd._result import SSGDResult

    r = ratings(50_000, 2_000, 500)
    s = prepare(load(write_csv(r, tmp_path / "r.csv")), 2, partition="random", epochs=1)
    values = weakref.ref(s.train.vals.base)
    want = sp.csr_array((np.ones(s.train.nnz, np.int8), (s.train.rows, s.train.cols)),
                        shape=s.train.shape)
    mu, made, csr = s.mu, [], sp.csr_array

    def spy(*args, **kw):
        made.append(values() is None)
        return csr(*args, **kw)

    monkeypatch.setattr(sp, "csr_array", spy)
    res = _named(SSGDResult(np.zeros((2, 2)), np.zeros((2, 2)), [], {}), s)
    assert made == [True]                  # 4 bytes a rating fewer under the pattern
    assert res.mu == mu and (res.seen != want).nnz == 0 and res.seen.has_canonical_format


def test_a_files_split_holds_a_chunk_of_a_column_at_a_time():
    from daskhpc.ssgd._data import holdout_mask

    n, rng = 4_000_000, np.random.default_rng(0)
    r = Ratings(rng.integers(0, 9_000, n).astype(np.int32), rng.integers(0, 900, n).astype(
        np.int32), (rng.integers(1, 11, n) / 2).astype(np.float32), (9_000, 900), order="file")
    kept = ~holdout_mask(n, 0.1, 3)
    want = [a[kept] for a in (r.rows, r.cols, r.vals)]
    with traced() as t:
        train, _ = split(r, 0.1, seed=3)
    # the held-out draw's 32-bit arange (numpy's choice: an int64 one, 8 bytes a rating),
    # then a chunk of a column at a time (a column's copy was 4 bytes a rating more)
    assert t.peak < 5 * n, t.peak
    assert all(np.array_equal(a, w) for a, w in zip((train.rows, train.cols, train.vals), want))
