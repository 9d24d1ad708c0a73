"""Checkpoints, resume and surviving a lost worker for SSGD.

The claim under test: an SSGD run that loses a worker mid-epoch, or that is resumed
from a checkpoint in a new process, ends with W and H bit-identical to the serial
reference of the whole run (and so to an undisturbed run), with the same per-epoch
loss and test RMSE. Workers are killed for real (SIGKILL of the worker process) by a
worker plugin when a chosen sub-epoch starts; a nanny starts a replacement.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import daskhpc as dh
from daskhpc import cli, datasets
from daskhpc.errors import InputError
from daskhpc.ssgd._serial import run_serial
from daskhpc.ssgd._setup import prepare
from daskhpc.testing import KillOnce, TaskKey


@pytest.fixture(autouse=True)
def windows_of_two(monkeypatch):
    """Runs of 5 epochs in windows of 2: kills, checkpoints and restarts land in later
    windows too."""
    from daskhpc.ssgd import _job

    monkeypatch.setattr(_job, "WINDOW", int(os.environ.get("H2W", "2")))


@pytest.fixture(scope="module")
def nanny_client():
    """Three single-threaded worker processes under nannies (TCP), for killing."""
    from daskhpc.testing import validated_client

    with validated_client(3) as client:
        yield client


@pytest.fixture
def kill_at(nanny_client, tmp_path, exchange, unit_tasks):
    """``kill_at(epoch, subepoch, part)`` arms a one-shot SIGKILL of the worker that
    starts that SSGD step (in the direct mode: that epoch, whose task runs its
    sub-epochs, a task per epoch with ``unit_tasks``); yields the marker file written by the dying worker."""
    marker = tmp_path / "killed"
    names = []

    def arm(epoch: int, subepoch: int, part: int):
        name = f"kill-{epoch}-{subepoch}-{part}"
        key = TaskKey("ssgd-step", {1: part, 2: epoch, 3: subepoch}) if exchange == "graph" \
            else TaskKey("ssgd-epoch", {1: part, 2: epoch})
        nanny_client.register_plugin(KillOnce(key, str(marker)), name=name)
        names.append(name)
        return marker

    yield arm
    for name in names:
        nanny_client.unregister_worker_plugin(name)


def _same_as_serial(res, **opts):
    ser = run_serial(prepare(datasets.ratings(), 3, **opts))
    assert np.array_equal(res.W, ser["W"]) and np.array_equal(res.H, ser["H"])
    assert [h["train_loss"] for h in res.history] == [h["train_loss"] for h in ser["history"]]
    assert [h.get("test_rmse") for h in res.history] == \
        [h.get("test_rmse") for h in ser["history"]]


OPTS = {"epochs": 5, "partition": "random", "strategy": "hc"}


def _only_replacements_lost_later(rec, before):
    """A second recovery may follow the kill, never of a worker that was there before it:
    on a loaded machine a nanny's replacement worker can be closed right after it
    registered (its restart timed out), after the recovery placed parts on it (the
    ``KeyError: 'tcp://...'``, now a lost worker)."""
    for r in rec[1:]:
        assert not set(r["lost"]) & before, rec


# -- resuming is exact (no cluster) ---------------------------------------------------

@pytest.mark.parametrize("strata", ["ring", "random"])
@pytest.mark.parametrize("strategy", ["dsgd", "hc"])
def test_serial_resume_continues_bit_for_bit(ml_small, strata, strategy):
    opts = {"partition": "random", "strata": strata, "strategy": strategy}
    whole = prepare(ml_small, 3, epochs=5, **opts)
    full = run_serial(whole)
    first = run_serial(prepare(ml_small, 3, epochs=2, **opts))
    rest = run_serial(whole.resumed(2, first["W"], first["H"]))
    assert np.array_equal(rest["W"], full["W"]) and np.array_equal(rest["H"], full["H"])
    assert [h["epoch"] for h in rest["history"]] == [2, 3, 4]
    assert [h["train_loss"] for h in first["history"] + rest["history"]] == \
        [h["train_loss"] for h in full["history"]]


def test_resumed_setup_plans_only_the_remaining_epochs(ml_small):
    s = prepare(ml_small, 3, epochs=5, partition="random", strata="random", eval_every=2)
    r = s.resumed(3, np.zeros((s.train.shape[0], 16)), np.zeros((s.train.shape[1], 16)))
    assert r.E == 2 and r.epoch0 == 3
    # epochs 3 and 4 of the run draw the rings the uninterrupted run draws
    assert [r.strata.epoch_seed(e) for e in range(2)] == [s.strata.epoch_seed(e) for e in (3, 4)]
    # every 2nd epoch of the whole run (epoch 3) and the last (epoch 4)
    assert r.runplan.eval_epochs.tolist() == [0, 1]
    with pytest.raises(ValueError):
        s.resumed(5, np.zeros((1, 16)), np.zeros((1, 16)))


# -- checkpoints on a cluster ---------------------------------------------------------

def test_checkpoint_then_resume_with_more_epochs(nanny_client, tmp_path, exchange):
    ck = tmp_path / "ck"
    first = dh.ssgd.fit(datasets.ratings(), 3, client=nanny_client, checkpoint=ck,
                        **{**OPTS, "epochs": 3})
    man = json.loads((ck / "manifest.json").read_text())
    assert [d["step"] for d in man["complete"]] == [1, 2, 3]
    assert sorted(os.listdir(ck / "step-000003")) == [f"part-{p}.npz" for p in range(3)]
    assert not (ck / "step-000001").exists()             # only the newest two are kept
    assert [d["history"]["train_loss"] for d in man["complete"]] == first.train_loss
    res = dh.ssgd.fit(datasets.ratings(), 3, client=nanny_client, checkpoint=ck,
                      resume=True, check_serial=True, **OPTS)
    rec = res.report()["recovery"]
    assert rec["resumed_from"] == 3 and rec["saved"] == 5
    assert res.report()["serial_check"]["identical"]
    assert res.report()["serial_check"]["history_identical"]
    assert [h["epoch"] for h in res.history] == list(range(5))
    assert res.report()["measured"]["epochs_measured"] == 2
    _same_as_serial(res, **OPTS)
    # the checkpoint is at the end: resuming again runs nothing and gives the same
    again = dh.ssgd.fit(datasets.ratings(), 3, client=nanny_client, checkpoint=ck,
                        resume=True, **OPTS)
    assert np.array_equal(again.W, res.W) and np.array_equal(again.H, res.H)
    assert again.train_loss == res.train_loss


def test_checkpoint_of_another_run_is_refused(nanny_client, tmp_path):
    ck = tmp_path / "ck"
    dh.ssgd.fit(datasets.ratings(), 3, client=nanny_client, checkpoint=ck,
                **{**OPTS, "epochs": 1})
    with pytest.raises(InputError, match="pass --resume"):
        dh.ssgd.fit(datasets.ratings(), 3, client=nanny_client, checkpoint=ck, **OPTS)
    with pytest.raises(InputError, match=r"manifest.json: this checkpoint was of a run "
                                            r"with other options \(lr: 0.02 there, 0.05 now"):
        dh.ssgd.fit(datasets.ratings(), 3, client=nanny_client, checkpoint=ck, resume=True,
                    lr=0.05, **OPTS)


def test_resuming_with_another_input_shows_both_fingerprints(nanny_client, tmp_path):
    """Not "partition.txt:610: 610 row part ids for 7 rows"."""
    ck = tmp_path / "ck"
    dh.ssgd.fit(datasets.ratings(), 3, client=nanny_client, checkpoint=ck,
                **{**OPTS, "epochs": 1})
    other = (np.array([0, 1, 2, 3, 4, 5, 6]), np.array([0, 1, 2, 3, 4, 0, 1]),
             np.ones(7), (7, 5))
    with pytest.raises(InputError, match=r"manifest.json: this checkpoint was made from "
                                         r"another input \(ratings sha256 [0-9a-f]{12}\.\.\. "
                                         r"shape \[610, 9724\] there, [0-9a-f]{12}\.\.\. "
                                         r"shape \[7, 5\] now\)"):
        dh.ssgd.fit(other, 3, client=nanny_client, checkpoint=ck, resume=True, **OPTS)


def test_resume_falls_back_from_a_truncated_epoch(nanny_client, tmp_path):
    from daskhpc.runtime import CheckpointWarning

    ck = tmp_path / "ck"
    dh.ssgd.fit(datasets.ratings(), 3, client=nanny_client, checkpoint=ck,
                **{**OPTS, "epochs": 3})
    bad = ck / "step-000003" / "part-2.npz"
    bad.write_bytes(bad.read_bytes()[:-50])
    with pytest.warns(CheckpointWarning, match=f"{bad}: .*falling back to step 2"):
        res = dh.ssgd.fit(datasets.ratings(), 3, client=nanny_client, checkpoint=ck,
                          resume=True, **OPTS)
    assert res.report()["recovery"]["resumed_from"] == 2
    _same_as_serial(res, **OPTS)


def test_diverging_sgd_stops_with_the_epoch_and_value(nanny_client):
    from daskhpc.runtime import Diverged

    with pytest.raises(Diverged, match=r"ssgd diverged: train_loss = nan in epoch 0 .*"
                                       r"try a smaller --lr than 1e\+06"):
        dh.ssgd.fit(datasets.ratings(), 3, client=nanny_client, lr=1e6, **OPTS)


# -- a worker dies mid-epoch ----------------------------------------------------------

def test_lost_worker_restarts_from_the_start_without_checkpoint(nanny_client, kill_at):
    marker = kill_at(epoch=2, subepoch=1, part=1)
    before = set(dh.runtime.worker_addresses(nanny_client))
    res = dh.ssgd.fit(datasets.ratings(), 3, client=nanny_client, **OPTS)
    assert marker.exists()                               # a worker really died
    rec = res.report()["recovery"]["recoveries"]
    assert rec and all(r["restart"] == 0 for r in rec)
    lost = rec[0]["lost"]
    assert len(lost) == 1 and lost[0] in before
    _only_replacements_lost_later(rec, before)
    assert lost[0] not in res.report()["placement"].values()
    _same_as_serial(res, **OPTS)


def test_lost_worker_resumes_from_the_last_checkpoint(nanny_client, kill_at, tmp_path):
    marker = kill_at(epoch=3, subepoch=1, part=2)
    before = set(dh.runtime.worker_addresses(nanny_client))
    res = dh.ssgd.fit(datasets.ratings(), 3, client=nanny_client, checkpoint=tmp_path / "ck",
                      **{**OPTS, "strategy": "p2p"})
    assert marker.exists()
    rec = res.report()["recovery"]["recoveries"]
    assert rec and rec[0]["lost"][0] in before
    _only_replacements_lost_later(rec, before)
    # epochs 0..2 were saved before sub-epoch 1 of epoch 3 started (epoch 2's files
    # may still have been in flight on the killed worker: then epoch 2 is redone)
    assert rec[0]["restart"] in (2, 3)
    assert res.report()["measured"]["epochs_measured"] == 5 - rec[-1]["restart"]
    _same_as_serial(res, **{**OPTS, "strategy": "p2p"})


# -- the command line -----------------------------------------------------------------

@pytest.mark.slow             # CI budget (20 min on 2 cores): default run keeps a lighter test of the same path
def test_cli_checkpoint_and_resume(tmp_path, capsys):
    ck, out = tmp_path / "ck", tmp_path / "r.json"
    base = ["run", "ssgd", datasets.path("ratings"), "--parts", "2", "--workers", "2",
            "--partition", "random", "--checkpoint", str(ck)]
    assert cli.main([*base, "--epochs", "2"]) == 0
    assert cli.main([*base, "--epochs", "2"]) == 2               # would overwrite
    assert "pass --resume" in capsys.readouterr().err
    assert cli.main([*base, "--epochs", "4", "--resume", "--check-serial",
                     "--json", str(out)]) == 0
    rep = json.loads(out.read_text())
    assert rep["recovery"]["resumed_from"] == 2
    assert rep["serial_check"]["identical"] and rep["serial_check"]["history_identical"]
    assert len(rep["quality"]["train_loss"]) == 4
    assert cli.main(["run", "ssgd", datasets.path("ratings"), "--resume"]) == 2
    assert "--resume needs --checkpoint" in capsys.readouterr().err
