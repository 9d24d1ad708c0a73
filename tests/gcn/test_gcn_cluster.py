"""GCN training on real clusters: the cluster run is
the partition-aware serial reference (run_local) bit for bit and the textbook serial epoch
within 1e-10 with identical predictions, twice the same bits, sends what the plan says
(messages, and bytes = planned + the documented framing per transfer), and survives a
killed worker and a resume with the same weights."""

from __future__ import annotations

import numpy as np
import pytest

from daskhpc.comm import run_local
from daskhpc.gcn import fit
from daskhpc.gcn._job import gcn_job, steps_per_epoch
from daskhpc.gcn._program import assemble, program, row, statics
from daskhpc.gcn._serial import run_serial
from daskhpc.gcn._setup import prepare
from daskhpc.runtime import run_job
from daskhpc.runtime import step_of_key
from daskhpc.testing import KillOnce, TaskKey

EPOCHS = 30
# per transfer between two workers, the bytes beyond the payload's float64 words (measured
# with distributed 2026.8, docs/gcn.md), as (per transfer, per part-to-part message in
# it): graph mode (a get_data reply) ~220 B + ~230 B per message + ~155 B per further
# array; direct mode over the Exchange's sockets (pickle protocol 5, out-of-band buffers
# with an 8-byte size each, the run's token) ~140 B + ~64 B per message (over
# distributed's comm it was ~105 B + ~31 B + ~19 B per further array)
FRAMING = {"graph": (300, 400), "direct": (200, 75)}


def local(s):
    finals, reports = run_local(program(s), statics(s))
    return assemble(s, finals), [row(s, u, r) for u, r in enumerate(reports)]


def rel(a, b):
    return max(float(np.abs(x - y).max() / np.abs(y).max()) for x, y in zip(a, b) if y.size)


def same_bits(a, b):
    return all(np.array_equal(x, y) for x, y in zip(a, b))


def values(history):
    """The computed columns of history rows (not timings or bytes)."""
    skip = {"time_s", "planned_bytes", "measured_bytes", "unit"}
    return [{k: v for k, v in h.items() if k not in skip} for h in history]


@pytest.fixture(scope="module")
def cora_serial():
    return run_serial(prepare("cora", 1, epochs=EPOCHS))


def check_transfers(out, prog, exchange="direct", upper_bound=False):
    """Every transfer between workers against the plan projected on the workers: the same
    worker pairs and steps, and bytes = planned + framing (<= planned + framing where the
    plan's widths are upper bounds: CSR feature rows)."""
    m = out.measured
    assert m["inter_worker_messages"] == m["planned_messages"]
    plan = prog.plan()
    workers = list(out.placement.workers)
    owner = np.array([workers.index(out.placement.worker(p)) for p in range(prog.nparts)])
    nbytes = plan.message_bytes()
    seen = set()
    for e in out.ledger.entries:
        (key, _), = e["keys"].items()          # one bundle per transfer
        t = step_of_key(tuple(key) if isinstance(key, list) else key)
        src, dst = workers.index(e["sender"]), workers.index(e["receiver"])
        sel = (plan.phase == t) & (owner[plan.src] == src) & (owner[plan.dst] == dst)
        n = int(sel.sum())
        assert n > 0, f"step {t}: {src} -> {dst} is not in the plan"
        seen.add((t, src, dst))
        framing = e["bytes"] - int(nbytes[sel].sum())
        base, per_message = FRAMING[exchange]
        assert framing <= base + per_message * n, (t, n, framing)
        if not upper_bound:
            assert framing > 0
    placed = plan.placed(owner, len(workers))
    assert seen == set(zip(placed.phase.tolist(), placed.src.tolist(), placed.dst.tolist()))


@pytest.mark.parametrize("K, partition, exchange", [
    (1, "rp", "direct"), (2, "hp", "direct"), (4, "gp", "direct"), (8, "rp", "direct"),
    (4, "hp", "graph")])
def test_distributed_equals_serial(client2, cora_serial, K, partition, exchange):
    s = prepare("cora", K, partition=partition, epochs=EPOCHS)
    job = gcn_job(s, in_loop=True, exchange=exchange)
    out = run_job(client2, job, progress_bar=False)
    ref, hist = local(s)
    # the cluster runs the same Program: the same bits as run_local
    assert same_bits(out.value["params"], ref["params"])
    assert np.array_equal(out.value["logits"], ref["logits"])
    assert values(out.history) == hist
    # and the textbook epoch within 1e-10 (the dW sums are taken per part), same predictions
    ser = cora_serial
    assert rel(out.value["params"], ser["params"]) < 1e-10
    assert np.array_equal(out.value["predictions"], ser["predictions"])
    if K == 1:
        assert same_bits(out.value["params"], ser["params"])
    assert [r["unit"] for r in out.history] == list(range(EPOCHS))
    check_transfers(out, job.program(0), exchange)
    if K > 1:
        assert all(r["measured_bytes"] > r["planned_bytes"] > 0 for r in out.history)


def test_the_same_run_twice_is_bitwise_identical(client2):
    a = fit("cora", nparts=4, client=client2, epochs=10, partition="hp", progress=False)
    b = fit("cora", nparts=4, client=client2, epochs=10, partition="hp", progress=False)
    assert same_bits(a.params, b.params) and np.array_equal(a.logits, b.logits)
    assert values(a.history) == values(b.history)
    rep = a.report()
    assert rep["timing"]["steps_per_epoch"] == steps_per_epoch(prepare("cora", 4)) == 6
    assert rep["measured"]["planned_messages"] == rep["measured"]["inter_worker_messages"]


def test_fit_report_and_serial_check(client2):
    res = fit("cora", nparts=3, client=client2, epochs=5, check_serial=True, progress=False)
    rep = res.report()
    check = rep["serial_check"]
    assert check["identical"] is True and check["max_abs_diff"] == 0.0
    assert check["textbook"]["within_tolerance"] and check["textbook"]["predictions_identical"]
    assert {"tot_vol", "max_vol", "sum_max_vol", "tot_msgs", "sum_max_msgs",
            "max_max_msgs", "phases", "unit", "words_per_unit"} <= set(rep["plan"])
    assert rep["quality"]["final_test_acc"] == res.test_accuracy
    assert len(rep["timing"]["per_iteration_s"]) == 5
    assert "final_test_acc" in res.history[-1]
    assert "final_test_acc" not in res.history[0]


def directed(n=60, seed=3):
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    A = sp.random_array((n, n), density=0.06, random_state=rng, format="csr")
    X = sp.random_array((n, 20), density=0.2, random_state=rng, format="csr")
    y = rng.integers(0, 3, n)
    return A, X, y, (np.arange(0, 30), np.arange(30, 45), np.arange(45, n))


def test_directed_graph_in_the_papers_order(client2):
    """A directed graph (forward along A_hat, backward along A_hat^T) in the aggregate-first
    order (layer 1 sends sparse feature rows as CSR: the plan's d_0 words per row is an
    upper bound, so measured bytes stay below planned + framing)."""
    A, X, y, split = directed()
    s = prepare(A, 3, X, y, split, partition="random", epochs=6, order="aggregate")
    assert not s.graph.symmetric
    job = gcn_job(s)
    out = run_job(client2, job, progress_bar=False)
    ref, hist = local(s)
    assert same_bits(out.value["params"], ref["params"]) and values(out.history) == hist
    assert rel(out.value["params"], run_serial(s)["params"]) < 1e-10
    check_transfers(out, job.program(0), upper_bound=True)


@pytest.mark.parametrize("order", ["aggregate", "transform"])
def test_dense_features_go_through_the_dense_kernels(client2, order):
    """Features with most entries stored are a dense array in every part's statics (a
    bag of words stays CSR): the cluster run is run_local's bits, the textbook serial
    within 1e-10, and in the aggregate-first order the plan's d_0 words per row are what
    travels (no upper bound)."""
    from daskhpc.gcn._model import Csr

    A, _, y, split = directed()
    X = np.random.default_rng(5).random((A.shape[0], 20)) + 0.1
    s = prepare(A, 3, X, y, split, partition="random", epochs=6, order=order)
    assert all(isinstance(st["X"], np.ndarray) for st in statics(s))
    assert isinstance(statics(prepare("cora", 2, partition="rp", epochs=1))[0]["X"], Csr)
    job = gcn_job(s)
    out = run_job(client2, job, progress_bar=False)
    ref, hist = local(s)
    assert same_bits(out.value["params"], ref["params"]) and values(out.history) == hist
    assert rel(out.value["params"], run_serial(s)["params"]) < 1e-10
    check_transfers(out, job.program(0))


def test_minibatch_on_the_cluster(client2):
    """Mini-batch training (one batch per unit, each along its own plan) on the cluster:
    run_local's bits, the serial mini-batch reference within 1e-10."""
    mb = {"batch_size": 0.3, "steps": 8, "shp": False}
    res = fit("cora", nparts=3, client=client2, partition="rp", minibatch=mb, progress=False,
              check_serial=True)
    check = res.report()["serial_check"]
    assert check["identical"] is True
    assert check["textbook"]["within_tolerance"] and check["textbook"]["predictions_identical"]
    assert res.report()["minibatch"]["steps"] == len(res.history) >= 1
    m = res.report()["measured"]
    assert m["inter_worker_messages"] == m["planned_messages"]


@pytest.mark.parametrize("with_checkpoint, exchange", [
    # CI budget (20 min on 2 cores): the frame's killed-worker path runs by default in
    # tests/runtime and tests/kit; GCN's under -m slow
    pytest.param(True, "direct", marks=pytest.mark.slow),
    pytest.param(False, "direct", marks=pytest.mark.slow),
    pytest.param(True, "graph", marks=pytest.mark.slow)])
def test_a_killed_worker_gives_the_same_weights(make_client, tmp_path, with_checkpoint,
                                                exchange, unit_tasks):
    client = make_client(3)
    s = prepare("cora", 3, partition="rp", epochs=8)
    ref, hist = local(s)
    per = steps_per_epoch(s)
    # kill a worker in epoch 4: graph mode at its second step (step 0 is the first
    # exchange); direct mode at its task of epoch 4 (keyed by the epoch's last step)
    step = 1 + 4 * per + 1 if exchange == "graph" else 5 * per
    client.register_plugin(KillOnce(TaskKey("gcn-", {2: step}), str(tmp_path / "killed")),
                           name="kill")
    res = fit("cora", nparts=3, client=client, partition="rp", epochs=8, progress=False,
              checkpoint=tmp_path / "ck" if with_checkpoint else None, max_restarts=2,
              exchange=exchange)
    rec = res.report()["recovery"]["recoveries"]
    assert len(rec) == 1 and rec[0]["lost"]
    assert rec[0]["restart"] == (4 if with_checkpoint else 0)
    assert same_bits(res.params, ref["params"]) and np.array_equal(res.logits, ref["logits"])
    assert values(res.history) == hist


def test_checkpoint_and_resume(client2, tmp_path):
    """3 epochs with a checkpoint, then 6 with --resume: the uninterrupted 6-epoch run's
    bits, on the partition the checkpoint saved; resuming at the end runs nothing."""
    ck = tmp_path / "ck"
    first = fit("cora", nparts=2, client=client2, epochs=3, checkpoint=ck, progress=False)
    assert (ck / "partition.txt").exists()
    parts = np.loadtxt(ck / "partition.txt", dtype=np.int64)
    ref, hist = local(prepare("cora", 2, epochs=6, partition_file=ck / "partition.txt"))
    rest = fit("cora", nparts=2, client=client2, epochs=6, checkpoint=ck, resume=True,
               progress=False)
    rep = rest.report()
    assert rep["recovery"]["resumed_from"] == 3
    assert rep["partition_method"] == "hp" and rep["partition"]["from_checkpoint"]
    assert same_bits(rest.params, ref["params"]) and values(rest.history) == hist
    assert first.history[-1]["train_loss"] == rest.history[2]["train_loss"]
    again = fit("cora", nparts=2, client=client2, epochs=6, checkpoint=ck, resume=True,
                progress=False)
    assert same_bits(again.params, ref["params"]) and np.array_equal(again.logits, ref["logits"])
    assert values(again.history) == hist
    assert np.array_equal(np.loadtxt(ck / "partition.txt", dtype=np.int64), parts)


def test_cli_run_checkpoint_and_resume(client2, tmp_path):
    import json

    from daskhpc import cli

    out, ck = tmp_path / "r.json", tmp_path / "ck"
    base = ["run", "gcn", "cora", "--parts", "2", "--scheduler-address",
            client2.scheduler.address, "--partition", "rp", "--checkpoint", str(ck),
            "--json", str(out)]
    assert cli.main([*base, "--epochs", "2"]) == 0
    assert cli.main([*base, "--epochs", "4"]) == 2             # holds a checkpoint: --resume
    assert cli.main([*base, "--epochs", "4", "--resume", "--check-serial"]) == 0
    rep = json.loads(out.read_text())
    assert rep["recovery"]["resumed_from"] == 2 and len(rep["quality"]["train_loss"]) == 4
    assert rep["serial_check"]["identical"] is True
    assert rep["measured"]["inter_worker_messages"] == rep["measured"]["planned_messages"]


def test_demo_on_the_cluster(client2):
    from daskhpc.gcn import _cli

    rep = _cli.GCN().demo(client2)
    assert rep["parts"] == 2 and rep["serial_check"]["identical"] is True
    assert rep["serial_check"]["textbook"]["predictions_identical"]
    assert rep["quality"]["final_test_acc"] > 0.7          # 50 epochs on Cora
    text = _cli.GCN().summary(rep)
    assert "  traffic    planned" in text and "  accuracy   train" in text
