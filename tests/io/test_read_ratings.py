"""Ratings reader: MovieLens CSV, TSV/space/'::' layouts, explicit zeros, malformations."""

import csv
import gzip

import numpy as np
import pytest

from daskhpc.io import ReadError, read, read_ratings


def write(tmp_path, text, name="ratings.csv", gz=False):
    path = tmp_path / name
    raw = text.encode() if isinstance(text, str) else text
    path.write_bytes(gzip.compress(raw) if gz else raw)
    return path


def test_movielens_small(shared_data):
    path = shared_data / "ratings" / "ml-latest-small" / "ratings.csv"
    s = read(path)
    assert s.format == "ratings" and s.shape == (610, 9724) and s.nnz == 100836
    assert s.meta["header"] == ["userId", "movieId", "rating", "timestamp"]
    assert s.meta["delimiter"] == ","
    users, items = s.index_maps
    assert users.tolist() == list(range(1, 611)) and items.size == 9724 and items.max() == 193609
    with open(path, newline="") as f:
        rows = list(csv.reader(f))[1:]
    u, i, r, t = (np.array(col) for col in zip(*rows))
    m = s.meta
    # triplets and timestamps in file order, as dense indices
    assert np.array_equal(users[m["rows"]], u.astype(np.int64))
    assert np.array_equal(items[m["cols"]], i.astype(np.int64))
    assert np.array_equal(m["vals"], r.astype(np.float64))
    assert np.array_equal(m["timestamps"], t.astype(np.int64))
    # 32-bit ids, and float32 for half stars: 12 bytes a rating
    for key, dtype in [("rows", np.int32), ("cols", np.int32), ("vals", np.float32),
                       ("timestamps", np.int64)]:
        assert m[key].dtype == dtype and m[key].shape == (100836,)
    assert np.array_equal(s.matrix[m["rows"], m["cols"]], m["vals"])
    assert s.matrix.data.min() == 0.5 and s.matrix.data.max() == 5


def test_tab_separated_without_header(tmp_path):
    s = read_ratings(write(tmp_path, "7\t30\t4\t100\n3\t10\t2.5\t200\n7\t10\t1\t300\n",
                           name="r.tsv"))
    assert s.meta["header"] is None and s.meta["delimiter"] == "whitespace"
    assert [m.tolist() for m in s.index_maps] == [[3, 7], [10, 30]]
    assert s.matrix.toarray().tolist() == [[2.5, 0], [1, 4]]
    assert s.meta["rows"].tolist() == [1, 0, 1] and s.meta["cols"].tolist() == [1, 0, 0]
    assert s.meta["timestamps"].tolist() == [100, 200, 300]


def test_three_columns_space_separated_dense_ids(tmp_path):
    s = read(write(tmp_path, "0 1 5\n1 0 3\n", name="ratings.txt"))
    assert s.format == "ratings"
    assert s.index_maps == (None, None) and "timestamps" not in s.meta
    assert s.matrix.toarray().tolist() == [[0, 5], [3, 0]]


def test_movielens_1m_double_colon(tmp_path):
    s = read(write(tmp_path, "1::1193::5::978300760\n1::661::3::978302109\n", name="r.dat"))
    assert s.meta["delimiter"] == "::" and s.shape == (1, 2)
    assert s.index_maps[1].tolist() == [661, 1193]


def test_zero_ratings_are_explicit_entries(tmp_path):
    s = read_ratings(write(tmp_path, "u,i,r\n1,1,0\n1,2,3\n2,2,0.0\n"))
    assert s.nnz == 3 and s.matrix.data.tolist() == [0, 3, 0]
    assert s.matrix.indptr.tolist() == [0, 2, 3]


def test_crlf_bom_comments_gzip(tmp_path):
    raw = "\ufeffuserId,movieId,rating\r\n# note\r\n1,5,4.5\r\n\r\n2,5,1\r\n".encode()
    s = read(write(tmp_path, raw, name="ratings.csv.gz", gz=True))
    assert s.meta["header"] == ["userId", "movieId", "rating"]
    assert s.matrix.toarray().tolist() == [[4.5], [1.0]]


def test_header_forced(tmp_path):
    path = write(tmp_path, "1 2 3\n4 5 6\n", name="r.tsv")
    s = read_ratings(path, header=True)
    assert s.meta["header"] == ["1", "2", "3"] and s.nnz == 1
    assert read_ratings(path, header=False).nnz == 2


HEAD = "userId,movieId,rating,timestamp\n"
ROWS = "".join(f"1,{i},4.0,9{i}\n" for i in range(1, 15))   # lines 2..15

MALFORMED = {
    "two columns": (HEAD + ROWS + "2,1,3.0,99\n2,7\n", 17, "expected 3 or 4 columns, found 2"),
    "five columns": ("1 2 3 4 5\n", 1, "expected 3 or 4 columns, found 5"),
    "mixed 4 and 3": (HEAD + "1,2,3,4\n1,3,5\n", 3, "expected 4 columns like line 2, found 3"),
    "duplicate pair": (HEAD + "1,2,3,4\n2,2,3,4\n1,2,5,4\n", 4,
                       "duplicate rating for user 1, item 2 (first rated on line 2)"),
    "nan rating": (HEAD + "1,2,3,4\n1,3,nan,4\n", 3, "rating is nan"),
    "inf rating": ("1\t2\tinf\n", 1, "rating is inf"),
    "bad rating token": (HEAD + "1,2,3,4\n1,3,x3,4\n", 3, "bad rating 'x3' (not a number)"),
    "bad timestamp, string ids": ("u1 i1 3 7\nu2 i2 4 x\n", 2, "bad timestamp 'x'"),
    "non-integer item": ("1 2.5 3\n", 1, "item id 2.5 is not an integer"),
    "non-integer timestamp": ("1 2 3 4.5\n", 1, "timestamp 4.5 is not an integer"),
    "empty field": (HEAD + "1,,3,4\n", 2, "empty field"),
    "trailing comma": ("# a,,b\n1,2,3\n1,3,4,\r\n", 3, "empty field"),
    "leading comma": ("1,2,3\n,1,3,4\n", 2, "empty field"),
}


@pytest.mark.parametrize("text, line, problem", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed(tmp_path, text, line, problem):
    path = write(tmp_path, text)
    with pytest.raises(ReadError) as info:
        read_ratings(path)
    e = info.value
    assert (e.path, e.line) == (str(path), line)
    assert problem in e.problem, e.problem


def test_message_format(tmp_path):
    path = write(tmp_path, HEAD + ROWS + "2,1,3.0,99\n2,7\n")
    with pytest.raises(ReadError) as info:
        read_ratings(path)
    assert str(info.value) == f"{path}:17: expected 3 or 4 columns, found 2"


@pytest.mark.parametrize("text", ["", "# c\n\n", HEAD])
def test_empty_file(tmp_path, text):
    path = write(tmp_path, text)
    with pytest.raises(ReadError, match="empty file") as info:
        read_ratings(path)
    assert info.value.path == str(path) and info.value.line is None


def test_truncated_gzip(tmp_path):
    whole = gzip.compress((HEAD + ROWS * 100).encode())
    path = write(tmp_path, whole[: len(whole) - 9], name="ratings.csv.gz")
    with pytest.raises(ReadError, match="truncated gzip"):
        read(path)


# -- string user/item ids, re-indexed like SNAP ids -----------------

def test_string_ids_are_reindexed_and_kept(tmp_path):
    # Book-Crossing style: string users, ISBNs (digits, some ending in X), a header
    path = write(tmp_path, '"User-ID","ISBN","Book-Rating"\n'.replace('"', '') +
                 "bob,0195153448,5\nalice,080652121X,3\nbob,080652121X,0\n")
    s = read_ratings(path)
    assert s.meta["header"] == ["User-ID", "ISBN", "Book-Rating"]
    users, items = s.index_maps
    assert users.tolist() == ["alice", "bob"] and items.tolist() == ["0195153448", "080652121X"]
    assert s.meta["rows"].tolist() == [1, 0, 1] and s.meta["cols"].tolist() == [0, 1, 1]
    assert s.meta["vals"].tolist() == [5.0, 3.0, 0.0] and s.nnz == 3
    assert s.meta["string_ids"] == [True, True]
    # the original ids name the rows: row i of the matrix is user users[i]
    assert s.matrix.toarray().tolist() == [[0.0, 3.0], [5.0, 0.0]]


def test_string_ids_without_a_header_and_duplicates_named_by_their_ids(tmp_path):
    s = read_ratings(write(tmp_path, "u1 2 3\nu2 3 4\n", name="r.txt"))
    assert s.meta["header"] is None and s.index_maps[0].tolist() == ["u1", "u2"]
    assert s.index_maps[1] is None or s.index_maps[1].tolist() == [2, 3]
    path = write(tmp_path, "u1,i1,4.0\nu2,i1,3.0\nu1,i1,2.0\n")
    with pytest.raises(ReadError, match="duplicate rating for user u1, item i1 "
                                        r"\(first rated on line 1\)") as info:
        read_ratings(path)
    assert info.value.line == 3


def test_the_empty_field_prefilter_never_skips_a_match():
    """``_may_have_empty_field`` is False only where the expression finds nothing
    (random lines over the characters that matter, and the malformed cases above)."""
    from daskhpc.io._ratings import _EMPTY_FIELD, _may_have_empty_field

    rng = np.random.default_rng(0)
    alphabet = np.frombuffer(b"1,, \t\n\r#2", np.uint8)
    texts = [bytes(rng.choice(alphabet, rng.integers(0, 12)).tolist()) for _ in range(20000)]
    texts += [text.encode() for text, _, _ in MALFORMED.values()]
    skipped = [t for t in texts if not _may_have_empty_field(t)]
    assert skipped and not [t for t in skipped if _EMPTY_FIELD.search(t)]
