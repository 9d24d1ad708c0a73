"""The ratings reader's streaming parse: what the general parse gives, for less memory;
anything it does not take is left to the general parse (counts, not times)."""

from __future__ import annotations

import numpy as np
import pytest

from daskhpc.io import _ratings, read_ratings
from daskhpc.testing import traced

SAME = {
    "header": "userId,movieId,rating\n3,10,4.5\n1,7,3.0\n3,7,0.5\n",
    "no header, 4 columns": "5,2,1.5,100\n-1,2,2.0,90\n5,9,4.0,80\n",
    "dense ids, blank line": "0,1,1.0\n\n1,0,2.5\n2,1,3.25\n",
    "timestamp header": "userId,movieId,rating,timestamp\n10,20,1,5\n11,20,2,6\n",
    "big ids": "9000000000,1,3.0\n1,2,4.0\n",
    "crlf, MovieLens": "userId,movieId,rating,timestamp\r\n1,1,4.0,964982703\r\n"
                       "1,3,4.0,964981247\r\n2,1,0.5,964982224\r\n",
}


def general(path, header=None, monkeypatch=None):
    monkeypatch.setattr(_ratings, "_read_streaming", lambda *a: None)
    return read_ratings(path, header=header)


@pytest.mark.parametrize("text", SAME.values(), ids=SAME.keys())
def test_the_streaming_parse_gives_what_the_general_one_does(tmp_path, monkeypatch, text):
    path = tmp_path / "r.csv"
    path.write_text(text)
    fast = _ratings._read_streaming(path, None)
    assert fast is not None
    slow = general(path, monkeypatch=monkeypatch)
    assert fast.shape == slow.shape and fast.nnz == slow.nnz
    assert (fast.matrix != slow.matrix).nnz == 0 and fast.matrix.dtype == slow.matrix.dtype
    for key in ("rows", "cols", "vals", "timestamps"):
        if key in slow.meta:
            a, b = fast.meta[key], slow.meta[key]
            assert a.dtype == b.dtype and np.array_equal(a, b), key
        else:
            assert key not in fast.meta
    assert fast.meta["header"] == slow.meta["header"]
    for a, b in zip(fast.index_maps, slow.index_maps):
        assert (a is None and b is None) or (a.dtype == b.dtype and np.array_equal(a, b))


LEFT = {
    "comment": "# c\n1,2,3\n",
    "comment later": "1,2,3\n# c\n",
    "empty field": "1,,3\n",
    "string ids": "alice,x1,4.0\n",
    "nan": "1,2,nan\n",
    "repeated pair": "1,2,3\n1,2,4\n",
    "tabs": "1\t2\t3\n",
    "double colon": "1::2::3::4\n",
    "old mac": "1,2,3\r1,3,4\r",
    "ragged": "1,2,3\n1,3\n",
    "blank header token": "user id,item,rating\n1,2,3\n",
    "header only": "userId,movieId,rating\n",
    "quoted": '"1","2","3.5"\n',
    "gzip": "\x1f\x8b",
}


@pytest.mark.parametrize("text", LEFT.values(), ids=LEFT.keys())
def test_what_the_streaming_parse_leaves_to_the_general_one(tmp_path, text):
    path = tmp_path / "r.csv"
    path.write_text(text)
    assert _ratings._read_streaming(path, None) is None


def test_a_forced_header_or_none_is_kept(tmp_path, monkeypatch):
    path = tmp_path / "r.csv"
    path.write_text("1,2,3\n4,5,6\n")
    assert read_ratings(path, header=True).meta["header"] == ["1", "2", "3"]
    assert _ratings._read_streaming(path, False).nnz == 2
    assert _ratings._read_streaming(path, True).nnz == 1


def ratings_csv(path, n: int) -> None:
    rng = np.random.default_rng(0)
    u = rng.integers(0, 10**5, n)
    with open(path, "w") as f:
        f.write("userId,movieId,rating\n")
        f.writelines(f"{a},{b},{c:.1f}\n" for a, b, c in
                     zip(u, np.arange(n), rng.integers(1, 10, n) / 2))


def peak_of(fn) -> int:
    with traced() as t:
        fn()
    return t.peak


def test_the_streaming_parse_holds_no_text_index_or_float_table(tmp_path, monkeypatch):
    n = 100_000
    path = tmp_path / "r.csv"
    ratings_csv(path, n)
    monkeypatch.setattr(_ratings, "BLOCK", 1 << 16)
    read_ratings(path)          # pyarrow's modules imported before counting
    fast = peak_of(lambda: read_ratings(path))
    slow = peak_of(lambda: general(path, monkeypatch=monkeypatch))
    # what it returns: rows, cols, vals (24 bytes a rating) and the CSR matrix (12-16),
    # and the matrix's making (about 56 bytes a rating in all); the general parse holds
    # the text, its line index and a float table as well (about 137)
    assert fast < 60 * n, fast
    assert slow > 2 * fast, (slow, fast)


def test_files_read_the_same_without_pyarrow(tmp_path):
    """pyarrow comes with the dataframe extra: without it the general parse reads ratings
    and .tns files (the same arrays), in a process that cannot import it."""
    import subprocess
    import sys

    (tmp_path / "r.csv").write_text("userId,movieId,rating\n3,7,4.5\n1,7,2\n3,2,1\n")
    (tmp_path / "t.tns").write_text("1 2 3 1.5\n2 1 1 -2\n")
    code = ("import sys, numpy as np\n"
            "if sys.argv[1] == 'off':\n    sys.modules['pyarrow'] = None\n"
            "from daskhpc.io import read_ratings, read_tns_arrays\n"
            "r = read_ratings(sys.argv[2])\n"
            "c, v, shape = read_tns_arrays(sys.argv[3])\n"
            "print(r.matrix.toarray().tolist(), c.tolist(), v.tolist(), shape,\n"
            "      'pyarrow' in sys.modules and sys.modules['pyarrow'] is not None)")
    out = {}
    for mode in ("on", "off"):
        p = subprocess.run([sys.executable, "-c", code, mode, str(tmp_path / "r.csv"),
                            str(tmp_path / "t.tns")], capture_output=True, text=True)
        assert p.returncode == 0, p.stderr[-2000:]
        out[mode] = p.stdout.rsplit(" ", 1)
    assert out["on"][0] == out["off"][0]
    assert out["on"][1].strip() == "True" and out["off"][1].strip() == "False"
