"""What a user is told about a GCN run on a graph without node data (random
features and labels), and ``plan gcn`` where the random partition sends nothing; through
the real console script and in Python."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import numpy as np

EXE = os.path.join(os.path.dirname(sys.executable), "daskhpc")
CAVEAT = "random node data: the accuracies are not a measure of anything"


def daskhpc(*argv, timeout=300):
    """(exit status, stdout, stderr) of ``daskhpc argv...``."""
    done = subprocess.run([EXE, *map(str, argv)], capture_output=True, text=True,
                          timeout=timeout)
    return done.returncode, done.stdout, done.stderr


def edge_list(tmp_path):
    """A SNAP edge list (structure only) of 300 nodes: a ring with chords."""
    path = tmp_path / "ring.txt"
    path.write_text("# FromNodeId\tToNodeId\n" + "".join(
        f"{i}\t{(i + d) % 300}\n" for i in range(300) for d in (1, 7)))
    return path


@pytest.mark.slow             # CI budget (20 min on 2 cores): default run keeps a lighter test of the same path
def test_run_on_an_edge_list_says_the_accuracies_mean_nothing(tmp_path):
    path = edge_list(tmp_path)
    code, out, err = daskhpc("run", "gcn", path, "--workers", "2", "--parts", "2",
                             "--epochs", "3", "--partition", "rp", "--json", tmp_path / "r.json")
    assert code == 0, err
    assert "note: ring.txt has no node data: seeded random features (64) and labels " \
           "(8 classes) were drawn" in err
    acc = [x for x in out.splitlines() if x.strip().startswith("accuracy")]
    assert len(acc) == 1 and acc[0].endswith(f"(final weights; {CAVEAT})")
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["input"]["random_node_data"]["classes"] == 8


def test_result_repr_carries_the_caveat_unless_the_labels_are_given(tmp_path, capsys):
    from daskhpc import gcn

    path = edge_list(tmp_path)
    res = gcn.serial_fit(path, epochs=2)
    assert CAVEAT in repr(res).splitlines()
    assert "note: ring.txt has no node data" in capsys.readouterr().err
    own = gcn.serial_fit(path, labels=np.arange(300) % 3, epochs=2)   # the user's labels
    assert CAVEAT not in repr(own) and "random_node_data" not in own.report()["input"]
    assert "note:" not in capsys.readouterr().err
    cora = gcn.serial_fit("cora", epochs=2)
    assert CAVEAT not in repr(cora) and "final: train acc" in repr(cora)


def test_plan_where_the_random_partition_sends_nothing():
    """One part: no ratio to RP can be computed; the plan says so instead of failing."""
    code, out, err = daskhpc("plan", "gcn", "cora", "--parts", "1")
    assert code == 0, err
    assert "vs RP: n/a (the random partition sends nothing)" in out.splitlines()
    code, out, err = daskhpc("plan", "gcn", "cora", "--parts", "1", "--json", "-")
    assert code == 0, err
    rp = json.loads(out)["vs_rp"]
    assert "avg_vol" not in rp and rp["unavailable"]["avg_vol"].startswith("the random")
