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
    tracemalloc.start()
    try:
        assign(r, 4, partition="random", seed=1)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
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
    tracemalloc.start()
    try:
        s = prepare(ph, 2, partition="random", epochs=1, test_fraction=0.1)
        with_ph = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert s.train.vals.strides == (0,) and s.test.vals.strides == (0,)
    tracemalloc.start()
    try:
        prepare(r, 2, partition="random", epochs=1, test_fraction=0.1)
        real = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # the values of train and test (8 bytes a rating) are not made
    assert real - with_ph > 6 * r.nnz, (real, with_ph)


def test_part_data_holds_32_bit_local_rows():
    from daskhpc.ssgd._parts import all_part_data

    r = ratings(30_000, 600, 300)
    s = prepare(r, 3, partition="random", epochs=1, test_fraction=0.1)
    datas = all_part_data(s)
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
    from daskhpc.ssgd._parts import all_part_data

    def frame(r, name, parts):
        for k, sel in enumerate(np.array_split(np.arange(r.nnz), parts)):
            pd.DataFrame({"u": r.rows[sel], "i": r.cols[sel], "r": r.vals[sel]}).to_parquet(
                tmp_path / f"{name}-{k}.parquet")
        return dd.read_parquet(sorted(map(str, tmp_path.glob(f"{name}-*.parquet"))))

    def run(data):
        inp = read_input(client2, data)
        try:
            s = prepare(inp, 2, partition="random", epochs=1, test_fraction=0.1)
            return s, all_part_data(s, [0, 1])
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
    assert np.diff(s.blocks()[0]).sum() == s.train.nnz
    # measured 5.5 bytes a rating here, mostly fixed (Dask's messages, the part data);
    # one copy of the ids (int64) on the client would be 16
    assert peak < 8 * r.nnz, peak


def test_parts_hold_32_bit_ids_and_ratings_where_they_keep_every_value():
    from daskhpc.ssgd._parts import part_data

    r = ratings(20_000, 800, 300)               # half stars: float32 keeps them
    s = prepare(r, 2, partition="random", epochs=1, test_fraction=0.1)
    held = 0
    for p in range(2):
        d = part_data(s, p)
        for b in range(2):
            assert d.bli[b].dtype == d.blj[b].dtype == np.int32
            assert d.bval[b].dtype == np.float32
            held += d.bli[b].nbytes + d.blj[b].nbytes + d.bval[b].nbytes
        assert d.test_val.dtype == np.float32
    # 12 bytes a training rating on the workers (int64 ids and float64: 24)
    assert held == 12 * s.train.nnz
    odd = Ratings(r.rows, r.cols, r.vals + 0.1, r.shape)     # not float32 numbers
    d = part_data(prepare(odd, 2, partition="random", epochs=1), 0)
    assert d.bval[0].dtype == np.float64 and d.bli[0].dtype == np.int32


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
