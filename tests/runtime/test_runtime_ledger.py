"""TransferLedger counts what moved between workers, and nothing else."""

from __future__ import annotations

import numpy as np
import pytest

from daskhpc.runtime import TransferLedger, submit_pinned, worker_addresses
from daskhpc.testing import inter_worker_bytes

MIB = 1 << 20
# msgpack header + frame lengths of a one-key get_data reply carrying one
# numpy array; measured 291-293 bytes over TCP depending on the key.
FRAMING = 512


def make(nbytes):
    return np.ones(nbytes // 8)


def nbytes_of(*arrays):
    return sum(a.nbytes for a in arrays)


def test_one_megabyte_between_two_workers(client3, workers3):
    a, b, c = workers3
    before = inter_worker_bytes(client3)
    with TransferLedger(client3) as led:
        futures = submit_pinned(
            client3,
            {"mb-x": (make, MIB), "mb-y": (nbytes_of, "mb-x")},
            {"mb-x": a, "mb-y": b},
            ["mb-x", "mb-y"],
        )
        # The client gathers 1 MiB from a: a who=None entry, not counted.
        x, y = client3.gather(futures)
    assert y == MIB and x.nbytes == MIB
    assert led.messages_total == 1
    assert MIB < led.bytes_total < MIB + FRAMING
    assert led.sizeof_total == MIB
    [entry] = led.entries
    assert (entry["sender"], entry["receiver"], entry["keys"]) == (a, b, {"mb-x": MIB})
    workers, m = led.matrix()
    assert workers == workers3
    assert m.dtype == np.int64 and m.shape == (3, 3)
    assert m[0, 1] == led.bytes_total and m.sum() == led.bytes_total
    assert led.matrix("messages")[1].sum() == 1
    assert led.matrix("sizeof")[1][0, 1] == MIB
    assert led.by_worker()[a] == {
        "sent_bytes": led.bytes_total,
        "received_bytes": 0,
        "sent_messages": 1,
        "received_messages": 0,
    }
    assert led.by_worker()[c]["received_bytes"] == 0
    assert led.report() == {
        "inter_worker_bytes": led.bytes_total,
        "inter_worker_bytes_sizeof": MIB,
        "inter_worker_messages": 1,
    }
    assert inter_worker_bytes(client3) - before == led.bytes_total
    assert "1 messages" in repr(led)


def test_batched_keys_are_one_message_and_local_inputs_are_free(client3, workers3):
    a, b, _ = workers3
    tasks = {
        "bt-1": (make, 8 * 1000),
        "bt-2": (make, 8 * 2000),
        "bt-local": (nbytes_of, "bt-1"),
        "bt-sum": (nbytes_of, "bt-1", "bt-2"),
    }
    where = {"bt-1": a, "bt-2": a, "bt-local": a, "bt-sum": b}
    with TransferLedger(client3) as led:
        assert client3.gather(submit_pinned(client3, tasks, where, ["bt-local", "bt-sum"])) == [
            8000,
            24000,
        ]
    # b fetches both inputs from a in one get_data batch.
    assert led.messages_total == 1
    assert led.entries[0]["keys"] == {"bt-1": 8000, "bt-2": 16000}
    assert led.sizeof_total == 24000


def test_nothing_moved(client3):
    with TransferLedger(client3) as led:
        client3.gather(client3.map(make, [800, 1600]))
    assert led.report() == {
        "inter_worker_bytes": 0,
        "inter_worker_bytes_sizeof": 0,
        "inter_worker_messages": 0,
    }
    assert led.matrix()[1].sum() == 0


def test_results_need_a_stopped_ledger(client3):
    led = TransferLedger(client3)
    assert "not started" in repr(led)
    with pytest.raises(RuntimeError, match="before start"):
        led.stop()
    led.start()
    assert "running" in repr(led)
    with pytest.raises(RuntimeError, match="not been stopped"):
        led.bytes_total
    led.stop()
    assert led.messages_total == 0
    with pytest.raises(ValueError, match="what must be"):
        led.matrix("volume")


def test_worker_leaving_during_measurement_is_reported(make_client):
    client = make_client(2)
    a, b = worker_addresses(client)
    with pytest.warns(RuntimeWarning, match="workers left"):
        with TransferLedger(client) as led:
            client.retire_workers([b], close_workers=True)
    assert led.messages_total == 0


def _step(previous, i):
    import time

    time.sleep(0.05)            # a few transfers per worker between two copies of its log
    return np.full(10, float(i))


def _log_length(dask_worker):
    import dask

    return dask.config.get("distributed.admin.low-level-log-length")


def test_a_run_of_more_transfers_than_dasks_log_holds_is_counted_whole(make_client):
    """Dask's transfer log keeps its default length; the ledger copies it while it is
    open, so a run of more transfers than the log holds (here a log of 8 and 40
    transfers) is counted exactly, as a long run's are."""
    import dask

    with dask.config.set({"distributed.admin.low-level-log-length": 8}):
        client = make_client(2)
    a, b = worker_addresses(client)
    assert set(client.run(_log_length).values()) == {8}
    n = 41
    keys = [f"chain-{i}" for i in range(n)]
    tasks = {k: (_step, keys[i - 1] if i else None, i) for i, k in enumerate(keys)}
    with TransferLedger(client) as led:
        [last] = submit_pinned(client, tasks, {k: (a, b)[i % 2] for i, k in enumerate(keys)},
                               [keys[-1]])
        assert last.result()[0] == n - 1
    assert led.messages_total == n - 1                 # every link of the chain, once
    assert led.by_worker()[a]["sent_messages"] == led.by_worker()[b]["sent_messages"] == 20
    assert led.sizeof_total == 80 * (n - 1)


def test_host_link_bytes_count_what_crosses_a_host():
    from daskhpc.runtime._book import host_link_bytes

    # two workers on host a, one on b: a->a stays in the host, a->b crosses both links
    sent = [("tcp://a:1", "tcp://a:2", 100), ("tcp://a:1", "tcp://b:1", 7),
            ("tcp://b:1", "tcp://a:2", 5)]
    got = host_link_bytes(sent, sent[1:])
    assert got == {"a": {"measured": 12, "planned": 12}, "b": {"measured": 12, "planned": 12}}
    assert host_link_bytes(sent)["a"] == {"measured": 12, "planned": None}
