"""The allreduce of a Dask Array of vectors (one row per rank): the same totals as from
the in-memory vectors, each rank run on its chunk's worker; bad arrays refused in one
line."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from daskhpc.allreduce import allreduce
from daskhpc.errors import InputError

da = pytest.importorskip("dask.array")


def test_dask_array_equals_the_vectors(client2):
    V = sp.random(4, 800, density=0.04, random_state=3, format="csr")
    ref = allreduce([V[[r]] for r in range(4)], "ssar_rec_dbl", client=client2,
                    progress=False)
    got = allreduce(da.from_array(V, chunks=(2, 400), asarray=False), "ssar_rec_dbl",
                    client=client2, gather=True, check_serial=True, progress=False)
    assert len(got.streams) == 4
    for a, b in zip(ref.streams, got.streams):
        assert np.array_equal(a.to_dense(), b.to_dense())
    assert got.report()["serial_check"]["identical"]
    assert got.report()["input"]["vectors"] == 4
    placed = client2.who_has(got.futures)
    assert len({tuple(placed[f.key]) for f in got.futures}) == 2   # chunk k on worker k


def test_bad_arrays_are_one_line(client2):
    V = np.random.default_rng(0).random((4, 50))
    V[2, 7] = np.inf
    with pytest.raises(InputError, match=r"^vectors: row 2 \(chunk 1\) holds NaN or "
                                         r"infinite values$"):
        allreduce(da.from_array(V, chunks=(2, 50)), client=client2, progress=False)
    X = da.from_array(V, chunks=(2, 50))
    with pytest.raises(InputError, match="^vectors: the Dask Array's chunk sizes are "
                                         "unknown"):
        allreduce(X[X[:, 0] >= 0], client=client2, progress=False)
