"""read(): format from the name, content sniffing, unknown formats."""

import gzip

import pytest

from daskhpc.io import FORMATS, ReadError, read
from daskhpc.io._detect import detect_format


@pytest.mark.parametrize("name, fmt", [
    ("a.mtx", "mtx"), ("A.MTX.GZ", "mtx"), ("t.tns", "tns"), ("t.tns.gz", "tns"),
    ("g.txt", "snap"), ("g.txt.gz", "snap"), ("g.edges", "snap"), ("g.el", "snap"),
    ("r.csv", "ratings"), ("r.tsv.gz", "ratings"), ("r.dat", "ratings"),
    ("ratings.txt", "ratings"), ("ratings.list.gz", "ratings"), ("ratings.mtx", "mtx"),
    ("d.svm", "libsvm"), ("d.libsvm.gz", "libsvm"), ("d.svmlight", "libsvm"),
])
def test_format_from_name(name, fmt):
    assert detect_format(f"/some/dir/{name}") == fmt


@pytest.mark.parametrize("name, text, fmt", [
    ("a9a", "-1 3:1 11:1 14:1\n+1 5:1 qid:2 7:1 # c\n", "libsvm"),
    ("a9a.t", "# comment\n1 1:0.5\n-1\n0 2:1e-3\n", "libsvm"),
    ("matrix", "%%MatrixMarket matrix coordinate pattern general\n1 1 1\n1 1\n", "mtx"),
])
def test_format_from_content(tmp_path, name, text, fmt):
    path = tmp_path / name
    path.write_text(text)
    assert detect_format(path) == fmt
    assert read(path).format == fmt
    packed = tmp_path / f"{name}.gz"
    packed.write_bytes(gzip.compress(text.encode()))
    assert read(packed).format == fmt


@pytest.mark.parametrize("text", ["0 1\n1 2\n", "", "hello world\n"])
def test_unknown_format_lists_known_ones(tmp_path, text):
    path = tmp_path / "mystery.bin"
    path.write_text(text)
    with pytest.raises(ReadError) as info:
        read(path)
    e = info.value
    assert e.path == str(path) and e.line is None
    assert "cannot tell the format" in e.problem
    for fmt in FORMATS:
        assert fmt in e.problem


def test_explicit_format_and_keywords(tmp_path):
    path = tmp_path / "mystery.bin"
    path.write_text("0 1\n1 2\n")
    s = read(path, format="snap", directed=False)
    assert s.format == "snap" and s.nnz == 4
    with pytest.raises(ReadError, match="unknown format 'edgelist'; known formats"):
        read(path, format="edgelist")


def test_sniffing_a_truncated_gzip(tmp_path):
    path = tmp_path / "a9a.gz"
    path.write_bytes(gzip.compress(b"1 1:1\n" * 20000)[:200])
    with pytest.raises(ReadError, match="truncated gzip"):
        read(path)
