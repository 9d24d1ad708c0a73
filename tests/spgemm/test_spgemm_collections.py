"""SpGEMM with Dask collections: DataFrame / Array inputs equal the scipy inputs' product,
``keep="workers"`` leaves C on the workers as a dask array, and no value (of A, B or C)
is sent to the client on the way."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from spgemm_helpers import assert_same_product, random_matrix

from daskhpc._dask_internals import outgoing_log
from daskhpc.errors import InputError
from daskhpc.runtime import worker_addresses
from daskhpc.spgemm import multiply

dd = pytest.importorskip("dask.dataframe")
pd = pytest.importorskip("pandas")
da = pytest.importorskip("dask.array")

A = random_matrix(48, 40, 0.1, 3)
B = random_matrix(40, 44, 0.1, 4)
QUIET = {"progress": False, "plan": False, "measure_memory": False}


def triplets(m, npartitions=3, names=("row", "col", "value")):
    c = sp.coo_array(m)
    df = pd.DataFrame({names[0]: c.row.astype(np.int64), names[1]: c.col.astype(np.int64),
                       names[2]: c.data})
    return dd.from_pandas(df.sample(frac=1.0, random_state=0), npartitions=npartitions)


def to_client(client):
    """Bytes per key prefix the workers sent to anything but a worker (client, scheduler),
    from the workers' own transfer logs; call again for the difference."""
    def sent(dask_worker):
        return [(e["who"], dict(e["keys"])) for e in outgoing_log(dask_worker)]
    workers = set(worker_addresses(client))
    out = {}
    for log in client.run(sent).values():
        for who, keys in log:
            if who in workers:
                continue
            for k, n in keys.items():
                out[str(k)] = n
    return out


@pytest.fixture(autouse=True)
def _client2_is_current(client2):
    """C kept on the workers is client2's futures: ``C.compute()`` computes with the
    current client, as a user's one client is (the session has several)."""
    with client2.as_current():
        yield


def test_frame_and_array_equal_scipy(client2):
    ref = multiply(A, B, client=client2, grid="2x2x1", batches=2, **QUIET).matrix
    got = multiply(triplets(A), triplets(B, 2, ("i", "j", "x")), client=client2,
                   grid="2x2x1", batches=2, **QUIET)
    # the same blocks, the same kernels: the same C, bit for bit
    assert (sp.csr_array(got.matrix) != sp.csr_array(ref)).nnz == 0
    assert got.info["input"]["collections"]["A"]["pieces"] == 3
    arr = da.from_array(sp.csr_matrix(A), chunks=(20, 16), asarray=False)
    mixed = multiply(arr, B, client=client2, grid="1x1x2", batches=3, **QUIET)
    assert_same_product(mixed.matrix, A @ B)


def test_frame_columns_named(client2):
    ddf = triplets(A).rename(columns={"row": "u", "col": "v", "value": "w"})[["w", "v", "u"]]
    got = multiply(ddf, B, client=client2, grid="1x1x2", columns=["u", "v", "w"], **QUIET)
    assert_same_product(got.matrix, A @ B)


def test_keep_workers_is_a_dask_array(client2):
    a, b = random_matrix(300, 200, 0.05, 5), random_matrix(200, 240, 0.05, 6)
    before = to_client(client2)
    res = multiply(triplets(a), triplets(b), client=client2, grid="2x2x1", batches=2,
                   keep="workers", **QUIET)
    C = res.matrix
    assert isinstance(C, da.Array) and C.shape == (300, 240)
    assert isinstance(C._meta, sp.csr_matrix)
    # one chunk per batch piece: q = 2 row blocks by b * l = 2 sub-blocks of q = 2 blocks
    assert C.numblocks == (2, 4)
    sent = {k: n for k, n in to_client(client2).items() if k not in before}
    values = 8 * (a.nnz + b.nnz)         # 8 bytes a value; C's would be 8 * (a @ b).nnz
    # what reached the client: the pins (int32 ids) and small summaries, no value
    assert not [k for k in sent if "-select-" in k or "-part-" in k or "spgemm-chunk" in k
                or "-consume'" in k or "_frame_piece" in k]
    assert sum(n for k, n in sent.items() if "_pins" not in k) < values / 4
    assert_same_product(C.compute(), a @ b)
    # and on from there without C coming to the client
    before = to_client(client2)
    again = multiply(C, b.T, client=client2, grid="1x1x2", keep="workers", **QUIET)
    sent = {k: n for k, n in to_client(client2).items() if k not in before}
    assert not [k for k in sent if "spgemm-c-" in k or "spgemm-chunk" in k
                or "_block_piece" in k]
    assert sum(n for k, n in sent.items() if "_pins" not in k) < 8 * (a @ b).nnz / 4
    assert_same_product(again.matrix.compute(), (a @ b) @ b.T)


def test_keep_workers_without_permutation_keeps_pieces_in_place(client2):
    res = multiply(A, B, client=client2, grid="1x1x2", batches=2, seed=None, keep="workers",
                   **QUIET)
    C = res.matrix
    assert C.chunks == ((48,), (11, 11, 11, 11))
    assert_same_product(C.compute(), A @ B)
    pruned = multiply(A, B, client=client2, grid="1x1x2", batches=2, consume="prune:2",
                      keep="workers", **QUIET).matrix
    ref = multiply(A, B, client=client2, grid="1x1x2", batches=2, consume="prune:2",
                   **QUIET).matrix
    assert (sp.csr_array(pruned.compute()) != sp.csr_array(ref)).nnz == 0


def test_keep_refused_where_nothing_is_kept(client2):
    with pytest.raises(InputError, match="keep='workers' needs a consumer that keeps C"):
        multiply(A, B, client=client2, consume="count", keep="workers", **QUIET)
    with pytest.raises(InputError, match="keep must be one of 'client', 'workers'"):
        multiply(A, B, client=client2, keep="disk", **QUIET)


def test_bad_frame_one_line(client2):
    c = sp.coo_array(A)
    bad = dd.from_pandas(pd.DataFrame({"row": c.row.astype(float), "col": c.col,
                                       "value": c.data}), npartitions=2)
    with pytest.raises(InputError) as e:
        multiply(bad, client=client2, **QUIET)
    assert str(e.value) == "A: column 'row' is float64; ids must be integers (0-based)"


@pytest.mark.slow
def test_enron_keep_workers(client2, shared_data, tmp_path):
    """email-Enron A·A from a Parquet file the workers read, C left on the workers, equal
    to scipy's."""
    from daskhpc.io import read

    a = read(shared_data / "graphs" / "email-Enron.txt.gz").matrix
    c = sp.coo_array(a)
    pd.DataFrame({"row": c.row.astype(np.int64), "col": c.col.astype(np.int64),
                  "value": c.data}).to_parquet(tmp_path / "A.parquet", row_group_size=100_000)
    A = dd.read_parquet(tmp_path / "A.parquet", split_row_groups=True)
    res = multiply(A, client=client2, grid="1x1x2", memory_per_worker="40MB",
                   keep="workers", progress=False)
    assert res.nbatches > 1 and isinstance(res.matrix, da.Array)
    assert res.matrix.numblocks == (1, 2 * res.nbatches)
    assert_same_product(res.matrix.compute(), a @ a)


def _cblock_of_batch_1(key) -> bool:
    return (isinstance(key, tuple) and len(key) > 1 and isinstance(key[0], str)
            and key[0].startswith("spgemm-") and key[0].endswith("-cblock") and key[1] == 1)


@pytest.mark.slow              # a private cluster, a SIGKILL, a nanny restart: 30-90 s
@pytest.mark.timeout(900)
def test_a_lost_worker_costs_a_restart_its_blocks_read_again(make_client, tmp_path):
    """The killed worker's cell blocks were built there from the frames (no copy on the
    client): they are read again and built on the new worker; C is the scipy product."""
    from daskhpc.testing import KillOnce

    client = make_client(2)
    marker = tmp_path / "killed"
    client.register_plugin(KillOnce(_cblock_of_batch_1, str(marker)), name="kill")
    res = multiply(triplets(A), triplets(B), client=client, grid="2x2x1", batches=3,
                   max_restarts=2, **QUIET)
    rec = res.report()["recovery"]["recoveries"]
    assert rec[0]["lost"] == [marker.read_text().split()[0]] and rec[0]["moved"]
    assert_same_product(res.matrix, A @ B)
