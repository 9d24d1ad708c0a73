"""GCN from a Dask DataFrame edge list with Dask Array node data: the same run as from
the edge-list file bit for bit (original ids numbered alike), the features never at the
client, predictions as a Dask Array; bad collections refused in one line."""

from __future__ import annotations

import numpy as np
import pytest

from daskhpc._dask_internals import outgoing_log
from daskhpc.errors import InputError
from daskhpc.runtime import worker_addresses
from daskhpc.gcn import fit

dd = pytest.importorskip("dask.dataframe")
pd = pytest.importorskip("pandas")
da = pytest.importorskip("dask.array")

RUN = {"epochs": 2, "partition": "hp", "progress": False}


def edges(seed=0, m=500, nodes=120):
    """Original ids that are neither 0-based nor contiguous (the reader renumbers them)."""
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, nodes, m) * 7 + 3, rng.integers(0, nodes, m) * 7 + 3
    return src, dst, rng.random(m)


def write_snap(path, src, dst, w):
    with open(path, "w") as f:
        f.write("# source target weight\n")
        f.writelines(f"{a}\t{b}\t{float(c)!r}\n" for a, b, c in zip(src, dst, w))
    return path


def node_data(n, seed=1, density=0.5):
    rng = np.random.default_rng(seed)
    X = rng.random((n, 10)) * (rng.random((n, 10)) < density)
    return X, rng.integers(0, 3, n), (np.arange(20), np.arange(20, 40), np.arange(40, 70))


# 0.5: just over half the entries stored, the features are a dense array on the parts;
# 0.2: CSR (gcn._model.features: the whole matrix's choice, on the workers too)
@pytest.mark.parametrize("density, dense", [(0.5, True), (0.2, False)])
def test_edge_frame_equals_the_file(client2, tmp_path, density, dense):
    from daskhpc.gcn._model import dense_features

    src, dst, w = edges()
    n = np.unique(np.concatenate([src, dst])).size
    X, y, split = node_data(n, density=density)
    assert dense_features(np.count_nonzero(X), *X.shape) is dense
    ref = fit(str(write_snap(tmp_path / "g.txt", src, dst, w)), X, y, split, 2,
              client=client2, **RUN)
    ddf = dd.from_pandas(pd.DataFrame({"a": dst, "s": src, "t": dst, "w": w}),
                         npartitions=3)
    before = to_client(client2)
    got = fit(ddf, da.from_array(X, chunks=(25, 4)), da.from_array(y, chunks=40), split, 2,
              columns=["s", "t", "w"], client=client2, check_serial=True, **RUN)
    assert all(np.array_equal(a, b) for a, b in zip(ref.params, got.params))
    assert np.array_equal(ref.logits, got.logits)
    assert isinstance(got.predictions, da.Array)
    assert got.predictions.chunks == ((25,) * (n // 25) + ((n % 25,) if n % 25 else ()),)
    # computed by the client that holds the blocks: the process's default client is the
    # newest one made (another session cluster, in a full test run), which has no such keys
    with client2.as_current():
        assert np.array_equal(got.predictions.compute(), ref.predictions)
    assert got.report()["serial_check"]["identical"]
    assert got.report()["input"]["nodes"] == n
    # what the workers sent the client: dense pins, summaries, the labels, the node
    # count, the features only for check_serial (_block_of), the parts' final values
    new = [k for k in to_client(client2) if k not in before]
    assert any(k.startswith("_dense_pins") for k in new)
    assert not [k for k in new if k.startswith(("_frame_piece", "_edge_unique", "_union",
                                                "_as_piece", "daskhpc-gcn-features"))]


@pytest.mark.parametrize("density", [0.5, 0.2])
def test_float32_features_from_a_collection_are_float32(client2, tmp_path, density):
    # the parts built from a Dask Array kept float64 features in a float32 run: layer 1
    # ran in float64 and the run was not the file's
    src, dst, w = edges(seed=2)
    n = np.unique(np.concatenate([src, dst])).size
    X, y, split = node_data(n, density=density)
    run = dict(RUN, dtype="float32")
    ref = fit(str(write_snap(tmp_path / "g.txt", src, dst, w)), X, y, split, 2,
              client=client2, **run)
    ddf = dd.from_pandas(pd.DataFrame({"s": src, "t": dst, "w": w}), npartitions=2)
    got = fit(ddf, da.from_array(X, chunks=(30, 10)), da.from_array(y, chunks=40), split, 2,
              columns=["s", "t", "w"], client=client2, **run)
    assert all(p.dtype == np.float32 for p in got.params)
    assert all(np.array_equal(a, b) for a, b in zip(ref.params, got.params))
    assert np.array_equal(ref.logits, got.logits)


def to_client(client):
    """Keys the workers have sent to a client (their transfer logs)."""
    def sent(dask_worker):
        return [(e["who"], list(e["keys"])) for e in outgoing_log(dask_worker)]

    workers = set(worker_addresses(client))
    return {str(k) for log in client.run(sent).values() for who, keys in log
            if who not in workers for k in keys}


@pytest.mark.parametrize("make, expect", [
    (lambda s, d, w: pd.DataFrame({"s": s.astype(float), "t": d, "w": w}),
     "edges: column 's' is float64; node ids must be integers"),
    (lambda s, d, w: pd.DataFrame({"s": s, "t": d, "w": np.where(s == s[3], np.nan, w)}),
     "edges: the weight column 'w' holds NaN or infinite values in partition 0"),
    (lambda s, d, w: pd.DataFrame({"s": np.where(s == s[5], -4, s), "t": d}),
     "edges: column 's' holds a negative id (-4) in partition 0"),
])
def test_bad_edge_frame_is_one_line(client2, make, expect):
    src, dst, w = edges(2, 60, 30)
    X, y, split = node_data(np.unique(np.concatenate([src, dst])).size)
    with pytest.raises(InputError) as e:
        fit(dd.from_pandas(make(src, dst, w), npartitions=1), X, y, split, 2,
            client=client2, **RUN)
    assert str(e.value).startswith(expect) and "\n" not in str(e.value)


def test_bad_features_are_one_line(client2):
    src, dst, w = edges(3, 60, 30)
    ddf = dd.from_pandas(pd.DataFrame({"s": src, "t": dst}), npartitions=2)
    n = np.unique(np.concatenate([src, dst])).size
    X, y, split = node_data(n)
    unknown = da.from_array(X, chunks=(10, 10))
    unknown = unknown[unknown[:, 0] >= 0]                  # chunk sizes unknown (nan)
    with pytest.raises(InputError, match="features: the Dask Array's chunk sizes are "
                                         "unknown"):
        fit(ddf, unknown, y, split, 2, client=client2, **RUN)
    X[4, 2] = np.nan
    with pytest.raises(InputError, match=r"^features: NaN or infinite values in chunk 0"):
        fit(ddf, da.from_array(X, chunks=(10, 10)), y, split, 2, client=client2, **RUN)


def test_resume_of_a_finished_run_gives_the_saved_result(client2, tmp_path):
    """Every epoch in the checkpoint: the final evaluation (a forward pass with its
    exchanges) runs on the workers that hold the parts' features, no epoch trains."""
    src, dst, _ = edges(2)
    frame = dd.from_pandas(pd.DataFrame({"s": src, "t": dst}), npartitions=2)
    n = np.unique(np.concatenate([src, dst])).size
    X, y, split = node_data(n)
    first = fit(frame, da.from_array(X, chunks=(50, 10)), y, split, 2, client=client2,
                checkpoint=tmp_path, **RUN)
    again = fit(frame, da.from_array(X, chunks=(50, 10)), y, split, 2, client=client2,
                checkpoint=tmp_path, resume=True, **RUN)
    assert np.array_equal(first.logits, again.logits)
    assert all(np.array_equal(a, b) for a, b in zip(first.params, again.params))
    assert again.report()["recovery"]["already_complete"] == {"units": 2,
                                                               "unit_name": "epochs"}


@pytest.mark.slow              # a private cluster, a SIGKILL, a nanny restart: 30-90 s
@pytest.mark.timeout(900)
def test_a_lost_worker_costs_a_restart_its_features_read_again(make_client, tmp_path,
                                                              unit_tasks):
    """The killed worker's part features were routed there from the Dask Array (no copy
    on the client): they are read again and routed to the new worker; the run equals
    the undisturbed one."""
    from daskhpc.testing import KillOnce, TaskKey

    client = make_client(2)
    src, dst, w = edges()
    frame = dd.from_pandas(pd.DataFrame({"s": src, "t": dst}), npartitions=3)
    n = np.unique(np.concatenate([src, dst])).size
    X, y, split = node_data(n)
    run = dict(RUN, epochs=4)
    ref = fit(frame, da.from_array(X, chunks=(40, 10)), y, split, 2, client=client, **run)
    with client.as_current():          # (its chunks may be on the worker killed below)
        predicted = ref.predictions.compute()
    marker = tmp_path / "killed"
    client.register_plugin(KillOnce(TaskKey("gcn-"), str(marker), nth=2), name="kill")
    got = fit(frame, da.from_array(X, chunks=(40, 10)), y, split, 2, client=client,
              max_restarts=2, checkpoint=tmp_path / "ck", **run)
    rec = got.report()["recovery"]["recoveries"]
    assert rec[0]["lost"] == [marker.read_text().split()[0]] and rec[0]["moved"]
    assert np.array_equal(ref.logits, got.logits)
    with client.as_current():
        assert np.array_equal(predicted, got.predictions.compute())
