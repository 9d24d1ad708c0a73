"""Ratings files the workers read (daskhpc.io.ratings_files): what the client checks
from the metadata alone, naming the file, before any cluster exists."""

from __future__ import annotations

import pytest

from daskhpc.errors import InputError
from daskhpc.io import ratings_files

pd = pytest.importorskip("pandas")
pytest.importorskip("dask.dataframe")


def good(path):
    pd.DataFrame({"userId": [10, 20, 10], "movieId": [1, 2, 3],
                  "rating": [4.0, 3.5, 1.0]}).to_parquet(path, index=False)


def test_parquet_files_and_directory_are_lazy_frames(tmp_path):
    d = tmp_path / "pq"
    d.mkdir()
    good(d / "part-000.parquet")
    good(d / "part-001.parquet")
    (d / "_SUCCESS").write_text("")                     # ignored, as Spark writes it
    for arg in (d, sorted(d.glob("*.parquet"))):
        ddf = ratings_files(arg)
        # (computed here, dask's Parquet reader warns of a pandas deprecation: the
        # workers read it in the runs, tests/ssgd/test_ssgd_collection.py)
        assert list(ddf.columns) == ["userId", "movieId", "rating"]
        assert ddf.npartitions == 2 and str(ddf.dtypes["userId"]) == "int64"


def test_a_pattern_names_the_files_it_matches(tmp_path):
    """A quoted ``'dir/*.parquet'`` (the shell did not expand it) reads those files."""
    d = tmp_path / "pq"
    d.mkdir()
    for k in range(3):
        good(d / f"part-{k}.parquet")
    (d / "notes.txt").write_text("not ratings")
    assert ratings_files(str(d / "*.parquet")).npartitions == 3
    assert ratings_files([d / "part-[01].parquet"]).npartitions == 2
    with pytest.raises(InputError, match=r"pq/\*\.pq: no file matches this pattern$"):
        ratings_files(str(d / "*.pq"))


def test_csv_files_with_and_without_header(tmp_path):
    (tmp_path / "a.csv").write_text("u,i,r,t\n1,2,3.5,99\n2,2,4,98\n")
    (tmp_path / "b.csv").write_text("u,i,r,t\n3,1,1.5,97\n")
    ddf = ratings_files([tmp_path / "a.csv", tmp_path / "b.csv"])
    got = ddf.compute()
    assert list(got.columns) == ["user", "item", "rating"]
    assert got.rating.tolist() == [3.5, 4.0, 1.5]


@pytest.mark.parametrize("write, message", [
    (lambda p: p.write_bytes(b"not parquet at all"),
     "{p}: not a readable Parquet file (ArrowInvalid: "),
    (lambda p: pd.DataFrame({"u": [1.5], "i": [1], "r": [2.0]}).to_parquet(p),
     "{p}: column 'u' (user id) is double; ids must be integers or strings"),
    (lambda p: pd.DataFrame({"u": [1], "i": [1], "r": ["x"]}).to_parquet(p),
     "{p}: column 'r' (rating) is "),
    (lambda p: pd.DataFrame({"u": [1], "i": [1]}).to_parquet(p),
     "{p}: 2 columns (u, i); need user, item, rating"),
])
def test_bad_parquet_named_in_one_line(tmp_path, write, message):
    ok, bad = tmp_path / "a.parquet", tmp_path / "b.parquet"
    good(ok)
    write(bad)
    with pytest.raises(InputError) as e:
        ratings_files([ok, bad])
    assert str(e.value).startswith(message.format(p=bad)) and "\n" not in str(e.value)


def test_parquet_files_that_disagree(tmp_path):
    good(tmp_path / "a.parquet")
    pd.DataFrame({"userId": ["x"], "movieId": [1], "rating": [4.0]}).to_parquet(
        tmp_path / "b.parquet")
    with pytest.raises(InputError, match=r"b\.parquet: columns .* differ from .*a\.parquet"):
        ratings_files(tmp_path)


@pytest.mark.parametrize("text, message", [
    ("1,2,3.0\n1,3,x\n", "{p}:2: rating 'x' is not a number"),
    ("1.5,2,3.0\n", "{p}:1: user id '1.5' is not an integer"),
    ("1,2\n", "{p}:1: expected 3 or 4 comma-separated columns, found 2"),
    ("", "{p}: no ratings in the first 64 kB"),
])
def test_bad_csv_named_in_one_line(tmp_path, text, message):
    p = tmp_path / "r.csv"
    p.write_text(text)
    with pytest.raises(InputError) as e:
        ratings_files([p, p])
    assert str(e.value).startswith(message.format(p=p))


def test_missing_and_mixed_inputs(tmp_path):
    with pytest.raises(InputError, match=r"nope\.parquet: no such file$"):
        ratings_files([tmp_path / "nope.parquet"])
    good(tmp_path / "a.parquet")
    (tmp_path / "b.csv").write_text("1,2,3\n")
    with pytest.raises(InputError, match="mix of Parquet and CSV files"):
        ratings_files([tmp_path / "a.parquet", tmp_path / "b.csv"])
