"""Linear training from a Dask Array of scipy.sparse row chunks: the same model as from
the in-memory matrix bit for bit, the values never at the client; bad collections
refused in one line."""

from __future__ import annotations

import re

import numpy as np
import pytest
import scipy.sparse as sp

from daskhpc.errors import InputError
from daskhpc.runtime import worker_addresses
from daskhpc.linear import fit

da = pytest.importorskip("dask.array")

RUN = {"epochs": 2, "batch": 4, "progress": False}


def data(seed=0, M=240, F=30):
    rng = np.random.default_rng(seed)
    X = sp.random(M, F, density=0.15, random_state=seed, format="csr")
    return X, rng.integers(0, 3, M)


def chunked(X, rows=70):
    parts = [X[i:i + rows] for i in range(0, X.shape[0], rows)]
    return da.concatenate([da.from_array(p, chunks=p.shape, asarray=False) for p in parts])


def _besides_ids_and_finals(keys, *also) -> list:
    """Keys of ``keys`` that are neither ids (``_pins``, ``_summary``, ``also``) nor the
    final weights: from the final tasks, or from the last steps' tasks that give them
    (one per worker, all at the run's last step)."""
    last = {m.group(1) for k in keys
            if (m := re.fullmatch(r"\('linear-\w+', 'w\d+', (\d+), ''\)", k))}
    assert len(last) <= 1, last
    return [k for k in keys if not k.startswith(("_pins", "_summary", "('linear-final", *also))
            and not re.fullmatch(r"\('linear-\w+', 'w\d+', \d+, ''\)", k)]


def test_row_chunks_equal_the_matrix(client2):
    X, y = data()
    # binary features and the hinge loss: integer gradients, so the serial reference (its
    # gradients summed densely) is bit for bit the run's; with float gradients it is
    # equal up to their reassociation only (it differed in the last bit of one weight
    # with numpy 2.4 / scipy 1.17)
    X.data[:] = 1.0
    opts = dict(RUN, loss="hinge")
    ref = fit(X, y, 2, client=client2, **opts)
    got = fit(chunked(X), da.from_array(y, chunks=100), 2, client=client2,
              check_serial=True, **opts)
    assert np.array_equal(ref.w, got.w)
    assert [h["train_accuracy"] for h in ref.history] == \
        [h["train_accuracy"] for h in got.history]
    assert got.report()["serial_check"]["identical"]
    assert got.report()["input"]["nnz"] == X.nnz

    def sent(dask_worker):
        return [(e["who"], dict(e["keys"])) for e in dask_worker.transfer_outgoing_log]

    workers = set(worker_addresses(client2))
    before = {str(k) for log in client2.run(sent).values() for who, keys in log
              if who not in workers for k in keys}
    fit(chunked(X), y, 2, client=client2, **RUN)
    new = {str(k): n for log in client2.run(sent).values() for who, keys in log
           if who not in workers for k, n in keys.items() if str(k) not in before}
    assert any("_pins" in k for k in new)                  # the ids came, and only they
    assert not _besides_ids_and_finals(new)


def test_test_set_as_collections_is_evaluated_on_the_workers(client2):
    """X_test as a Dask Array of row chunks (narrower than X: padded, as in memory) and
    y_test as a Dask Array: the same test accuracy as in memory, and nothing of X_test
    but its pins reaches the client (the parts' test rows are built on their workers and
    their correct counts summed)."""
    X, y = data(3)
    Xt, yt = data(4, M=90, F=26)
    ref = fit(X, y, 2, test=(Xt, yt), client=client2, **RUN)

    def sent(dask_worker):
        return [(e["who"], dict(e["keys"])) for e in dask_worker.transfer_outgoing_log]

    workers = set(worker_addresses(client2))
    before = {str(k) for log in client2.run(sent).values() for who, keys in log
              if who not in workers for k in keys}
    got = fit(chunked(X), y, 2, test=(chunked(Xt, 40), da.from_array(yt, chunks=50)),
              client=client2, **RUN)
    new = {str(k) for log in client2.run(sent).values() for who, keys in log
           if who not in workers for k in keys if str(k) not in before}
    assert [h["test_accuracy"] for h in got.history] == \
        [h["test_accuracy"] for h in ref.history]
    assert [h["test_loss"] for h in got.history] == [h["test_loss"] for h in ref.history]
    assert np.array_equal(ref.w, got.w) and got.report()["input"]["test"] == "dask.array"
    assert not _besides_ids_and_finals(new, "finalize")
    with pytest.raises(InputError, match=r"^test labels: 89 labels for 90 rows of the "
                                         r"test X$"):
        fit(chunked(X), y, 2, test=(chunked(Xt, 40), da.from_array(yt[:89], chunks=50)),
            client=client2, **RUN)


def test_resume_of_a_finished_run_gives_the_saved_result(client2, tmp_path):
    """Every epoch in the checkpoint: the parts' final values are made on the workers
    that hold the parts (the client has no statics to replay them), nothing trains."""
    X, y = data(2)
    first = fit(chunked(X), y, 2, client=client2, checkpoint=tmp_path, **RUN)
    again = fit(chunked(X), y, 2, client=client2, checkpoint=tmp_path, resume=True, **RUN)
    assert np.array_equal(first.w, again.w)
    assert [h["train_accuracy"] for h in first.history] == \
        [h["train_accuracy"] for h in again.history]
    assert again.report()["recovery"]["already_complete"] == {"units": 2,
                                                               "unit_name": "epochs"}


def test_bad_collections_are_one_line(client2):
    X, y = data(1, 50, 8)
    Xd = X.toarray()
    Xd[7, 3] = np.nan
    with pytest.raises(InputError, match=r"^X: values holds NaN or infinite values in "
                                         r"chunk 0 \(1 of them\)$"):
        fit(da.from_array(Xd, chunks=(25, 8)), y, 2, client=client2, **RUN)
    unknown = chunked(X, 25)
    unknown = unknown[da.from_array(y, chunks=25) >= 0]
    with pytest.raises(InputError, match="^X: the Dask Array's chunk sizes are unknown"):
        fit(unknown, y, 2, client=client2, **RUN)
    with pytest.raises(InputError, match="^y: 49 labels for 50 rows of X$"):
        fit(chunked(X, 25), da.from_array(y[:49], chunks=25), 2, client=client2, **RUN)


@pytest.mark.slow              # a private cluster, a SIGKILL, a nanny restart: 30-90 s
@pytest.mark.timeout(900)
def test_a_lost_worker_costs_a_restart_its_rows_read_again(make_client, tmp_path,
                                                          unit_tasks):
    """The killed worker's part was built there from X's chunks (no copy on the client):
    X is read again, the part routed to its new worker, and the model is the in-memory
    one."""
    from daskhpc.testing import KillOnce, TaskKey

    client = make_client(2)
    X, y = data()
    run = dict(RUN, epochs=3)
    ref = fit(X, y, 2, client=client, **run)
    marker = tmp_path / "killed"
    client.register_plugin(KillOnce(TaskKey("linear-"), str(marker), nth=2), name="kill")
    got = fit(chunked(X), da.from_array(y, chunks=100), 2, client=client, max_restarts=2,
              checkpoint=tmp_path / "ck", **run)
    rec = got.report()["recovery"]["recoveries"]
    assert rec[0]["lost"] == [marker.read_text().split()[0]] and rec[0]["moved"]
    assert np.array_equal(ref.w, got.w)
    assert [h["train_accuracy"] for h in ref.history] == \
        [h["train_accuracy"] for h in got.history]
