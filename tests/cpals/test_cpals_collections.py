"""CP-ALS from a Dask DataFrame of nonzeros: the same factors as from the in-memory COO,
bit for bit (duplicates summed alike), the values never at the client, and bad
collections refused in one line."""

from __future__ import annotations

import numpy as np
import pytest

from daskhpc._dask_internals import outgoing_log
from daskhpc.cpals import fit
from daskhpc.errors import InputError
from daskhpc.runtime import worker_addresses

dd = pytest.importorskip("dask.dataframe")
pd = pytest.importorskip("pandas")

SHAPE = (14, 11, 9)
RUN = {"iters": 4, "tol": 0, "progress": False}


def nonzeros(n=2500, seed=0):
    rng = np.random.default_rng(seed)
    coords = rng.integers(0, SHAPE, size=(n, 3)).T          # with duplicates
    return coords, rng.random(n)


def frame(coords, vals, npartitions=3):
    df = pd.DataFrame({"i": coords[0], "j": coords[1], "k": coords[2], "v": vals})
    return dd.from_pandas(df, npartitions=npartitions)


@pytest.mark.parametrize("grain, partition", [("fine", "random"), ("coarse", "block")])
def test_frame_equals_coo(client2, grain, partition):
    coords, vals = nonzeros()
    ref = fit((coords, vals, SHAPE), 3, 2, grain=grain, partition=partition,
              client=client2, **RUN)
    got = fit(frame(coords, vals), 3, 2, grain=grain, partition=partition, client=client2,
              check_serial=True, **RUN)
    for a, b in zip(ref.factors, got.factors):
        assert np.array_equal(a, b)
    assert np.array_equal(ref.weights, got.weights)
    # ||X||^2 is summed part by part: the fit agrees to rounding
    np.testing.assert_allclose(got.fit, ref.fit, rtol=1e-13, atol=1e-15)
    assert got.report()["serial_check"]["identical"]
    assert got.report()["input"]["nnz"] == ref.report()["input"]["nnz"]


def test_values_stay_on_the_workers(client2):
    coords, vals = nonzeros(20000, 1)

    def sent(dask_worker):
        return [(e["who"], dict(e["keys"])) for e in outgoing_log(dask_worker)]

    def to_client():
        workers = set(worker_addresses(client2))
        return {str(k): n for log in client2.run(sent).values() for who, keys in log
                if who not in workers for k, n in keys.items()}

    before = to_client()
    fit(frame(coords, vals, 4), 3, 2, grain="fine", partition="random", client=client2,
        **RUN)
    new = {k: n for k, n in to_client().items() if k not in before}
    assert any("_pins" in k for k in new)                 # the ids came, and only they
    assert not [k for k in new if "daskhpc-cpals-" in k or "_frame_piece" in k]
    assert sum(n for k, n in new.items() if "_pins" not in k) < 8 * vals.size / 10


def test_named_columns_and_shape(client2):
    coords, vals = nonzeros(400, 2)
    ddf = frame(coords, vals)[["v", "k", "i", "j"]]
    got = fit(ddf, 2, 2, columns=["i", "j", "k", "v"], shape=(20, 11, 9), grain="fine",
              partition="random", client=client2, **RUN)
    ref = fit((coords, vals, (20, 11, 9)), 2, 2, grain="fine", partition="random",
              client=client2, **RUN)
    assert [f.shape[0] for f in got.factors] == [20, 11, 9]
    for a, b in zip(ref.factors, got.factors):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("change, expect", [
    (lambda c, v: (c, np.where(np.arange(v.size) == 5, np.nan, v)),
     "tensor: the value column 'v' holds NaN or infinite values in partition 0 (1 of them)"),
    (lambda c, v: (np.where((np.arange(3)[:, None] == 0) & (np.arange(c.shape[1]) == 7),
                            -1, c), v),
     "tensor: column 'i' holds a negative id (-1) in partition 0; ids are 0-based"),
    (lambda c, v: (c * np.array([[1], [1], [0]]), v),
     "tensor: mode 3 has a single slice (size 1); drop that mode"),
    (lambda c, v: (c, 0 * v), "tensor: the tensor is all zeros"),
])
def test_bad_frames(client2, change, expect):
    coords, vals = change(*nonzeros(300, 3))
    with pytest.raises(InputError) as e:
        fit(frame(coords, vals), 2, 2, client=client2, **RUN)
    assert str(e.value).startswith(expect) and "\n" not in str(e.value)


def test_svd_init_needs_the_values(client2):
    coords, vals = nonzeros(300, 4)
    with pytest.raises(InputError, match="init='svd' needs the tensor's values on the client"):
        fit(frame(coords, vals), 2, 2, init="svd", client=client2, **RUN)


def test_array_of_coo_chunks(client2):
    sparse = pytest.importorskip("sparse")
    da = pytest.importorskip("dask.array")
    dense = np.random.default_rng(5).random(SHAPE)
    dense[dense < 0.8] = 0.0
    x = da.from_array(dense, chunks=(7, 11, 5)).map_blocks(sparse.COO.from_numpy,
                                                            dtype=np.float64)
    got = fit(x, 2, 2, grain="fine", partition="random", client=client2, **RUN)
    ref = fit(sparse.COO.from_numpy(dense), 2, 2, grain="fine", partition="random",
              client=client2, **RUN)
    for a, b in zip(ref.factors, got.factors):
        assert np.array_equal(a, b)


@pytest.mark.slow              # a private cluster, a SIGKILL, a nanny restart: 30-90 s
@pytest.mark.timeout(900)
def test_a_lost_worker_costs_a_restart_its_parts_read_again(make_client, tmp_path,
                                                           unit_tasks):
    """The killed worker's part values were routed there from the frame (no copy on the
    client): the frame is read again, the part built on its new worker, and the factors
    are the in-memory run's. (A task per iteration, ``unit_tasks``: the worker dies at
    its second one, mid-run.)"""
    import sparse

    from daskhpc.testing import KillOnce, TaskKey

    client = make_client(2)
    coords, vals = nonzeros()
    run = dict(RUN, iters=5)
    ref = fit(sparse.COO(coords, vals, shape=SHAPE), 3, 2, client=client, **run)
    marker = tmp_path / "killed"
    client.register_plugin(KillOnce(TaskKey("cpals-"), str(marker), nth=2), name="kill")
    got = fit(frame(coords, vals), 3, 2, client=client, max_restarts=2,
              checkpoint=tmp_path / "ck", **run)
    rec = got.report()["recovery"]["recoveries"]
    assert rec[0]["lost"] == [marker.read_text().split()[0]] and rec[0]["moved"]
    assert np.array_equal(ref.weights, got.weights)
    assert all(np.array_equal(a, b) for a, b in zip(ref.factors, got.factors))


@pytest.mark.slow              # two runs (the default run has linear's and gcn's)
def test_resume_of_a_finished_run_gives_the_saved_result(client2, tmp_path):
    coords, vals = nonzeros(800, seed=3)
    first = fit(frame(coords, vals), 3, 2, client=client2, checkpoint=tmp_path, **RUN)
    again = fit(frame(coords, vals), 3, 2, client=client2, checkpoint=tmp_path,
                resume=True, **RUN)
    assert np.array_equal(first.weights, again.weights) and first.fit == again.fit
    assert all(np.array_equal(a, b) for a, b in zip(first.factors, again.factors))
    assert again.report()["recovery"]["already_complete"]["units"] == RUN["iters"]


def test_client_keeps_no_pins(client2):
    """Once in canonical order the collection's ids leave the client (int32 indices of the
    unique nonzeros stay, and a placeholder for the values that takes no memory)."""
    from daskhpc.cpals._collect import read_tensor

    coords, vals = nonzeros()
    X, nz, can = read_tensor(client2, frame(coords, vals))
    try:
        assert nz.pins is None and can.canon.dtype == np.int32
        assert X.coords.dtype == np.int32 and X.vals.strides == (0,)
        assert can.canon.size == 2500 and X.nnz == np.unique(coords, axis=1).shape[1]
    finally:
        nz.release()
    _, nz, _ = read_tensor(client2, frame(coords, vals), keep_pins=True)   # check_serial
    try:
        assert nz.pins.shape == (3, 2500)
    finally:
        nz.release()
    # already in canonical order (sorted, unique): the ids are the tensor's, no copy
    u = np.unique(coords, axis=1)
    X, nz, can = read_tensor(client2, frame(u, np.ones(u.shape[1])))
    try:
        assert can.canon is None and nz.pins is None and np.array_equal(X.coords, u)
    finally:
        nz.release()


def test_sorted_frame_equals_coo(client2):
    coords, vals = nonzeros()
    u, first = np.unique(coords, axis=1, return_index=True)
    ref = fit((u, vals[first], SHAPE), 3, 2, partition="random", client=client2, **RUN)
    got = fit(frame(u, vals[first]), 3, 2, partition="random", client=client2, **RUN)
    assert all(np.array_equal(a, b) for a, b in zip(ref.factors, got.factors))
