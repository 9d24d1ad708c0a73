"""SSGD errors name rows and columns as the user's file does (1-based
lines and numbers, original ids of relabelled inputs), the input is read and checked
before the cluster starts (and read once), and ``fit(resume=True)`` reads as a fresh run."""

from __future__ import annotations

import os

import numpy as np
import pytest
from cli_script import EMPTY_ROWS, daskhpc

import daskhpc as dh
from daskhpc.errors import InputError
from daskhpc.io import read

STRING_IDS = "user,item,rating\nalice,tt1,4\nbob,tt1,3\nbob,tt2,5\ncarol,tt2,1\ndave,tt1,2\n"
SPARSE_IDS = "1000 5000 4\n1000 7000 3\n2000 5000 1\n3000 7000 5\n"
# a SNAP graph with sparse node ids: node 7000 has no out-edge (an empty row)
GRAPH = "1000 5000\n1000 7000\n5000 1000\n5000 7000\n"


def refused_before_cluster(tmp_path, name, text, *options):
    """``run ssgd`` on a bad file: exit 2, one line, and no cluster (no dashboard link)."""
    path = tmp_path / name
    path.write_text(text)
    code, _, err = daskhpc("run", "ssgd", path, "--workers", "1", *options)
    assert code == 2, err
    assert "dashboard:" not in err and len(err.strip().splitlines()) == 1, err
    return err.strip().removeprefix("daskhpc: error: ").replace(str(tmp_path) + os.sep, "")


# -- through the console script: every message names what the file names ------------------

@pytest.mark.parametrize("name, text, message", [
    ("nan.csv", STRING_IDS + "erin,tt2,nan\n", "nan.csv:7: rating is nan (NaN/inf not allowed)"),
    ("inf.tsv", SPARSE_IDS + "3000 5000 inf\n", "inf.tsv:5: rating is inf (NaN/inf not allowed)"),
    ("dup.csv", STRING_IDS + "bob,tt2,1\n",
     "dup.csv:7: duplicate rating for user bob, item tt2 (first rated on line 4)"),
    ("dup.tsv", SPARSE_IDS + "2000 5000 2\n",
     "dup.tsv:5: duplicate rating for user 2000, item 5000 (first rated on line 3)"),
])
def test_run_refuses_bad_ratings_before_the_cluster_naming_lines_and_ids(tmp_path, name, text,
                                                                         message):
    assert refused_before_cluster(tmp_path, name, text, "--parts", "1") == message


def test_run_refuses_too_many_parts_and_empty_rows_before_the_cluster(tmp_path):
    assert refused_before_cluster(tmp_path, "r.csv", STRING_IDS, "--parts", "5") == (
        "--parts 5 is more than the 4 rows (users) of r.csv: every part needs one; use "
        "fewer parts")
    assert refused_before_cluster(tmp_path, "g.txt", GRAPH, "--parts", "1",
                                  "--keep-empty") == (
        "g.txt: row 7000 has no ratings (1 of 3 rows are empty); SSGD needs a rating per "
        "user: run without --keep-empty to drop them")
    # 3 rows in the file, 2 once node 7000's empty row is dropped
    assert refused_before_cluster(tmp_path, "g.txt", GRAPH, "--parts", "3") == (
        "--parts 3 is more than the 2 rows (users) of g.txt once its 1 empty row is "
        "dropped: every part needs one; use fewer parts")


def test_partition_file_that_does_not_fit_is_named_with_its_line(tmp_path):
    (tmp_path / "p3.txt").write_text("0\n1\n1\n")
    assert refused_before_cluster(tmp_path, "r.csv", STRING_IDS, "--parts", "2",
                                  "--partition-file", tmp_path / "p3.txt") == \
        "p3.txt:3: 3 row part ids for 4 rows of r.csv"
    (tmp_path / "pair.txt").write_text("0\n1\n0\n-\n0\n1\n1\n")
    assert refused_before_cluster(tmp_path, "r.tsv", SPARSE_IDS, "--parts", "2",
                                  "--partition-file", tmp_path / "pair.txt") == \
        "pair.txt:7: 3 column part ids for 2 columns of r.tsv"


def test_partition_file_of_the_matrix_as_read_fits_once_empty_rows_are_dropped(tmp_path):
    """``daskhpc partition`` of a file with empty rows writes one id per row of the file;
    ssgd drops the empty rows and takes theirs out of the file (it refused it before)."""
    a = tmp_path / "a.mtx"
    a.write_text(EMPTY_ROWS)
    p = tmp_path / "a.part"
    code, _, err = daskhpc("partition", "column-net", a, "--parts", "2", "--partitioner",
                           "random", "--save-partition", p)
    assert code == 0, err
    assert len(p.read_text().split()) == 6                 # the file's 6 rows
    code, out, err = daskhpc("plan", "ssgd", a, "--parts", "2", "--partition-file", p,
                             "--test-fraction", "0", "--json", "-")
    assert code == 0, err
    assert '"partition_method": "file"' in out
    p.write_text("0\n1\n0\n1\n1\n")                       # neither 6 nor 4 rows
    code, out, err = daskhpc("plan", "ssgd", a, "--parts", "2", "--partition-file", p)
    assert code == 2 and err.strip() == (
        f"daskhpc: error: {p}:5: 5 row part ids for 4 rows (6 in {a} before its 2 empty "
        "rows were dropped; a file for either count fits)")


# -- in Python: inputs a reader relabelled keep their file's names ------------------------

def test_reader_results_name_original_ids_and_1_based_rows(tmp_path):
    f = tmp_path / "r.csv"
    f.write_text(STRING_IDS)
    s = read(f)
    s.meta["vals"] = s.meta["vals"].copy()
    s.meta["vals"][2] = np.nan                             # bob's rating of tt2
    with pytest.raises(InputError, match=r"rating nan at \(user bob, item tt2\) is not a "
                                         "finite number"):
        dh.ssgd.plan(s, 1)
    m = tmp_path / "a.mtx"
    m.write_text(EMPTY_ROWS)
    s = read(m)
    s.matrix.data[3] = np.inf                              # row 2, column 4 of the file
    with pytest.raises(InputError, match=r"rating inf at \(row 2, column 4\)"):
        dh.ssgd.plan(s, 1)


def test_check_reads_the_input_once(tmp_path, client2):
    """``check`` reads and validates; ``plan``/``run`` use what it read (the file may be
    gone by then)."""
    from daskhpc.testing import workflow_call

    for mode in ("plan", "run"):
        f = tmp_path / f"{mode}.csv"
        f.write_text(STRING_IDS)
        wf, call, run = workflow_call(mode, "ssgd", [str(f), "--parts", "2", "--partition",
                                                      "random", "--epochs", "1"], client2)
        wf.check(call)
        f.unlink()
        rep = wf.plan(call) if mode == "plan" else wf.run(call, run)
        assert rep["input"]["shape"] == [4, 2] and rep["input"]["path"] == str(f)


# -- fit(resume=True) takes the route of a fresh run ------------------------------------

@pytest.mark.parametrize("name,text,options", [
    ("a.mtx", EMPTY_ROWS, {}),                              # empty rows dropped
    ("votes.el", STRING_IDS.replace(",", " "), {"format": "ratings"}),   # .el says snap
], ids=["empty-rows", "format"])
def test_resume_reads_the_input_as_a_fresh_run(tmp_path, client2, name, text, options):
    path = tmp_path / name
    path.write_text(text)
    opts = {"partition": "random", "test_fraction": 0.0, "rank": 4, **options}
    ck = tmp_path / "ck"
    dh.ssgd.fit(str(path), 2, client=client2, checkpoint=ck, epochs=2, **opts)
    resumed = dh.ssgd.fit(str(path), 2, client=client2, checkpoint=ck, resume=True,
                          epochs=4, **opts)
    fresh = dh.ssgd.fit(str(path), 2, client=client2, epochs=4, **opts)
    assert resumed.report()["recovery"]["resumed_from"] == 2
    assert np.array_equal(resumed.W, fresh.W) and np.array_equal(resumed.H, fresh.H)
    assert resumed.report()["input"] == fresh.report()["input"]
