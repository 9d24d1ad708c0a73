"""Every command in README.md and docs/*.md runs as written (issue 13, item 3).

Convention for the docs: a fence marked ``sh`` (or ``bash``/``console``) holds commands a
reader can paste in the repository's root, on the bundled data and ``../shared/data``;
synopses with placeholders (``A.mtx``, ``[--b B.mtx]``) go in a plain fence.

The default run parses every ``daskhpc`` / ``python -m daskhpc.mpi`` command with the
real parsers and checks that its input files exist; ``pytest -m slow
tests/test_docs_commands.py`` runs every ``daskhpc`` command for real (in a scratch
directory beside a link to ``../shared``) and needs exit status 0.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL = {"sh", "bash", "console", "shell"}
# Commands the slow run leaves out, and why (each needs what a test cannot have).
NOT_RUN = {
    "mpiexec": "an MPI job of 5-10 ranks (tests/mpi runs the launcher for real)",
    "python": "a benchmark or data generator (docs/benchmarks.md lists their runs)",
}


def _blocks(text: str):
    """(language, lines) of every fenced block."""
    lang, lines = None, []
    for line in text.splitlines():
        if line.strip().startswith("```"):
            if lang is None:
                lang, lines = line.strip()[3:].strip() or "-", []
            else:
                yield lang, lines
                lang = None
        elif lang is not None:
            lines.append(line)


def _commands(lines):
    """Shell words of each command (continuation lines joined, comments dropped)."""
    joined, buf = [], ""
    for line in lines:
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        joined.append(buf + line)
        buf = ""
    for cmd in joined:
        words = shlex.split(cmd.strip().removeprefix("$ "), comments=True)
        if words:
            yield words


def collect() -> list[tuple[str, list[str]]]:
    out = []
    for doc in DOCS:
        for lang, lines in _blocks(doc.read_text()):
            if lang not in SHELL:
                continue
            for words in _commands(lines):
                if words[0] in ("daskhpc", "mpiexec") or words[:3] == ["python", "-m",
                                                                        "daskhpc.mpi"]:
                    out.append((doc.name, words))
    return out


COMMANDS = collect()
IDS = [f"{doc}:{' '.join(w)[:60]}" for doc, w in COMMANDS]


def _daskhpc_argv(words: list[str]) -> tuple[str, list[str]] | None:
    """("cli"|"mpi", argv) of a daskhpc command, or None (python -c ..., scripts)."""
    if words[0] == "daskhpc":
        return "cli", words[1:]
    if words[0] == "mpiexec":
        i = words.index("python") if "python" in words else None
        if i is None or words[i + 1:i + 3] != ["-m", "daskhpc.mpi"]:
            return None
        return "mpi", words[i + 3:]
    return "mpi", words[3:]          # python -m daskhpc.mpi ... (under mpiexec)


def _inputs_exist(args) -> list[str]:
    from daskhpc import datasets

    names = set(datasets.names())
    missing = []
    for x in getattr(args, "inputs", None) or []:
        if x not in names and not (ROOT / x).exists():
            missing.append(x)
    for opt in ("test", "partition_file", "b"):
        x = getattr(args, opt, None)
        if isinstance(x, str) and x not in names and not (ROOT / x).exists():
            missing.append(x)
    return missing


@pytest.mark.parametrize(("doc", "words"), COMMANDS, ids=IDS)
def test_every_documented_command_parses_and_names_real_files(doc, words, monkeypatch):
    from daskhpc import _mpi_options
    from daskhpc.cli import build_parser
    from daskhpc.mpi import build_parser as mpi_parser

    monkeypatch.chdir(ROOT)
    kind = _daskhpc_argv(words)
    assert kind is not None, f"{doc}: not a daskhpc command: {' '.join(words)}"
    mode, argv = kind
    try:
        if mode == "cli":
            args = build_parser().parse_args(argv)
        else:
            opts = mpi_parser().parse_args(argv)
            job = _mpi_options.resolve(opts)
            args = build_parser().parse_args(job.run_argv) if job.kind == "workflow" else None
            if job.kind == "script":
                pytest.fail(f"{doc}: {job.target} is not in the repository")
    except SystemExit as e:
        pytest.fail(f"{doc}: {' '.join(words)}: rejected by the parser (exit {e.code})")
    except _mpi_options.BadOptions as e:
        pytest.fail(f"{doc}: {' '.join(words)}: {e}")
    if args is not None:
        assert not _inputs_exist(args), f"{doc}: {' '.join(words)}: no such input"


RUNNABLE = [(d, w) for d, w in COMMANDS if w[0] == "daskhpc"]


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize(("doc", "words"), RUNNABLE,
                         ids=[f"{d}:{' '.join(w)[:60]}" for d, w in RUNNABLE])
def test_every_documented_daskhpc_command_runs(doc, words, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "shared").symlink_to(ROOT.parent / "shared")
    for name in ("README.md", "docs", "daskhpc"):
        (work / name).symlink_to(ROOT / name)
    exe = Path(sys.executable).with_name("daskhpc")
    env = {**os.environ, "DASK_DASKHPC__RUNTIME__PROGRESS": "False"}
    got = subprocess.run([str(exe), *words[1:]], cwd=work, capture_output=True, text=True,
                         env=env, timeout=880)
    assert got.returncode == 0, f"{doc}: {' '.join(words)}\n{got.stderr[-2000:]}"
