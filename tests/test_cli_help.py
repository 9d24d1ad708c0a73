"""The command line generated from the workflows' Options: every option has a help text
with its default, a misspelt option gets the workflow's usage and a suggestion."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from daskhpc import _workflows

EXE = str(Path(sys.executable).with_name("daskhpc"))


def _cli(*argv):
    return subprocess.run([EXE, *argv], capture_output=True, text=True, timeout=280)


@pytest.mark.parametrize("argv, said", [
    (["run", "ssgd", "ratings.csv", "--epohcs", "3"],
     "daskhpc: unknown option --epohcs; did you mean --epochs?"),
    (["run", "ssgd", "--partiton", "hp", "ratings"],
     "daskhpc: unknown option --partiton; did you mean --partition?"),
    (["partition", "row-net", "a.mtx", "--parts", "2", "--partitoner", "lp"],
     "daskhpc: unknown option --partitoner; did you mean --partitioner?"),
    (["demo", "--workrs", "2"], "daskhpc: unknown option --workrs; did you mean --workers?"),
    (["run", "ssgd", "ratings", "--colour"],
     "daskhpc: unknown option --colour (daskhpc run ssgd --help lists the options)"),
])
def test_a_misspelt_option_is_one_line_with_the_likely_option(argv, said):
    done = _cli(*argv)
    assert done.returncode == 2
    assert done.stderr == said + "\n"            # one line, not the usage


@pytest.mark.parametrize("name", sorted(_workflows.available()))
@pytest.mark.parametrize("mode", ["plan", "run"])
def test_every_option_has_a_help_text(name, mode):
    import argparse

    wf = _workflows.load(name)
    p = argparse.ArgumentParser()
    wf.add_arguments(p, mode)
    missing = [a.option_strings[0] for a in p._actions if a.option_strings
               and not a.help and a.dest != "help"]
    assert not missing, f"{name} {mode}: options without help: {missing}"


def test_linear_help_says_what_the_options_do_and_their_defaults():
    done = _cli("run", "linear", "--help")
    text = " ".join(done.stdout.split())
    for words in ("--lr LR eta0, the per-sample step size", "(default 0.5)", "--reg REG alpha, the "
                  "regularisation strength", "--learning-rate {", "(default optimal)",
                  "--group GROUP ranks per sparse group", "--loss {log,hinge}"):
        assert words in text, words


def test_ssgd_help_reads_the_right_way_round():
    text = " ".join(_cli("plan", "ssgd", "--help").stdout.split())
    assert "seeded balanced random (random), or the one the cost model predicts fastest " \
           "on --network (auto) (default hp)" in text
    assert "--keep-empty do not drop empty rows and columns: a matrix that has any is " \
           "refused (by default they are dropped, with a note)" in text


def test_a_bundled_data_set_by_its_name(tmp_path):
    done = subprocess.run([EXE, "plan", "ssgd", "ratings", "--parts", "2", "--partition",
                           "random", "--json", "-"], capture_output=True, text=True,
                          timeout=280, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    import json

    rep = json.loads(done.stdout)
    assert rep["input"]["shape"] == [610, 9724]
    assert rep["input"]["path"].endswith("ml-latest-small-ratings.csv.gz")
