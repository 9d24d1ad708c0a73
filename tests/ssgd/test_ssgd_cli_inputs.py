"""Inputs users have, through the real console script: ``--format``,
string ids, empty rows dropped with a note (``--keep-empty`` refuses)."""

from __future__ import annotations

import json

import pytest

from cli_script import EMPTY_ROWS, daskhpc

def test_plan_with_format_and_string_ids(tmp_path):
    path = tmp_path / "votes.el"            # .el says snap: --format ratings overrides it
    path.write_text("alice tt1 4\nbob tt1 3\nbob tt2 5\ncarol tt2 1\ncarol tt1 2\n")
    code, out, err = daskhpc("plan", "ssgd", path, "--format", "ratings", "--parts", "2",
                             "--partition", "random", "--json", "-")
    assert code == 0, err
    assert json.loads(out)["input"]["shape"] == [3, 2]
    code, out, err = daskhpc("plan", "ssgd", path, "--parts", "2")     # read as a graph
    assert code == 2 and "bad token 'alice'" in err


def test_plan_drops_empty_rows_with_a_note_and_keep_empty_refuses(tmp_path):
    path = tmp_path / "a.mtx"
    path.write_text(EMPTY_ROWS)
    code, out, err = daskhpc("plan", "ssgd", path, "--parts", "2", "--partition", "random",
                             "--test-fraction", "0", "--json", "-")
    assert code == 0, err
    rep = json.loads(out)
    assert rep["input"]["dropped_empty"]["rows"] == 2 and rep["input"]["shape"] == [4, 4]
    assert "note:" in err and "dropped 2 empty rows (3, 5) of the 6 x 4 matrix" in err
    code, out, err = daskhpc("plan", "ssgd", path, "--parts", "2", "--keep-empty")
    assert code == 2 and err.strip().splitlines() == [
        f"daskhpc: error: {path}: row 3 has no ratings (2 of 6 rows are empty); SSGD needs "
        "a rating per user: run without --keep-empty to drop them"]


@pytest.mark.slow             # CI budget (20 min on 2 cores): default run keeps a lighter test of the same path
def test_run_drops_empty_rows_instead_of_stopping(tmp_path):
    path = tmp_path / "a.mtx"
    path.write_text(EMPTY_ROWS)
    code, out, err = daskhpc("run", "ssgd", path, "--workers", "2", "--parts", "2",
                             "--partition", "random", "--epochs", "2", "--test-fraction", "0",
                             "--json", "-")
    assert code == 0, err
    rep = json.loads(out)
    assert rep["input"]["dropped_empty"] == {"rows": 2, "columns": 0, "first_rows": [3, 5],
                                             "first_columns": []}
    assert "dropped 2 empty rows" in err
    # one planned_bytes meaning in the run's report
    m = rep["measured"]
    assert "planned_bytes" not in rep["plan"] and "part_bytes" in rep["plan"]
    assert m["bytes"]["per_run"]["planned_bytes"] == m["planned_bytes"]
    assert sum(m["bytes"]["per_unit"]["planned_bytes"]) <= m["planned_bytes"]
    assert m["bytes"]["per_unit"]["unit"] == "epoch"


def test_run_on_implicit_feedback_reports_the_unavailable_figure(tmp_path, client2):
    """Every value 1 (a SNAP graph) makes the global mean's test RMSE 0;
    the run keeps its model and says the improvement over the mean is not defined."""
    path = tmp_path / "g.txt"
    edges = sorted({(i, (7 * i + 3 * k + 1) % 40) for i in range(40) for k in range(5)}
                   - {(i, i) for i in range(40)})
    path.write_text("# FromNodeId\tToNodeId\n" + "".join(f"{a}\t{b}\n" for a, b in edges))
    out = tmp_path / "out.json"
    # the session's cluster, joined (a cluster of its own costs the CI budget ~8 s)
    code, summary, err = daskhpc("run", "ssgd", path, "--scheduler-address",
                                 client2.scheduler.address, "--parts", "2",
                                 "--epochs", "2", "--json", out)
    assert code == 0, err
    q = json.loads(out.read_text())["quality"]
    assert q["global_mean_rmse"] == 0.0 and len(q["test_rmse"]) > 0
    assert "improvement_over_mean" not in q
    assert "RMSE is 0" in q["unavailable"]["improvement_over_mean"]
    assert "improvement over mean n/a (every test value equals the training mean: its " \
        "RMSE is 0)" in summary


def test_a_quoted_parquet_pattern_runs_on_the_files_it_matches(tmp_path, client2):
    """``daskhpc run ssgd 'dir/*.parquet'``: the pattern reaches the command unexpanded
    (no shell here, as with quotes) and names the files."""
    import daskhpc as dh

    dh.ssgd.power_law_ratings(3000, n_users=200, n_items=80, seed=1, path=tmp_path / "pq",
                              format="parquet")
    files = sorted((tmp_path / "pq").glob("*.parquet"))
    assert len(files) > 1
    out = tmp_path / "out.json"
    code, _, err = daskhpc("run", "ssgd", str(tmp_path / "pq" / "*.parquet"),
                           "--scheduler-address", client2.scheduler.address, "--parts", "2",
                           "--partition", "random", "--epochs", "1", "--json", out)
    assert code == 0, err
    rep = json.loads(out.read_text())
    assert rep["input"]["collection"] == "dask.dataframe" and rep["input"]["nnz"] == 3000
    code, _, err = daskhpc("run", "ssgd", str(tmp_path / "pq" / "*.pq"), "--parts", "2")
    assert code == 2 and err == f"daskhpc: error: {tmp_path / 'pq' / '*.pq'}: no file " \
        "matches this pattern\n"
