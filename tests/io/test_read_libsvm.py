"""LIBSVM/SVMlight reader: a9a, every variant, malformations."""

import gzip

import numpy as np
import pytest
import scipy.sparse as sp

from daskhpc.io import ReadError, read, read_libsvm


def write(tmp_path, text, name="d.svm", gz=False):
    path = tmp_path / name
    raw = text.encode() if isinstance(text, str) else text
    path.write_bytes(gzip.compress(raw) if gz else raw)
    return path


def independent(path, n_features):
    """Plain Python parse of a 1-based LIBSVM file."""
    labels, rows, cols, vals = [], [], [], []
    for r, line in enumerate(path.read_text().splitlines()):
        label, *feats = line.split()
        labels.append(float(label))
        for f in feats:
            i, v = f.split(":")
            rows.append(r)
            cols.append(int(i) - 1)
            vals.append(float(v))
    m = sp.csr_array((vals, (rows, cols)), shape=(len(labels), n_features))
    return np.array(labels), m


@pytest.mark.parametrize("name, n_rows, nnz", [("a9a", 32561, 451592), ("a9a.t", 16281, 225731)])
def test_a9a(shared_data, name, n_rows, nnz):
    path = shared_data / "libsvm" / name
    s = read(path, n_features=123)   # no extension: found by content
    assert s.format == "libsvm" and s.shape == (n_rows, 123) and s.nnz == nnz
    assert s.meta == {"zero_based": False} and s.index_maps == (None, None)
    assert set(np.unique(s.labels)) == {-1.0, 1.0} and s.labels.dtype == np.float64
    labels, m = independent(path, 123)
    assert np.array_equal(s.labels, labels)
    assert abs(s.matrix - m).max() == 0


def test_a9a_width_from_the_data(shared_data):
    assert read(shared_data / "libsvm" / "a9a").shape == (32561, 123)
    assert read(shared_data / "libsvm" / "a9a.t").shape == (16281, 122)   # index 123 never used


def test_comments_qid_crlf_label_only_rows(tmp_path):
    text = ("# header comment\r\n"
            "+1 qid:3 1:0.5 3:2 # trailing comment\r\n"
            "-1\r\n"
            "\r\n"
            "2.5 qid:3 3:1e-1\t2:7 3:1\r\n")
    s = read_libsvm(write(tmp_path, text))
    assert s.labels.tolist() == [1.0, -1.0, 2.5]
    # unsorted features accepted; a feature repeated in a line is summed
    assert s.matrix.toarray().tolist() == [[0.5, 0, 2], [0, 0, 0], [0, 7, 1.1]]


@pytest.mark.parametrize("zero_based", ["auto", True])
def test_zero_based(tmp_path, zero_based):
    s = read_libsvm(write(tmp_path, "1 0:1 2:2\n0 1:3\n"), zero_based=zero_based)
    assert s.shape == (2, 3) and s.meta["zero_based"] is True
    assert s.matrix.toarray()[0].tolist() == [1, 0, 2]


def test_auto_is_one_based_without_index_zero(tmp_path):
    s = read_libsvm(write(tmp_path, "1 1:1 3:2\n"))
    assert s.meta["zero_based"] is False and s.matrix.toarray().tolist() == [[1, 0, 2]]


def test_n_features_and_gzip(tmp_path):
    s = read(write(tmp_path, "1 2:1\n", name="d.libsvm.gz", gz=True), n_features=10)
    assert s.shape == (1, 10)


MALFORMED = {
    "bad value token": ("1 1:1\n-1 2:abc\n", {}, 2, "bad token 'abc'"),
    "bad label token": ("1 1:1\nyes 2:1\n", {}, 2, "bad token 'yes'"),
    "missing value": ("1 1:1 2:\n", {}, 1, "malformed feature '2:' (expected index:value)"),
    "missing index": ("1 :4\n", {}, 1, "malformed feature ':4'"),
    "two colons": ("1 1:2:3\n", {}, 1, "malformed feature '1:2:3'"),
    "no colon": ("1 1:1\n1 5\n", {}, 2, "malformed feature '5'"),
    "missing label": ("1 1:1\n3:1 4:1\n", {}, 2, "missing label: line starts with '3:1'"),
    "index zero when one-based": ("1 1:1\n1 0:1\n", {"zero_based": False}, 2,
                                  "feature index 0 in a 1-based file"),
    "negative index": ("1 -1:1\n", {}, 1, "feature index -1 is negative"),
    "non-integer index": ("1 1.5:1\n", {}, 1, "feature index 1.5 is not an integer"),
    "nan label": ("1 1:1\nnan 1:1\n", {}, 2, "label is nan"),
    "inf value": ("1 1:inf\n", {}, 1, "value is inf"),
    "nan value": ("# c\n1 1:1 2:NaN\n", {}, 2, "value is nan"),
    "beyond n_features": ("1 1:1\n1 4:1\n", {"n_features": 3}, 2,
                          "feature index 4 is beyond n_features=3"),
}


@pytest.mark.parametrize("text, kw, line, problem", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed(tmp_path, text, kw, line, problem):
    path = write(tmp_path, text)
    with pytest.raises(ReadError) as info:
        read_libsvm(path, **kw)
    e = info.value
    assert (e.path, e.line) == (str(path), line)
    assert problem in e.problem, e.problem


@pytest.mark.parametrize("text", ["", "# only a comment\n", "\n\n"])
def test_empty_file(tmp_path, text):
    path = write(tmp_path, text)
    with pytest.raises(ReadError, match="empty file") as info:
        read_libsvm(path)
    assert info.value.path == str(path) and info.value.line is None


def test_truncated_gzip(tmp_path):
    whole = gzip.compress("".join(f"1 {i}:1\n" for i in range(1, 3000)).encode())
    path = write(tmp_path, whole[:-5], name="d.svm.gz")
    with pytest.raises(ReadError, match="truncated gzip"):
        read(path)


def test_bad_zero_based_argument(tmp_path):
    with pytest.raises(ValueError, match="zero_based"):
        read_libsvm(write(tmp_path, "1 1:1\n"), zero_based="yes")
