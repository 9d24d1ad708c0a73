"""Bad input and options give clear InputErrors; splits and assignments are seeded."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from daskhpc.errors import InputError
from daskhpc.hypergraph import write_pair_file
from daskhpc.ssgd import plan
from daskhpc.ssgd._assign import random_col_blocks
from daskhpc.ssgd._data import as_ratings, split


def test_empty_rows_are_dropped_with_a_note_or_refused_with_keep_empty():
    # dropped with a note instead of stopping; --keep-empty refuses
    A = sp.csr_array(np.array([[1.0, 2.0], [0.0, 0.0], [3.0, 0.0]]))
    rep = plan(A, 2, partition="random")
    assert rep["input"]["shape"] == [2, 2] and rep["input"]["shape_in_file"] == [3, 2]
    assert rep["input"]["dropped_empty"] == {"rows": 1, "columns": 0, "first_rows": [1],
                                             "first_columns": []}
    assert "dropped 1 empty row (1) of the 3 x 2 matrix" in rep["input"]["notes"][0]
    with pytest.raises(InputError, match=r"row 1 has no ratings \(1 of 3 rows are empty\)"
                                         ".*without --keep-empty"):
        plan(A, 2, keep_empty=True)


def test_empty_columns_are_named_as_the_file_does(tmp_path):
    from daskhpc.ssgd._setup import prepare

    f = tmp_path / "r.mtx"
    f.write_text("%%MatrixMarket matrix coordinate real general\n4 3 3\n1 1 4\n2 1 3\n"
                 "4 2 5\n")
    with pytest.raises(InputError, match="r.mtx: row 3 has no ratings"):   # 1-based
        plan(str(f), 2, keep_empty=True)
    s = prepare(str(f), 2, partition="random", test_fraction=0.0)
    assert s.ratings.shape == (3, 2)
    assert s.index_maps[0].tolist() == [1, 2, 4] and s.index_maps[1].tolist() == [1, 2]
    note = s.ratings.source["notes"][0]
    assert "dropped 1 empty row (3) and 1 empty column (3) of the 4 x 3 matrix" in note
    # the ratings that remain are the file's, re-indexed
    r = s.ratings
    dense = sp.csr_array((r.vals, (r.rows, r.cols)), shape=r.shape).toarray()
    assert dense.tolist() == [[4, 0], [3, 0], [0, 5]]


def test_string_ids_and_format_reach_ssgd(tmp_path):
    from daskhpc.ssgd._setup import prepare

    f = tmp_path / "votes.el"           # .el says snap: format="ratings" overrides it
    f.write_text("u1 tt1 4\nu2 tt1 3\nu2 tt2 5\nu3 tt2 1\n")
    s = prepare(str(f), 2, partition="random", test_fraction=0.0, format="ratings")
    assert s.ratings.shape == (3, 2)
    assert s.index_maps[0].tolist() == ["u1", "u2", "u3"]
    with pytest.raises(InputError, match="unknown format 'nope'"):
        prepare(str(f), 2, format="nope")


def test_nan_rating_is_refused(tmp_path, tiny):
    rows, cols, vals, shape = tiny
    vals = vals.copy()
    vals[4] = np.nan
    with pytest.raises(InputError, match=r"rating nan at \(row \d+, column \d+\) is not a finite"):
        plan((rows, cols, vals, shape), 2)
    f = tmp_path / "r.csv"
    f.write_text("userId,movieId,rating\n1,1,4.0\n2,1,nan\n")
    with pytest.raises(InputError, match="r.csv:3"):     # the reader names the line
        plan(str(f), 1)


def test_more_parts_than_rows(tiny):
    with pytest.raises(InputError, match="--parts 13 is more than the 12 rows"):
        plan(tiny, 13)
    with pytest.raises(InputError, match="--parts must be at least 1, not 0"):
        plan(tiny, 0)


def test_partition_file_of_the_wrong_length(tmp_path, tiny):
    rows, cols, vals, shape = tiny
    f = tmp_path / "p.txt"
    write_pair_file(f, np.zeros(11, int), np.zeros(8, int))
    with pytest.raises(InputError, match="11 row part ids for 12 rows"):
        plan(tiny, 2, partition_file=f)
    write_pair_file(f, np.zeros(12, int), np.zeros(9, int))
    with pytest.raises(InputError, match="9 column part ids for 8 columns"):
        plan(tiny, 2, partition_file=f)
    write_pair_file(f, np.full(12, 2), np.zeros(8, int))
    with pytest.raises(InputError, match=r"part id 2 out of range \[0, 2\)"):
        plan(tiny, 2, partition_file=f)


def test_rows_only_partition_file_keeps_random_columns(tmp_path, tiny):
    f = tmp_path / "rows.txt"
    f.write_text("\n".join(str(i % 2) for i in range(12)) + "\n")
    rep = plan(tiny, 2, partition_file=f, test_fraction=0.0)
    assert rep["partition_method"] == "file" and rep["plan"]["tot_msgs"] > 0


@pytest.mark.parametrize("opt,msg", [({"strategy": "mpi"}, "unknown --strategy"),
                                     ({"partition": "metis"}, "unknown --partition"),
                                     ({"strata": "diagonal"}, "unknown --strata"),
                                     ({"rank": 0}, "--rank must be at least 1"),
                                     ({"lr": -1.0}, "--lr must be greater than 0, not -1.0"),
                                     ({"test_fraction": 1.0}, "--test-fraction")])
def test_bad_options(tiny, opt, msg):
    with pytest.raises(InputError, match=msg):
        plan(tiny, 2, **opt)


def test_not_ratings():
    with pytest.raises(InputError, match="cannot use list as ratings"):
        as_ratings([1, 2, 3])


def test_split_is_seeded_and_keeps_order(ml_small):
    r = as_ratings(ml_small)
    a_tr, a_te = split(r, 0.1, seed=7)
    b_tr, b_te = split(r, 0.1, seed=7)
    assert np.array_equal(a_te.vals, b_te.vals) and a_te.nnz == 10084
    assert a_tr.nnz + a_te.nnz == r.nnz
    # both halves keep the input order: their positions in the input are increasing
    where = {k: i for i, k in enumerate((r.rows * r.shape[1] + r.cols).tolist())}
    for part in (a_tr, a_te):
        pos = [where[k] for k in (part.rows * r.shape[1] + part.cols).tolist()]
        assert np.all(np.diff(pos) > 0)


def test_random_column_blocks_are_balanced():
    b = random_col_blocks(103, 8, seed=1)
    counts = np.bincount(b, minlength=8)
    assert counts.max() - counts.min() <= 1
    assert np.array_equal(b, random_col_blocks(103, 8, seed=1))
