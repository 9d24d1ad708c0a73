"""Bad input and options: one-line InputError; the CLI plug-in; no dask on import."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from daskhpc.errors import InputError
from daskhpc.gcn import _cli
from daskhpc.testing import workflow_call
from daskhpc.gcn._setup import prepare

A = sp.csr_array(np.array([[0, 1, 0, 0], [1, 0, 1, 0], [0, 1, 0, 1], [0, 0, 1, 0.0]]))
X = np.eye(4)
Y = np.array([0, 1, 0, 1])
SPLIT = ([0, 1], [2], [3])


@pytest.mark.parametrize("kw, message", [
    (dict(features=np.eye(3)), "features have 3 rows for 4 nodes"),
    (dict(labels=[0, 1, 0]), "labels have 3 entries for 4 nodes"),
    (dict(labels=[0, -1, 0, 1]), "split holds node 1, which has no label"),
    (dict(labels=[0.5, 1, 0, 1]), "labels must be integers"),
    (dict(split=([], [2], [3])), "no training node"),
    (dict(split=([0, 9], [2], [3])), "names node 9, outside"),
    (dict(features=np.full((4, 2), np.nan)), "NaN"),
])
def test_bad_node_data(kw, message):
    args = {**dict(features=X, labels=Y, split=SPLIT), **kw}
    with pytest.raises(InputError, match=message) as e:
        prepare(A, 2, **args)
    assert "\n" not in str(e.value)


def test_empty_graph_and_bad_shapes():
    with pytest.raises(InputError, match="empty graph"):
        prepare(sp.csr_array((4, 4)), 1, features=X, labels=Y, split=SPLIT)
    with pytest.raises(InputError, match="empty graph"):
        prepare(sp.csr_array((0, 0)), 1, features=np.zeros((0, 1)), labels=[], split=SPLIT)
    with pytest.raises(InputError, match="square"):
        prepare(sp.csr_array(np.ones((3, 4))), 1, features=X, labels=Y, split=SPLIT)
    with pytest.raises(InputError, match="--parts 5 is more than the 4 nodes"):
        prepare(A, 5, features=X, labels=Y, split=SPLIT)


@pytest.mark.parametrize("opts, message", [
    (dict(epochs=0), "--epochs"), (dict(dropout=1.0), "--dropout"),
    (dict(lr=-1), "--lr"), (dict(optimizer="rmsprop"), "--optimizer"),
    (dict(partition="metis"), "--partition"), (dict(layers=(16, 0)), "--layers"),
    (dict(eval_every=-1), "--eval-every"), (dict(order="fast"), "--order"),
])
def test_bad_options(opts, message):
    with pytest.raises(InputError, match=message):
        prepare(A, 1, features=X, labels=Y, split=SPLIT, **opts)


def test_missing_file():
    with pytest.raises(InputError, match="no such file"):
        prepare("nowhere/graph.txt", 2)


def cli_plan(argv):
    wf, call, _ = workflow_call("plan", "gcn", argv)
    return wf.plan(call)


def test_cli_plan_report_on_cora(capsys):
    rep = cli_plan(["cora", "--parts", "4", "--partition", "gp"])
    assert rep["workflow"] == "gcn" and rep["parts"] == 4 and rep["partition_method"] == "gp"
    p, v = rep["plan"], rep["volume"]
    # default order: transform first where the layer narrows (rows of H W are sent)
    assert p["phase_words"] == [16, 7, 7, 16] and p["order"] == ["transform", "transform"]
    assert p["words"] == v["formula_words"] == (16 + 7 + 7 + 16) * v["km1_forward"]
    paper = cli_plan(["cora", "--parts", "4", "--partition", "gp",
                                           "--order", "aggregate"])
    assert paper["plan"]["phase_words"] == [1433, 16, 7, 16]
    assert paper["plan"]["words"] == (1433 + 16 + 16 + 7) * v["km1_forward"]
    assert rep["graph_model"]["rows_per_exchange"] >= v["km1_forward"]
    assert 0 < rep["vs_rp"]["avg_vol"] < 1
    text = _cli.GCN().summary(rep)
    assert "vs RP" in text and "graph model" in text
    with pytest.raises(SystemExit) as stop:       # refused by the parser: exit 2
        cli_plan(["cora", "--parts", "2", "--layers", "a,b"])
    assert stop.value.code == 2
    assert "argument --layers: --layers takes hidden widths like 16 or 32,16, got 'a,b'" \
        in capsys.readouterr().err
    with pytest.raises(InputError, match="--parts is required"):
        cli_plan(["cora"])


def test_import_does_not_pull_in_dask():
    code = ("import sys, daskhpc.gcn as g\n"
            "g.plan('cora', 2, partition='rp')\n"
            "bad = [m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')]\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_public_namespace():
    import daskhpc.gcn as g

    assert set(g.__all__) == {"fit", "serial_fit", "local_fit", "plan", "GCNResult",
                              "minibatch_plan", "hoeffding_nets", "minibatch_fit",
                              "prepare", "Setup", "program", "statics"}
    for name in g.__all__:
        assert hasattr(g, name)


def test_a_graph_keeps_its_name(tmp_path):
    """The graph's name is its file's (or data set's), not a split's: the plan's Table 2
    comparison is looked up by it (a loop over the splits once overwrote it)."""
    from daskhpc.gcn._data import as_graph

    path = tmp_path / "my-graph.txt"
    path.write_text("0 1\n1 2\n2 3\n3 0\n4 5\n5 6\n6 7\n7 4\n")
    assert as_graph(str(path)).name == "my-graph"
    assert as_graph("cora").name == "cora"


def test_an_undirected_edge_list_read_as_directed_gets_a_hint(tmp_path):
    """A SNAP list of an undirected graph (each edge once): the plan says --symmetrize
    exists; with it, or for a list holding both directions, nothing is said."""
    exe = str(__import__("pathlib").Path(sys.executable).with_name("daskhpc"))
    rng = np.random.default_rng(0)
    pairs = {tuple(sorted(p)) for p in rng.integers(0, 60, (200, 2)).tolist() if p[0] != p[1]}
    once = tmp_path / "ug.txt"
    once.write_text("# Undirected graph: ug.txt\n" + "".join(f"{b}\t{a}\n" if k % 2 else
                                                            f"{a}\t{b}\n"
                                                            for k, (a, b) in
                                                            enumerate(sorted(pairs))))
    both = tmp_path / "both.txt"
    both.write_text("".join(f"{a}\t{b}\n{b}\t{a}\n" for a, b in sorted(pairs)))

    def notes(*argv):
        done = subprocess.run([exe, "plan", "gcn", *map(str, argv), "--parts", "2",
                               "--partition", "rp"], capture_output=True, text=True,
                              timeout=280)
        assert done.returncode == 0, done.stderr
        return [x for x in done.stderr.splitlines() if "undirected" in x]

    assert notes(once) == [
        "note: ug.txt looks like an undirected graph (its header says undirected, and every "
        "edge is listed in one direction only) but is read as directed, each edge one way; "
        "if it is undirected, --symmetrize (symmetrize=True) trains on A + A^T"]
    assert notes(once, "--symmetrize") == [] and notes(both) == []
