"""FROSTT .tns reader: real tensors, any order, malformations."""

import gzip

import numpy as np
import pytest
import sparse

from daskhpc.io import ReadError, read, read_tns


def write(tmp_path, text, name="t.tns", gz=False):
    path = tmp_path / name
    raw = text.encode() if isinstance(text, str) else text
    path.write_bytes(gzip.compress(raw) if gz else raw)
    return path


@pytest.mark.parametrize("name, shape, nnz", [
    ("umls_head_rel_tail.tns", (135, 46, 135), 6529),
    ("nations_head_rel_tail.tns", (14, 55, 14), 1992),
    ("mlsmall_user_movie_year.tns", (610, 9724, 23), 100836),
])
def test_real_tensors(shared_data, name, shape, nnz):
    path = shared_data / "tensors" / name
    s = read(path)
    assert s.format == "tns" and s.shape == shape and s.nnz == nnz and s.ndim == 3
    assert isinstance(s.tensor, sparse.COO) and s.tensor.dtype == np.float64
    assert s.matrix is None and s.index_maps == (None, None, None)
    # independent parse: plain Python split
    table = np.array(path.read_text().split(), dtype=np.float64).reshape(-1, 4)
    want = np.ravel_multi_index(tuple(table[:, :3].astype(int).T - 1), shape)
    got = np.ravel_multi_index(tuple(s.tensor.coords), shape)
    assert np.unique(want).size == want.size   # no duplicates: entries map one to one
    w, g = np.argsort(want), np.argsort(got)
    assert np.array_equal(want[w], got[g])
    assert np.array_equal(table[w, 3], s.tensor.data[g])


def test_order_one_and_four_with_comments(tmp_path):
    one = read_tns(write(tmp_path, "# vector\n3 2.5\n1 -1\n"))
    assert one.shape == (3,) and one.tensor.todense().tolist() == [-1, 0, 2.5]
    four = read_tns(write(tmp_path, "% c\n1 1 1 1 1.0\r\n2\t3 1 2 4\r\n", name="f.tns"))
    assert four.shape == (2, 3, 1, 2) and four.nnz == 2
    assert four.tensor.coords.T.tolist() == [[0, 0, 0, 0], [1, 2, 0, 1]]
    assert four.tensor.data.tolist() == [1, 4]


def test_duplicates_summed_zeros_kept(tmp_path):
    s = read_tns(write(tmp_path, "1 1 2\n1 1 3\n2 2 0\n"))
    assert s.nnz == 2 and s.tensor.todense().tolist() == [[5, 0], [0, 0]]


def test_shape_option(tmp_path):
    s = read_tns(write(tmp_path, "1 2 1\n"), shape=(4, 5))
    assert s.shape == (4, 5)


def test_gzip(tmp_path):
    s = read(write(tmp_path, "1 2 3 1\n", name="t.tns.gz", gz=True))
    assert s.shape == (1, 2, 3)


MALFORMED = {
    "wrong column count": ("1 1 1 1.0\n2 2 1.0\n", None, 2,
                           "expected 4 columns like line 1, found 3"),
    "one column": ("# c\n5\n", None, 2, "expected at least 2 columns"),
    "index zero": ("1 1 1\n0 2 1\n", None, 2, "index 0 in mode 1 is below 1"),
    "negative index": ("1 1 1\n2 -3 1\n", None, 2, "index -3 in mode 2 is below 1"),
    "non-integer index": ("1 1.5 1\n", None, 1, "index 1.5 is not an integer"),
    "nan": ("1 1 1\n2 2 NaN\n", None, 2, "value is nan"),
    "inf": ("1 1 inf\n", None, 1, "value is inf"),
    "bad token": ("1 1 1\n2 2 1,5\n", None, 2, "bad token '1,5'"),
    "beyond shape": ("1 1 1\n3 1 1\n", (2, 2), 2, "index 3 in mode 1 is beyond the given shape"),
}


@pytest.mark.parametrize("text, shape, line, problem", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed(tmp_path, text, shape, line, problem):
    path = write(tmp_path, text)
    with pytest.raises(ReadError) as info:
        read_tns(path, shape=shape)
    e = info.value
    assert (e.path, e.line) == (str(path), line)
    assert problem in e.problem, e.problem


def test_shape_with_wrong_order(tmp_path):
    path = write(tmp_path, "1 1 1\n")
    with pytest.raises(ReadError, match="has 3 modes, the file has 2") as info:
        read_tns(path, shape=(1, 1, 1))
    assert info.value.line is None


@pytest.mark.parametrize("text", ["", "# header only\n", "  \n"])
def test_empty_file(tmp_path, text):
    path = write(tmp_path, text)
    with pytest.raises(ReadError, match="empty file") as info:
        read_tns(path)
    assert info.value.path == str(path) and info.value.line is None


def test_truncated_gzip(tmp_path):
    whole = gzip.compress("".join(f"{i} 1 2.0\n" for i in range(1, 3000)).encode())
    path = write(tmp_path, whole[:100], name="t.tns.gz")
    with pytest.raises(ReadError, match="truncated gzip"):
        read(path)
