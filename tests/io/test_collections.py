"""Dask collections as input (daskhpc.io._collections): what is read, what is refused
(one line, nothing left on the workers), and the extra named when pandas is missing."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from daskhpc.errors import InputError
from daskhpc.io import is_collection, labels_route, read_nonzeros, route
from daskhpc.runtime import worker_addresses

dd = pytest.importorskip("dask.dataframe")
pd = pytest.importorskip("pandas")
da = pytest.importorskip("dask.array")


def frame(rows, cols, vals, npartitions=2, **more):
    data = {"row": rows, "col": cols, **more, "value": vals}
    return dd.from_pandas(pd.DataFrame(data), npartitions=npartitions)


def held(client) -> set:
    """The keys in the workers' memory."""
    return {k for keys in client.run(lambda dask_worker: list(dask_worker.data)).values()
            for k in keys}


def added(client, before: set) -> set:
    """Keys held now that were not held ``before``, waiting (up to 30 s) for releases in
    flight: a count would race with the earlier tests' own releases, a set does not."""
    import time

    deadline = time.monotonic() + 30
    while True:
        new = held(client) - before
        if not new or time.monotonic() > deadline:
            return new
        time.sleep(0.05)


def test_detection_imports_nothing():
    code = ("import sys, numpy, daskhpc.io as io; print(io.is_collection(numpy.ones(2)), "
            "'dask.dataframe' in sys.modules, 'pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "False", "False"]


def test_frame_pins_and_pieces(client2):
    ddf = frame([0, 3, 1, 2, 4], [1, 0, 2, 2, 0], [1.0, 2.0, 3.0, 4.0, 5.0], npartitions=3)
    assert is_collection(ddf) and not is_collection(ddf.compute())
    nz = read_nonzeros(ddf, client2, order=2, name="A")
    try:
        assert nz.shape == (5, 3) and nz.nnz == 5 and nz.pins.dtype == np.int32
        assert nz.pins.tolist() == [[0, 3, 1, 2, 4], [1, 0, 2, 2, 0]]
        assert nz.offsets.tolist()[0] == 0 and nz.offsets[-1] == 5 and len(nz.pieces) == 3
        assert nz.gather_values(client2).tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]
        # every nonzero to part (row % 2), built on the chosen worker
        w = worker_addresses(client2)
        parts = route(client2, nz, labels_route(nz.pins[0] % 2, nz.offsets, 2),
                      {0: w[0], 1: w[1]}, _join, with_ids=True)
        got = client2.gather(parts)
        assert got[0] == ([0, 2, 4], [1.0, 4.0, 5.0]) and got[1] == ([3, 1], [2.0, 3.0])
        where = client2.who_has(list(parts.values()))
        assert [where[parts[p].key] for p in (0, 1)] == [(w[0],), (w[1],)]
    finally:
        nz.release()


def test_parts_routed_again_from_the_files(client2, tmp_path):
    """After a lost worker: the pieces computed again from the collection (the Parquet
    files read again) and only the wanted parts routed, equal to the first route; a
    collection whose files changed meanwhile is refused."""
    rows = [[0, 3, 1], [2, 4]]
    for k, r in enumerate(rows):
        pd.DataFrame({"row": r, "col": [1] * len(r), "value": [float(x) for x in r]}) \
            .to_parquet(tmp_path / f"{k}.parquet")
    nz = read_nonzeros(dd.read_parquet(tmp_path), client2, order=2, name="A")
    w = worker_addresses(client2)
    takes = labels_route(nz.pins[0] % 2, nz.offsets, 2)
    first = client2.gather(route(client2, nz, takes, {0: w[0], 1: w[1]}, _join, with_ids=True))
    nz.release()
    nz.reread(client2)
    again = route(client2, nz, takes, {0: w[0], 1: w[0]}, _join, with_ids=True, parts=[1])
    keys = [f.key for f in nz.pieces]
    try:
        assert list(again) == [1] and client2.gather(again[1]) == first[1]
        assert client2.who_has([again[1]])[again[1].key] == (w[0],)
    finally:
        nz.release()
        again[1].release()
    # the scheduler forgets released keys asynchronously: a read while it still holds the
    # old pieces gets them back (the same keys), not the rewritten file (a race that
    # failed this test under load)
    _wait_forgotten(client2, keys)
    pd.DataFrame({"row": [2, 4, 0], "col": [1] * 3, "value": [1.0] * 3}) \
        .to_parquet(tmp_path / "1.parquet")
    with pytest.raises(RuntimeError, match=r"^A: the collection changed since it was read "
                                           r"\(items per partition \[3, 2\], now \[3, 3\]\)"):
        nz.reread(client2)
    assert nz.pieces == []


def _held(keys, dask_scheduler=None):
    return [k for k in keys if k in dask_scheduler.tasks]


def _wait_forgotten(client, keys, timeout: float = 30.0):
    import time

    deadline = time.monotonic() + timeout
    while client.run_on_scheduler(_held, keys):
        assert time.monotonic() < deadline, "the scheduler kept released keys"
        time.sleep(0.01)


def _join(arg, *segments):
    rows = [int(x) for s in segments for x in s[0][0]]
    return rows, [float(x) for s in segments for x in s[1]]


def test_arrays_of_sparse_chunks(client2):
    import sparse

    m = sp.random(7, 5, density=0.4, random_state=1, format="csr")
    x = da.from_array(m, chunks=(3, 2), asarray=False)
    nz = read_nonzeros(x, client2, order=2)
    dense = np.random.default_rng(2).random((4, 3, 5))
    dense[dense < 0.7] = 0.0
    t = sparse.COO.from_numpy(dense)
    # sparse.COO chunks made from numpy chunks (slicing a COO compiles numba: slow)
    y = da.from_array(dense, chunks=(2, 2, 5)).map_blocks(sparse.COO.from_numpy,
                                                          dtype=np.float64)
    nt = read_nonzeros(y, client2, min_order=3)
    try:
        assert nz.shape == (7, 5) and nz.columns == ["chunks"]
        back = sp.csr_array((nz.gather_values(client2), tuple(nz.pins)), shape=nz.shape)
        assert (back != m).nnz == 0
        assert nt.shape == (4, 3, 5) and nt.nnz == t.nnz
        got = sparse.COO(nt.pins.astype(np.int64), nt.gather_values(client2), shape=nt.shape)
        assert np.array_equal(got.todense(), t.todense())
    finally:
        nz.release()
        nt.release()


@pytest.mark.parametrize("make, expect", [
    (lambda: frame([0.0, 1.0], [0, 1], [1.0, 2.0]), "A: column 'row' is float64; ids must be integers"),
    (lambda: frame([0, -2], [0, 1], [1.0, 2.0]), "A: column 'row' holds a negative id (-2) in partition 1"),
    (lambda: frame([0, 1], [0, 1], [1.0, np.nan]), "A: the value column 'value' holds NaN or infinite values in partition 1 (1 of them)"),
    (lambda: frame([0, 1], [0, 9], [1.0, 2.0]), "A: column 'col' holds id 9 in partition 1, outside the shape 4 x 4"),
    (lambda: frame([0, 1], [0, 1], ["a", "b"]), "A: value column 'value' is "),
    (lambda: frame([0, 1], [0, 1], [1.0, 2.0], k=[0, 1]), "A: 4 columns (row, col, k, value); need 2 id columns and a value"),
    (lambda: da.from_array(np.arange(4.0), chunks=2), "A: a 1-D Dask Array, need 2-D"),
])
def test_bad_collections_one_line(client2, make, expect):
    before = held(client2)
    with pytest.raises(InputError) as e:
        read_nonzeros(make(), client2, order=2, name="A", shape=(4, 4))
    assert str(e.value).startswith(expect) and "\n" not in str(e.value)
    assert added(client2, before) == set()    # nothing left on the workers


def test_unknown_chunk_sizes(client2):
    x = da.from_array(np.eye(4), chunks=2)
    y = x[x.sum(axis=1) > 0]                          # rows of unknown count
    with pytest.raises(InputError, match=r"chunk sizes are unknown \(nan\); call "
                                         r"\.compute_chunk_sizes\(\) first"):
        read_nonzeros(y, client2, order=2, name="A")


def test_without_pandas_the_extra_is_named():
    code = ("import sys; sys.modules['pandas'] = None\n"
            "from daskhpc.io._collections import dataframe_module\n"
            "from daskhpc.errors import InputError\n"
            "try:\n    dataframe_module()\nexcept InputError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out.startswith('dask.dataframe needs pandas and pyarrow: pip install '
                          '"daskhpc[dataframe]"')
    assert "\n" not in out
