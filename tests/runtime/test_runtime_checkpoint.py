"""The checkpoint directory refuses what is not its run's and names damaged files;
no cluster."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from daskhpc.errors import InputError
from daskhpc.runtime import CheckpointDir, array_digest, load_arrays, save_arrays
from daskhpc.runtime import CheckpointWarning


def _run(path, fingerprint, steps):
    ck = CheckpointDir(path, "toy", fingerprint)
    for t in steps:
        save_arrays(ck.file(t, "part-0.npz"), x=np.full(1000, t, dtype=float))
        ck.complete(t, loss=float(t))
    return ck


def test_step_folders_without_a_manifest_are_refused(tmp_path):
    _run(tmp_path, {"seed": 0}, [1, 2])
    (tmp_path / "manifest.json").unlink()
    for resume in (False, True):
        with pytest.raises(InputError, match=re.escape(
                f"{tmp_path}: has checkpoint step folders (step-000001, ...) but no "
                "manifest.json")):
            CheckpointDir(tmp_path, "toy", {"seed": 0}, resume=resume)
    assert not (tmp_path / "manifest.json").exists()          # nothing was started afresh


def test_another_input_shows_both_fingerprints(tmp_path):
    a, b = array_digest(np.arange(5)), array_digest(np.arange(6))
    _run(tmp_path, {"ratings": a, "parts": 2}, [1])
    with pytest.raises(InputError) as info:
        CheckpointDir(tmp_path, "toy", {"ratings": b, "parts": 2}, resume=True)
    msg = str(info.value)
    assert msg.startswith(f"{tmp_path / 'manifest.json'}: this checkpoint was made from "
                          "another input (ratings: ")
    assert f"{a[:12]}... there, {b[:12]}... now" in msg and "\n" not in msg


def test_truncated_newest_step_names_the_file_and_falls_back(tmp_path):
    _run(tmp_path, {"seed": 0}, [1, 2, 3])                      # keep=2: steps 2 and 3 stay
    bad = tmp_path / "step-000003" / "part-0.npz"
    bad.write_bytes(bad.read_bytes()[:100])
    with pytest.raises(InputError, match=re.escape(f"{bad}: unreadable checkpoint file")):
        load_arrays(str(bad))
    with pytest.warns(CheckpointWarning, match=re.escape(f"step 3 is damaged ({bad}: ")):
        ck = CheckpointDir(tmp_path, "toy", {"seed": 0}, resume=True)
    assert ck.latest() == (2, {"step": 2, "loss": 2.0})
    assert ck.dropped[0]["step"] == 3
    assert load_arrays(ck.file(2, "part-0.npz"))["x"][0] == 2.0
    # the next complete step rewrites the manifest without the damaged one
    ck.complete(3, loss=3.5)
    assert [d["loss"] for d in json.loads((tmp_path / "manifest.json").read_text())
            ["complete"]] == [1.0, 2.0, 3.5]


def test_every_step_damaged_starts_over_with_a_warning(tmp_path):
    _run(tmp_path, {"seed": 0}, [1])
    bad = tmp_path / "step-000001" / "part-0.npz"
    bad.write_bytes(b"")
    with pytest.warns(CheckpointWarning, match="no older step: starting from the beginning"):
        ck = CheckpointDir(tmp_path, "toy", {"seed": 0}, resume=True)
    assert ck.latest() is None
