"""The line index reads a file in blocks: the same lines and tokens whatever the block
size, and per-byte temporaries of one block, not of the file (counts, not times)."""

from __future__ import annotations

import numpy as np
import pytest

from daskhpc.io import _common, read_ratings
from daskhpc.testing import traced

TEXTS = [b"# c\n1 2\n\n3\t4 5\r\n", b"  a  bb ccc\n\n\nd", b"x\n", b"\n\n", b"",
         b"1,2,3.5\n10,20,4.0\n100,200,0.5\n", b"   \n  word", b"abc"]


def index(lines):
    return lines.starts.tolist(), lines.ends.tolist(), lines.ntok.tolist(), \
        lines.first.tolist()


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("chunk", [1, 2, 3, 7])
def test_blocks_give_the_same_index(monkeypatch, text, chunk):
    whole = index(_common.Lines("t", text))
    monkeypatch.setattr(_common, "CHUNK", chunk)      # tokens and lines across blocks
    assert index(_common.Lines("t", text)) == whole


def test_the_index_counts_tokens_and_lines():
    ln = _common.Lines("t", b"# c\n1 2\n\n3\t4 5\r\n")
    assert index(ln) == ([0, 4, 8, 9], [3, 7, 8, 15], [2, 2, 0, 3], [35, 49, 0, 51])


def ratings_csv(path, n: int) -> int:
    rng = np.random.default_rng(0)
    u = rng.integers(0, 10**5, n)
    i = np.arange(n)                       # distinct pairs
    with open(path, "w") as f:
        f.write("userId,movieId,rating\n")
        f.writelines(f"{a},{b},{c:.1f}\n" for a, b, c in zip(u, i, rng.integers(1, 10, n) / 2))
    return path.stat().st_size


def test_indexing_a_file_holds_no_per_byte_array_of_the_file(monkeypatch, tmp_path):
    path = tmp_path / "r.csv"
    size = ratings_csv(path, 60_000)
    data = path.read_bytes()
    monkeypatch.setattr(_common, "CHUNK", 1 << 14)
    with traced() as t:
        _common.Lines(path, data)
    peak = t.peak
    # kept: starts, ends, ntok (8 bytes a line each) and a byte a line, about 1.6 bytes
    # a byte of this file; flags, a running count over every byte of the file and every
    # token's start came on top before (about 11 bytes a byte in all)
    lines = 60_001
    assert peak < 32 * lines + 64 * (1 << 14), (peak, size)
    assert peak < 3 * size


def test_reading_ratings_in_small_blocks_is_the_same(monkeypatch, tmp_path):
    path = tmp_path / "r.csv"
    ratings_csv(path, 5_000)
    a = read_ratings(path)
    monkeypatch.setattr(_common, "CHUNK", 97)                  # numbers parsed in blocks too
    b = read_ratings(path)
    assert (a.matrix != b.matrix).nnz == 0 and a.matrix.nnz == 5_000
    assert all(np.array_equal(x, y) for x, y in zip(a.index_maps, b.index_maps))


def test_reading_ratings_peaks_at_about_twice_what_it_returns(monkeypatch, tmp_path):
    path = tmp_path / "r.csv"
    n = 100_000
    ratings_csv(path, n)
    monkeypatch.setattr(_common, "CHUNK", 1 << 14)     # a file of many blocks
    read_ratings(path)                 # its kernels loaded (numba) outside the count
    with traced() as t:
        r = read_ratings(path)
    kept, peak = t.held, t.peak
    assert r.matrix.nnz == n
    # returned: the CSR matrix and the rows, columns and values (about 47 bytes a
    # rating); on top, the text, its index and the parsed table are dropped before the
    # ids are numbered (all of them held to the end: about 200 bytes a rating)
    assert kept < 56 * n, kept
    assert peak < 130 * n, peak


@pytest.mark.parametrize("chunk", [3, 5, 1 << 24])
def test_numbers_in_blocks_leave_comments_out_and_name_bad_lines(monkeypatch, chunk):
    monkeypatch.setattr(_common, "CHUNK", chunk)
    ln = _common.Lines("t", b"# h 9\n1 2\n% c 9\n3 4\n\n5 6\n# x\n7 8\n")
    assert ln.numbers(ln.data_lines(b"#%")).tolist() == [1, 2, 3, 4, 5, 6, 7, 8]
    bad = _common.Lines("t", b"1 2\n3 4\n5 x\n7 8\n")
    with pytest.raises(_common.ReadError, match="t:3: bad token 'x'"):
        bad.numbers(bad.data_lines())
