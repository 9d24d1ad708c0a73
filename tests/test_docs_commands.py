"""Every command in README.md and docs/*.md runs as written, for a user.

Convention for the docs: a fence marked ``sh`` (or ``bash``/``console``) holds commands a
reader can paste in any directory once the package is installed: they read the bundled
data (through shell variables such as
``RATINGS=$(python -c "import daskhpc; print(daskhpc.datasets.path('ratings'))")``), files
an earlier line of the same document writes (``python -c ...``) or downloads (``curl``),
or ``cora`` by name (gcn resolves it). Nothing may point into the checkout or beside it
(``../shared``): a user has neither. Synopses with placeholders (``A.mtx``, ``[--b
B.mtx]``) go in a plain fence.

The default run expands every ``daskhpc`` / ``mpiexec ... python -m daskhpc.mpi`` command
with bash, as a user's shell would (one shell per document, in an empty temporary
directory, running the document's variable assignments and ``python -c`` lines), parses it
with the real parsers and checks that its input files exist there. ``pytest -m slow
tests/test_docs_commands.py`` runs every ``daskhpc`` command for real, in the same kind of
directory, and needs exit status 0.
"""

from __future__ import annotations

import atexit
import functools
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
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
# Inputs a workflow resolves by name rather than as a file.
BY_NAME = {"gcn": {"cora"}, "allreduce": {"uniform"}}
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
#: ``VAR=x python script.py``: a command run with a variable set (a benchmark), not a
#: setup line (``VAR=$(python -c ...)`` is one)
ENV_PREFIX = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*=[^\s$\"'(]*\s+)+[^\s=]+(\s|$)")
# Where the repository's text may not point: beside the checkout (the project's shared
# directory), which a user of the package never has.
OUTSIDE = re.compile(r"\.\./shared|shared/(data|papers)/|\b(DESIGN|DASK_NOTES|CLI)\.md\b")
# Files allowed to keep such a pointer (none).
PENDING: set = set()


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


def _lines(lines):
    """Each command line as written (continuation lines joined), blank lines dropped."""
    joined, buf = [], ""
    for line in lines:
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        joined.append((buf + line).strip().removeprefix("$ "))
        buf = ""
    return [c for c in joined if c and not c.startswith("#")]


def _is_command(words: list[str]) -> bool:
    return words[0] in ("daskhpc", "mpiexec") or words[:3] == ["python", "-m", "daskhpc.mpi"]


def shell_lines(doc: Path):
    """(kind, line) of every line of the document's shell fences, in order: ``command``
    (daskhpc / mpiexec), ``setup`` (a variable assignment or ``python -c`` in a fence
    with commands: what the commands after it rely on), ``curl`` (a download) or
    ``other`` (benchmark runs, builds)."""
    for lang, lines in _blocks(doc.read_text()):
        if lang not in SHELL:
            continue
        parsed = [(line, shlex.split(line, comments=True)) for line in _lines(lines)]
        parsed = [(line, words) for line, words in parsed if words]
        with_commands = any(_is_command(words) for _, words in parsed)
        for line, words in parsed:
            if _is_command(words):
                yield "command", line
            elif with_commands and ((ASSIGNMENT.match(line) and not ENV_PREFIX.match(line))
                                    or words[:2] == ["python", "-c"]):
                yield "setup", line
            elif words[0] == "curl":
                yield "curl", line
            else:
                yield "other", line


def collect() -> list[tuple[str, int, list[str]]]:
    """(document, index of the command in it, words as written) of every command."""
    out = []
    for doc in DOCS:
        cmds = [line for kind, line in shell_lines(doc) if kind == "command"]
        out += [(doc.name, i, shlex.split(c, comments=True)) for i, c in enumerate(cmds)]
    return out


COMMANDS = collect()
IDS = [f"{doc}:{' '.join(w)[:60]}" for doc, _, w in COMMANDS]


def _user_env() -> dict[str, str]:
    """This environment with this interpreter's ``python`` first on the PATH (the user's
    activated venv) and no progress bars."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return {**os.environ, "PATH": path, "DASK_DASKHPC__RUNTIME__PROGRESS": "False"}


def _setup_before(doc: Path, index: int) -> list[str]:
    """The document's setup lines before its command number ``index``."""
    setup, n = [], -1
    for kind, line in shell_lines(doc):
        if kind == "command":
            n += 1
            if n == index:
                return setup
        elif kind == "setup":
            setup.append(line)
    raise IndexError(index)


@functools.lru_cache(maxsize=None)
def expanded(doc_name: str) -> tuple[Path, list[list[str]]]:
    """(directory, words) of every command of a document as bash expands them, in an empty
    directory outside the checkout after the document's setup lines ran there."""
    doc = next(d for d in DOCS if d.name == doc_name)
    where = Path(tempfile.mkdtemp(prefix="daskhpc-docs-"))
    atexit.register(shutil.rmtree, where, True)     # cached for the session, then removed
    # the commands print their words (to fd 3: a pipe after one gets nothing) instead of
    # running; a failing setup line leaves its variable empty or its file missing
    script = ["daskhpc() { printf '%q ' daskhpc \"$@\" >&3; echo >&3; }",
              "mpiexec() { printf '%q ' mpiexec \"$@\" >&3; echo >&3; }", "exec 3>words"]
    script += [line for kind, line in shell_lines(doc) if kind in ("command", "setup")]
    done = subprocess.run(["bash", "-c", "\n".join(script)], cwd=where, env=_user_env(),
                          capture_output=True, text=True, timeout=300)
    words = [shlex.split(line) for line in (where / "words").read_text().splitlines()]
    (where / "words").unlink()
    assert len(words) == sum(kind == "command" for kind, _ in shell_lines(doc)), done.stderr
    return where, words


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


def _downloaded(doc: Path) -> set[str]:
    """File names the document's ``curl`` lines fetch."""
    return {Path(w).name for kind, line in shell_lines(doc) if kind == "curl"
            for w in shlex.split(line, comments=True) if "://" in w}


def _inputs(args) -> list[str]:
    out = list(getattr(args, "inputs", None) or [])
    if isinstance(getattr(args, "input", None), str):
        out.append(args.input)                       # daskhpc partition
    for opt in ("test", "partition_file", "b_path"):
        if isinstance(getattr(args, opt, None), str):
            out.append(getattr(args, opt))
    return out


def _missing(args, where: Path, downloaded: set[str]) -> list[str]:
    """Inputs neither in ``where`` (absolute, or made there), nor downloaded, nor a name
    the workflow resolves; anything pointing outside (``..``) counts as missing."""
    names = BY_NAME.get(getattr(args, "workflow", None), set())
    bad = []
    for x in _inputs(args):
        if ".." in Path(x).parts:
            bad.append(f"{x} (outside the user's directory)")
        elif x not in names and x not in downloaded and not (where / x).exists():
            bad.append(x)
    return bad


@pytest.mark.parametrize(("doc", "index", "words"), COMMANDS, ids=IDS)
def test_every_documented_command_parses_and_names_real_files(doc, index, words):
    from daskhpc import _mpi_options
    from daskhpc.cli import build_parser
    from daskhpc.mpi import build_parser as mpi_parser

    path = next(d for d in DOCS if d.name == doc)
    where, all_words = expanded(doc)
    words = all_words[index]
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
        missing = _missing(args, where, _downloaded(path))
        assert not missing, f"{doc}: {' '.join(words)}: no such input {missing}"


def _outside_pointers(paths) -> list[str]:
    hits = []
    for p in paths:
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            if OUTSIDE.search(line):
                hits.append(f"{p.relative_to(ROOT)}:{n}: {line.strip()[:100]}")
    return hits


def _repository_text() -> list[Path]:
    package = [p for p in (ROOT / "daskhpc").rglob("*") if p.suffix in (".py", ".md", ".yaml")
               and "data" not in p.relative_to(ROOT / "daskhpc").parts[1:2]
               and str(p.relative_to(ROOT)) not in PENDING]
    return [*DOCS, *sorted((ROOT / "docs").glob("notebooks/*.ipynb")), *package]


def test_nothing_points_outside_the_repository():
    """README, docs and package name no file a user lacks (the project's shared
    directory, its DESIGN/DASK_NOTES/CLI notes): the CLI contract is docs/cli.md."""
    hits = _outside_pointers(_repository_text())
    assert not hits, "points outside the repository:\n" + "\n".join(hits)


def test_the_checks_catch_a_readme_on_the_shared_data(tmp_path, monkeypatch):
    """An older README (``../shared/data/...``) fails both checks."""
    readme = tmp_path / "README.md"
    readme.write_text("Contract: `../shared/CLI.md`.\n\n```sh\n"
                      "daskhpc run ssgd ../shared/data/ratings/ml-latest-small/ratings.csv"
                      " --parts 4\n```\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert len(_outside_pointers([readme])) == 2
    monkeypatch.setattr(sys.modules[__name__], "DOCS", [readme])
    expanded.cache_clear()
    try:
        where, (words,) = expanded("README.md")
    finally:
        expanded.cache_clear()
    from daskhpc.cli import build_parser

    args = build_parser().parse_args(words[1:])
    assert _missing(args, where, set()) == [
        "../shared/data/ratings/ml-latest-small/ratings.csv (outside the user's directory)"]


RUNNABLE = [(d, i, w) for d, i, w in COMMANDS if w[0] == "daskhpc"]
_WORKDIRS: dict[str, Path] = {}


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize(("doc", "index", "words"), RUNNABLE,
                         ids=[f"{d}:{' '.join(w)[:60]}" for d, _, w in RUNNABLE])
def test_every_documented_daskhpc_command_runs(doc, index, words, tmp_path_factory):
    """As a user runs it: from an empty directory outside the checkout (one per document,
    so a command finds what an earlier one wrote), after the document's setup lines."""
    path = next(d for d in DOCS if d.name == doc)
    line = [c for kind, c in shell_lines(path) if kind == "command"][index]
    fetched = _downloaded(path)
    if any(Path(w).name in fetched for w in words):
        pytest.skip(f"reads a file the document downloads ({', '.join(sorted(fetched))})")
    work = _WORKDIRS.setdefault(doc, tmp_path_factory.mktemp("user"))
    script = "\n".join(["set -e -o pipefail", *_setup_before(path, index), line])
    got = subprocess.run(["bash", "-c", script], cwd=work, capture_output=True, text=True,
                         env=_user_env(), timeout=880)
    assert got.returncode == 0, f"{doc}: {line}\n{got.stderr[-2000:]}"
