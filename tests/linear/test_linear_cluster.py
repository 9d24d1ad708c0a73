"""Training on real clusters (a9a, P = 4): the cluster equals fit_local (the partition-aware
serial reference) bit for bit and the plain serial reference within 1e-12, reruns are
identical, what moves between workers is the plan plus framing, and a killed worker or a
checkpoint + resume gives the same model."""

from __future__ import annotations

import json

import numpy as np
import pytest

import daskhpc.linear as lin
from daskhpc import datasets
from daskhpc.testing import KillOnce, TaskKey

KW = dict(nparts=4, batch=512, epochs=2)
_LOCAL: dict = {}


@pytest.fixture(scope="module")
def a9a():
    return datasets.libsvm(), datasets.libsvm("test")


def local(a9a, **kw):
    key = tuple(sorted(kw.items()))
    if key not in _LOCAL:
        _LOCAL[key] = lin.fit_local(a9a[0], test=a9a[1], **{**KW, **kw})
    return _LOCAL[key]


def same_history(a, b, keys=("train_loss", "train_accuracy", "test_accuracy", "sent_bytes")):
    return [[h.get(k) for k in keys] for h in a.history] == \
        [[h.get(k) for k in keys] for h in b.history]


@pytest.mark.parametrize("exchange", ["direct", "graph"])
def test_cluster_equals_fit_local_bitwise_and_serial_within_1e_12(client3, a9a, exchange):
    r = lin.fit(a9a[0], test=a9a[1], client=client3, check_serial=True, exchange=exchange,
                **KW)
    assert r.report()["execution"]["exchange"] == exchange
    want = local(a9a)
    assert np.array_equal(r.w, want.w) and same_history(r, want)
    check = r.report()["serial_check"]
    assert check["within_tolerance"] is True and check["rtol"] == 1e-12
    m = r.report()["measured"]
    # P = 4 on 3 workers: parts 0 and 3 share one; messages between them never move
    assert m["inter_worker_messages"] == m["planned_messages"] > 0
    assert 0 < m["framing_bytes_per_message"] < 1000
    for h in r.history:
        assert h["measured_bytes"] >= h["planned_bytes"] > 0


def test_topk_on_the_cluster_equals_fit_local(client3, a9a):
    kw = dict(topk=12, epochs=1, loss="hinge", allreduce="ssar_rec_dbl")
    r = lin.fit(a9a[0], test=a9a[1], client=client3, **{**KW, **kw})
    want = local(a9a, **kw)
    assert np.array_equal(r.w, want.w) and same_history(r, want)
    # Top-k, k = 12, Rec_Dbl at P = 4 over T = 16 calls: stage 0 sends each part's k
    # items, stage 1 the union of two parts' (k .. 2k items): 2 P k T .. 3 P k T in all
    assert 2 * 4 * 12 * 16 <= r.history[0]["items"] <= 3 * 4 * 12 * 16
    again = lin.fit(a9a[0], test=a9a[1], client=client3, **{**KW, **kw})
    assert np.array_equal(again.w, r.w)                         # reruns: the same bits


@pytest.mark.parametrize("exchange", ["direct", pytest.param("graph", marks=pytest.mark.slow)])
def test_a_killed_worker_gives_the_same_model(make_client, a9a, tmp_path, exchange, unit_tasks):
    client = make_client(3)
    # per epoch T = 16 calls of 2 steps + 1: kill the worker running step 10 of epoch 1
    # (graph: that step's task; direct: the epoch's one task per worker, keyed by the
    # epoch's last step)
    steps = 2 * 16 + 1
    step = steps + 10 if exchange == "graph" else 2 * steps - 1
    client.register_plugin(KillOnce(TaskKey("linear-", {2: step}),
                                    str(tmp_path / "killed")), name="kill")
    r = lin.fit(a9a[0], test=a9a[1], client=client, checkpoint=tmp_path / "ck",
                max_restarts=2, exchange=exchange, **KW)
    rec = r.report()["recovery"]["recoveries"]
    assert len(rec) == 1 and rec[0]["lost"] and rec[0]["restart"] == 1
    assert np.array_equal(r.w, local(a9a).w) and same_history(r, local(a9a))


def run_cli(argv, client):
    """``daskhpc run linear ...`` parsed by the real CLI parser, run on ``client``."""
    from daskhpc.testing import workflow_call

    wf, call, run = workflow_call("run", "linear", argv, client)
    wf.check(call)
    return wf.run(call, run)


def test_checkpoint_resume_through_the_cli(client3, tmp_path, a9a):
    from daskhpc.errors import InputError

    ck = tmp_path / "ck"
    base = [datasets.path("libsvm"), "--test", datasets.path("libsvm-test"), "--parts", "4",
            "--batch", "512", "--checkpoint", str(ck)]
    first = run_cli(base + ["--epochs", "1"], client3)
    assert first["recovery"]["saved"] == 1 and first["recovery"]["resumed_from"] is None
    with pytest.raises(InputError, match="pass --resume"):
        run_cli(base + ["--epochs", "2"], client3)
    rep = run_cli(base + ["--epochs", "2", "--resume"], client3)
    assert rep["recovery"]["resumed_from"] == 1 and rep["recovery"]["saved"] == 2
    want = local(a9a)
    assert len(rep["timing"]["per_iteration_s"]) == 2           # the history of both epochs
    json.dumps(rep)                                               # plain values only
    assert rep["quality"]["test_accuracy"] == want.history[-1]["test_accuracy"]
    assert rep["quality"]["train_loss"] == want.history[-1]["train_loss"]
    assert {"tot_vol", "sum_max_msgs", "phases"} <= set(rep["plan"])
    with pytest.raises(InputError, match="run with other options"):
        run_cli(base + ["--epochs", "2", "--resume", "--lr", "0.1"], client3)
