"""ssgd.fit from Dask collections: the same run as from the file (bit for bit), bad
collections refused in one line before any work, and the CLI on Parquet files."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp

import daskhpc as dh
from daskhpc.errors import InputError

dd = pytest.importorskip("dask.dataframe")
pd = pytest.importorskip("pandas")
da = pytest.importorskip("dask.array")

OPTS = dict(epochs=2, rank=4, partition="random", progress=False)


def table(n_users=30, n_items=12, per=5, seed=4):
    """Ratings with sparse original ids (users 1000 + 7 u, items 5 + 3 i), shuffled."""
    rng = np.random.default_rng(seed)
    pairs = {(u, int(i)) for u in range(n_users)
             for i in rng.choice(n_items, per, replace=False)}
    pairs |= {(i % n_users, i) for i in range(n_items)}
    pairs = sorted(pairs)
    rng.shuffle(pairs)
    u, i = np.array(pairs).T
    return pd.DataFrame({"user": 1000 + 7 * u, "item": 5 + 3 * i,
                         "stars": rng.integers(1, 11, u.size) / 2.0})


def same(a, b) -> None:
    assert np.array_equal(a.W, b.W) and np.array_equal(a.H, b.H)
    assert [h.get("test_rmse") for h in a.history] == [h.get("test_rmse") for h in b.history]
    assert [h["train_loss"] for h in a.history] == [h["train_loss"] for h in b.history]
    assert a.report()["quality"] == b.report()["quality"]
    assert np.array_equal(a.row_ids, b.row_ids) and np.array_equal(a.col_ids, b.col_ids)


def stale_scheduler_info(client):
    """``client.scheduler_info`` as it returns under load: the client's cache, which its
    periodic refresh (n_workers=0) may overwrite between the fetch and the read, holds
    no workers (docs/decisions.md); the workflows must not read workers from it."""
    def info(*args, **kwargs):
        return client.sync(client.scheduler.identity, n_workers=0)
    return info


def test_frame_equals_file_and_factors_as_dask_arrays(client2, tmp_path, monkeypatch):
    monkeypatch.setattr(client2, "scheduler_info", stale_scheduler_info(client2))
    df = table()
    path = tmp_path / "r.csv"
    df.to_csv(path, index=False)
    a = dh.ssgd.fit(path, 2, client=client2, **OPTS)
    # other column order, named: the ids are mapped as the file reader maps them
    ddf = dd.from_pandas(df[["stars", "item", "user"]], npartitions=3)
    b = dh.ssgd.fit(ddf, 2, client=client2, columns=["user", "item", "stars"], **OPTS)
    same(a, b)
    assert b.row_ids.tolist() == sorted(set(df.user)) and b.report()["input"]["nnz"] == len(df)
    W, H = b.to_dask(client2)
    assert isinstance(W, da.Array) and W.numblocks[0] == 2
    # computed by the client that holds the blocks: the process's default client is the
    # newest one made (another session cluster, in a full test run), which has no such keys
    with client2.as_current():
        assert np.array_equal(W.compute(), b.W) and np.array_equal(H.compute(), b.H)


def test_string_ids_biased_and_serial_check(client2, tmp_path):
    df = table(seed=5)
    df["user"] = "u" + df.user.astype(str)
    path = tmp_path / "s.csv"
    df.to_csv(path, index=False)
    opts = dict(OPTS, biased=True, strategy="p2p")
    a = dh.ssgd.fit(path, 2, client=client2, **opts)
    b = dh.ssgd.fit(dd.from_pandas(df, npartitions=2), 2, client=client2,
                    check_serial=True, **opts)
    same(a, b)
    assert b.mu == a.mu and b.report()["serial_check"]["identical"]


def test_dask_array_equals_the_scipy_matrix(client2):
    rng = np.random.default_rng(1)
    m = sp.random(40, 25, density=0.2, random_state=2, format="csr")
    m.data = rng.integers(1, 6, m.nnz).astype(float)
    m = m.tolil()
    m[5, :] = 0            # an empty row: dropped on both paths
    m = m.tocsr()
    m.eliminate_zeros()
    a = dh.ssgd.fit(m, 2, client=client2, **OPTS)
    b = dh.ssgd.fit(da.from_array(m, chunks=(15, 10), asarray=False), 2, client=client2,
                    **OPTS)
    same(a, b)
    assert 5 not in b.row_ids.tolist()


def _boom(df):
    raise AssertionError("the collection was computed")


@pytest.mark.parametrize("data, message", [
    (pd.DataFrame({"u": [1.0, 2.0], "i": [1, 2], "r": [3.0, 4.0]}),
     "ratings: column 'u' is float64; ids must be integers or strings"),
    (pd.DataFrame({"u": [1, 2], "i": [1, 2], "r": ["a", "b"]}),
     "ratings: rating column 'r' is"),
    (pd.DataFrame({"u": [1, 2], "i": [1, 2]}), "ratings: 2 columns (u, i); need user, item"),
])
def test_bad_frames_refused_before_any_work(client2, data, message):
    ddf = dd.from_pandas(data, npartitions=1)
    lazy = ddf.map_partitions(_boom, meta=ddf._meta)       # any computation fails
    with pytest.raises(InputError) as e:
        dh.ssgd.fit(lazy, 2, client=client2, **OPTS)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_named_column_missing(client2):
    ddf = dd.from_pandas(table(), npartitions=2)
    with pytest.raises(InputError, match=r"^ratings: column 'rating' is not in the "
                                         r"DataFrame \(columns: user, item, stars\)$"):
        dh.ssgd.fit(ddf, 2, client=client2, columns=["user", "item", "rating"], **OPTS)


@pytest.mark.parametrize("change, message", [
    (lambda df: df.assign(stars=df.stars.where(df.index != 7)),
     r"^ratings: the value column 'stars' holds NaN or infinite values in partition 0 "
     r"\(1 of them\)$"),
    (lambda df: pd.concat([df, df.iloc[[3]]], ignore_index=True),
     r"^ratings: repeated rating for user \d+, item \d+ \(rows 3 and \d+ of the "
     r"collection, partition 1\); one rating a pair$"),
    (lambda df: df.assign(user=df.user.astype("Int64").where(df.index != 2)),
     r"^ratings: column 'user' has missing ids in partition 0$"),
])
def test_bad_values_refused_and_nothing_left(client2, change, message):
    ddf = dd.from_pandas(change(table()), npartitions=2)
    with pytest.raises(InputError, match=message):
        dh.ssgd.fit(ddf, 2, client=client2, **OPTS)
    assert _pieces_left(client2) == set()


def _pieces_left(client, wait_s: float = 30.0) -> set:
    """The refused collection's pieces still on the workers (releases arrive
    asynchronously: waits until none is left, at most ``wait_s``)."""
    import time

    def keys(dask_worker):
        return [str(k) for k in dask_worker.data if "_rating_piece" in str(k)]

    deadline = time.monotonic() + wait_s
    while True:
        left = set().union(*map(set, client.run(keys).values()))
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def test_resume_of_a_finished_run_gives_the_saved_result(client2, tmp_path):
    """A checkpoint whose every epoch is done: the resumed collection run runs nothing
    and gives the run's W, H and history back; other ratings are refused."""
    df = table(seed=6)
    ck = tmp_path / "ck"
    first = dh.ssgd.fit(dd.from_pandas(df, npartitions=2), 2, client=client2,
                        checkpoint=ck, **OPTS)
    again = dh.ssgd.fit(dd.from_pandas(df, npartitions=3), 2, client=client2,
                        checkpoint=ck, resume=True, **OPTS)
    same(first, again)
    assert again.report()["recovery"]["already_complete"] == {"units": 2,
                                                               "unit_name": "epochs"}
    other = df.assign(stars=df.stars.where(df.index != 4, 0.5))
    with pytest.raises(InputError, match=r"manifest.json: this checkpoint was made from "
                                         r"another input \(ratings: "):
        dh.ssgd.fit(dd.from_pandas(other, npartitions=2), 2, client=client2, checkpoint=ck,
                    resume=True, **OPTS)


@pytest.mark.slow              # a private cluster, a SIGKILL, a nanny restart: 20-60 s
@pytest.mark.timeout(900)
def test_a_lost_worker_costs_a_restart_its_parts_read_again(make_client, tmp_path,
                                                            unit_tasks):
    """The killed worker held part 0's ratings and the keeper's (built there from the
    Parquet files, no copy on the client): both are read again from the files and routed
    to the new placement, the run restarts from its checkpoint and ends as the file run."""
    from daskhpc.testing import KillOnce, TaskKey

    client = make_client(3)
    df = table(n_users=60, n_items=20)
    df.to_csv(tmp_path / "r.csv", index=False)
    (tmp_path / "pq").mkdir()
    for k, lo in enumerate(range(0, len(df), len(df) // 3 + 1)):
        df.iloc[lo:lo + len(df) // 3 + 1].to_parquet(tmp_path / "pq" / f"{k}.parquet")
    opts = dict(OPTS, epochs=4)
    ref = dh.ssgd.fit(tmp_path / "r.csv", 2, client=client, **opts)
    marker = tmp_path / "killed"
    # part 0 is on the first worker (ring placement), where the keeper is too
    client.register_plugin(KillOnce(TaskKey("ssgd-epoch", {1: 0, 2: 2}), str(marker)),
                           name="kill")
    got = dh.ssgd.fit(dd.read_parquet(tmp_path / "pq"), 2, client=client, max_restarts=2,
                      checkpoint=tmp_path / "ck", **opts)
    rec = got.report()["recovery"]["recoveries"]
    assert rec[0]["lost"] == [marker.read_text().split()[0]]
    assert rec[0]["restart"] == 2 and 0 in rec[0]["moved"]
    same(ref, got)


@pytest.mark.slow              # console scripts that start clusters (CI budget)
@pytest.mark.timeout(900)      # two runs, each its own cluster
def test_cli_parquet_files_equal_the_file(tmp_path):
    from cli_script import daskhpc

    r = dh.ssgd.power_law_ratings(4000, n_users=300, n_items=120, seed=2,
                                  path=tmp_path / "pq", format="parquet")
    dh.ssgd.write_ratings_csv(tmp_path / "r.csv", r)
    flags = ["--parts", "2", "--epochs", "2", "--partition", "random", "--workers", "2",
             "--json", "-"]
    reports = []
    # (a directory is the same frame: tests/io/test_collections_ratings.py)
    for inputs in ([tmp_path / "r.csv"], sorted((tmp_path / "pq").glob("*.parquet"))):
        code, out, err = daskhpc("run", "ssgd", *inputs, *flags)
        assert code == 0, err
        reports.append(json.loads(out))
    q = [rep["quality"] for rep in reports]
    assert q[0] == q[1]
    assert reports[1]["input"]["collection"] == "dask.dataframe"
    bad = tmp_path / "bad"
    bad.mkdir()
    pd.DataFrame({"u": [1.5], "i": [1], "r": [2.0]}).to_parquet(bad / "a.parquet")
    code, out, err = daskhpc("run", "ssgd", bad, *flags)
    assert code == 2 and err.strip().splitlines() == [
        f"daskhpc: error: {bad / 'a.parquet'}: column 'u' (user id) is double; ids must "
        "be integers or strings"]
