"""Shared pieces: ReadError, SparseInput, gzip handling, the line index, import weight."""

import doctest
import gzip
import pickle
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

import daskhpc.io
from daskhpc.io import (FORMATS, ReadError, SparseInput, read_libsvm, read_matrix_market,
                        read_ratings, read_snap, read_tns)
from daskhpc.io import _common, _detect, _errors, _libsvm, _mtx, _ratings, _snap, _tns

READERS = {
    "mtx": (read_matrix_market, "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 1\n"),
    "snap": (read_snap, "0 1\n1 2\n"),
    "tns": (read_tns, "1 1 1 1.0\n"),
    "libsvm": (read_libsvm, "1 1:1\n"),
    "ratings": (read_ratings, "1,1,4.0\n"),
}


def test_read_error_formats_and_pickles():
    e = ReadError("ratings.csv", 17, "expected 3 or 4 columns, found 2")
    assert isinstance(e, ValueError)
    assert (e.path, e.line, e.problem) == ("ratings.csv", 17, "expected 3 or 4 columns, found 2")
    assert str(e) == "ratings.csv:17: expected 3 or 4 columns, found 2"
    assert str(ReadError("a.gz", None, "truncated gzip")) == "a.gz: truncated gzip"
    back = pickle.loads(pickle.dumps(e))
    assert (back.path, back.line, back.problem, str(back)) == (e.path, e.line, e.problem, str(e))


def test_sparse_input_matrix_and_tensor():
    s = SparseInput("x.mtx", "mtx", matrix=sp.csr_array(np.eye(3)), index_maps=(None, None))
    assert (s.shape, s.nnz, s.ndim) == ((3, 3), 3, 2)
    assert s.describe() == {"path": "x.mtx", "shape": [3, 3], "nnz": 3}
    assert repr(s) == "SparseInput(path='x.mtx', format='mtx', shape=(3, 3), nnz=3)"
    import sparse
    t = SparseInput("t.tns", "tns", tensor=sparse.COO(np.array([[0], [1], [2]]), [1.0],
                                                      shape=(2, 3, 4)))
    assert (t.shape, t.nnz, t.ndim) == ((2, 3, 4), 1, 3)
    assert all(type(n) is int for n in t.describe()["shape"])
    assert FORMATS == ("mtx", "snap", "tns", "libsvm", "ratings")


@pytest.mark.parametrize("fmt", READERS)
def test_gzip_detected_by_content_not_name(tmp_path, fmt):
    reader, text = READERS[fmt]
    packed = tmp_path / "plain_name.dat"
    packed.write_bytes(gzip.compress(text.encode()))
    plain = tmp_path / "plain.gz"
    plain.write_text(text)
    assert reader(packed).nnz == reader(plain).nnz >= 1


@pytest.mark.parametrize("fmt", READERS)
@pytest.mark.parametrize("cut", ["half", "tail"])
def test_truncated_gzip_every_reader(tmp_path, fmt, cut):
    reader, text = READERS[fmt]
    whole = gzip.compress(text.encode() * 200)
    path = tmp_path / "f.gz"
    path.write_bytes(whole[: len(whole) // 2] if cut == "half" else whole[:-3])
    with pytest.raises(ReadError, match="truncated gzip") as info:
        reader(path)
    assert (info.value.path, info.value.line) == (str(path), None)


def test_corrupt_gzip(tmp_path):
    whole = bytearray(gzip.compress(b"0 1\n" * 1000))
    whole[-8] ^= 0xFF   # break the CRC32 of the trailer
    path = tmp_path / "g.txt.gz"
    path.write_bytes(bytes(whole))
    with pytest.raises(ReadError, match="corrupt gzip"):
        read_snap(path)


@pytest.mark.parametrize("fmt", READERS)
@pytest.mark.parametrize("text", ["", "\n", " \r\n\t\n"])
def test_empty_file_every_reader(tmp_path, fmt, text):
    path = tmp_path / "empty"
    path.write_text(text)
    with pytest.raises(ReadError, match="empty file") as info:
        READERS[fmt][0](path)
    assert (info.value.path, info.value.line) == (str(path), None)


def test_read_bytes_strips_bom_and_old_mac_line_ends(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"\xef\xbb\xbf0 1\r1 2\r")
    assert _common.read_bytes(path) == b"0 1\n1 2\n"
    assert read_snap(path).nnz == 2


def test_lines_index():
    ln = _common.Lines("t", b"  # c\n1 2\n\n\t3\t4 5\r\nlast")
    assert len(ln) == 5
    assert ln.ntok.tolist() == [2, 2, 0, 3, 1]
    assert ln.data_lines(b"#").tolist() == [1, 3, 4]
    assert ln.data_lines(b"").tolist() == [0, 1, 3, 4]
    assert ln.tokens(3) == [b"3", b"4", b"5"]
    assert ln.join(np.array([1, 3])) == b"1 2\n\t3\t4 5\r\n"
    assert ln.join(np.array([1, 3, 4])) == b"1 2\n\n\t3\t4 5\r\nlast"   # a leading block
    assert ln.join(np.array([0, 1, 3, 4])) is ln.data


def test_numbers_never_parses_blank_text():
    ln = _common.Lines("t", b"  \n")
    assert ln.numbers(np.array([0])).size == 0   # np.fromstring("  ") would give [-1.]


def test_numbers_locates_bad_token_past_the_first_chunk():
    body = b"".join(b"%d %d\n" % (i, i) for i in range(10000)) + b"7 0x10\n"
    ln = _common.Lines("t", body)
    with pytest.raises(ReadError, match="bad token '0x10'") as info:
        ln.numbers(ln.data_lines())
    assert info.value.line == 10001


def test_dense_ids():
    ids_map, dense = _common.dense_ids(np.array([30, 10, 30, -2]))
    assert ids_map.tolist() == [-2, 10, 30] and dense.tolist() == [2, 1, 2, 0]
    assert _common.dense_ids(np.array([2, 0, 1]))[0] is None


def test_import_does_not_pull_in_dask():
    code = ("import daskhpc.io, daskhpc.datasets, sys; "
            "assert not any(m == 'dask' or m.startswith('dask.') for m in sys.modules), "
            "sorted(m for m in sys.modules if m.startswith('dask'))")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_public_names():
    assert set(daskhpc.io.__all__) >= {"read", "read_matrix_market", "read_snap", "read_tns",
                                        "read_libsvm", "read_ratings", "ReadError",
                                        "SparseInput", "FORMATS"}
    for name in daskhpc.io.__all__:
        assert getattr(daskhpc.io, name) is not None


@pytest.mark.parametrize("module", [_common, _detect, _errors, _libsvm, _mtx, _ratings,
                                    _snap, _tns, daskhpc.io], ids=lambda m: m.__name__)
def test_docstring_examples(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
