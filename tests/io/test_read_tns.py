"""FROSTT .tns reader: real tensors, any order, malformations."""

import gzip
import os

import numpy as np
import pytest
import sparse

from daskhpc.io import ReadError, read, read_tns


def open_paths() -> set:
    """The files this process has open (Linux)."""
    fds = "/proc/self/fd"
    return {os.path.realpath(os.path.join(fds, fd)) for fd in os.listdir(fds)}


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


def test_arrays_are_narrow(tmp_path):
    from daskhpc.io import read_tns_arrays

    c, v, shape = read_tns_arrays(write(tmp_path, "1 2 3 1.5\n2 1 1 4\n"))
    assert (c.dtype, v.dtype, shape) == (np.int32, np.float32, (2, 2, 3))
    assert c.tolist() == [[0, 1], [1, 0], [2, 0]] and v.tolist() == [1.5, 4.0]
    # a value float32 cannot hold, an index int32 cannot: those arrays widen, exactly
    c, v, _ = read_tns_arrays(write(tmp_path, "1 1 1 2\n3000000000 1 1 0.1\n", name="w.tns"))
    assert (c.dtype, v.dtype) == (np.int64, np.float64)
    assert c[0, 1] == 2999999999 and v.tolist() == [2.0, 0.1]


def test_blocks_read_as_the_whole(tmp_path, monkeypatch):
    """Parsed in blocks of a few lines: the same arrays, errors at their file line."""
    from daskhpc.io import _tns, read_tns_arrays

    lines = [f"{i % 7 + 1} {i % 5 + 1} {i % 3 + 1} {i}" for i in range(1, 2001)]
    path = write(tmp_path, "# head\n" + "\n".join(lines) + "\n\n")
    whole = read_tns_arrays(path)
    monkeypatch.setattr(_tns, "BLOCK", 64)
    got = read_tns_arrays(path)
    assert np.array_equal(got[0], whole[0]) and np.array_equal(got[1], whole[1])
    assert got[2] == whole[2] == (7, 5, 3) and got[0].flags.c_contiguous
    for k, line, problem in [(1500, "1 1 x 1", "bad token 'x'"),
                             (1700, "1 1 1", "expected 4 columns like line 2, found 3"),
                             (1900, "1 0 1 1", "index 0 in mode 2 is below 1")]:
        bad = list(lines)
        bad[k] = line
        path = write(tmp_path, "# head\n" + "\n".join(bad) + "\n", name=f"bad{k}.tns")
        with pytest.raises(ReadError) as info:
            read_tns_arrays(path)
        assert info.value.line == k + 2 and problem in info.value.problem
        # closed although the error's traceback still holds the reader
        assert str(path) not in open_paths(), path


def test_arrays_memory(tmp_path, monkeypatch):
    """The parse holds the result (16 bytes a nonzero) and one block's temporaries: not
    the text, not float64 numbers of the whole file."""
    from daskhpc.io import _tns, read_tns_arrays
    from daskhpc.testing import traced

    n = 200_000
    rng = np.random.default_rng(0)
    table = np.column_stack([rng.integers(1, 1000, (n, 3)), rng.integers(1, 6, n)])
    path = tmp_path / "big.tns"
    np.savetxt(path, table, fmt="%d")
    monkeypatch.setattr(_tns, "BLOCK", 1 << 16)
    with traced() as t:
        c, v, _ = read_tns_arrays(path)
    peak = t.peak
    raw = c.nbytes + v.nbytes
    assert raw == 16 * n
    assert peak < raw + 40 * _tns.BLOCK        # the text alone is over 17 bytes a line


def test_arrow_path_as_the_general_parse(tmp_path, monkeypatch):
    """Plain single-space files go through pyarrow, with the general parse's arrays;
    anything else (a comment, a tab, a bad index) through the general parse."""
    from daskhpc.io import _tns, read_tns_arrays

    rng = np.random.default_rng(0)
    lines = [f"{i % 7 + 1} {i % 5 + 1} {rng.integers(1, 3000000000)} {i / 3}"
             for i in range(1, 3001)]
    path = write(tmp_path, "\n".join(lines) + "\n")
    calls = []
    arrow = _tns._read_arrow
    monkeypatch.setattr(_tns, "_read_arrow", lambda *a: calls.append(arrow(*a)) or calls[-1])
    got = read_tns_arrays(path)
    assert calls[-1] is not None                 # taken
    monkeypatch.setattr(_tns, "_read_arrow", lambda *a: None)
    want = read_tns_arrays(path)
    assert all(np.array_equal(g, w) and g.dtype == w.dtype for g, w in zip(got[:2], want[:2]))
    assert got[2] == want[2] and got[0].dtype == np.int64 and got[1].dtype == np.float64
    for text in ("1 1 1 1\n# c\n", "1\t1 1\n", "1 1 1\n1 0 1\n", "1 1 nan\n", "1  1 1\n"):
        assert arrow(write(tmp_path, text, name="o.tns"), None) is None


def test_widening_a_block_reads_only_what_is_stored():
    """Values that need float64 widen what is stored so far, not the unwritten rest of
    the buffer (casting a signalling NaN there warned)."""
    import warnings

    from daskhpc.io._tns import _store

    coords = np.zeros((2, 4), np.int32)
    vals = np.empty(4, np.float32)
    vals.view(np.uint32)[:] = 0x7FA00000         # signalling NaNs where nothing is yet
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        coords, vals = _store(coords, vals, 0, np.array([[1, 2], [1, 3]]), np.array([0.1, 0.2]))
    assert vals.dtype == np.float64 and vals[:2].tolist() == [0.1, 0.2]
    assert coords[:, :2].tolist() == [[0, 1], [0, 2]]
