"""Pick a reader from the file name, or from the first lines when the name is silent."""

from __future__ import annotations

import contextlib
import contextvars
import gzip
import os
import re
from pathlib import Path

from ._common import _GZIP_MAGIC, SparseInput, gunzip
from ._edgecsv import read_edge_csv
from ._errors import ReadError
from ._libsvm import read_libsvm
from ._mtx import read_matrix_market
from ._ratings import read_ratings
from ._snap import read_snap
from ._tns import read_tns

_READERS = {"mtx": read_matrix_market, "snap": read_snap, "tns": read_tns,
            "libsvm": read_libsvm, "ratings": read_ratings, "edges": read_edge_csv}

_SUFFIXES = {".mtx": "mtx", ".tns": "tns",
             ".txt": "snap", ".edges": "snap", ".el": "snap",
             ".csv": "ratings", ".tsv": "ratings", ".dat": "ratings",
             ".svm": "libsvm", ".libsvm": "libsvm", ".svmlight": "libsvm"}

KNOWN = ("mtx (.mtx), snap (.txt, .edges, .el), tns (.tns), "
         "libsvm (.svm, .libsvm, or lines 'label index:value ...'), "
         "ratings (.csv, .tsv, .dat, ratings.*), edges (.csv of two columns source,target); "
         "any of them gzipped (.gz)")

# "label index:value ..." with optional qid and trailing comment
_LIBSVM_LINE = re.compile(rb"\s*[-+]?[0-9.][0-9.eE+-]*((\s+qid:\S+)|(\s+\d+:\S+))*\s*(#.*)?")
_HEAD_BYTES = 1 << 16


#: ``{path: format}`` the command line set for the user's inputs (``--format``).
_CLI_FORMATS: contextvars.ContextVar[dict] = contextvars.ContextVar("daskhpc_formats",
                                                                     default={})

#: Options a format spec may carry after a colon (``--format snap:weights``).
_FORMAT_OPTIONS = {"snap": ("values", ("ignore", "weights"))}


def _key(path) -> str:
    return os.path.abspath(os.fspath(path))


@contextlib.contextmanager
def formats_of(paths, format: str | None):
    """Within the block, :func:`read` of any of ``paths`` without a ``format=`` uses
    ``format`` (the CLI's ``--format`` for the command's inputs; None: no change).

    Examples
    --------
    >>> with formats_of(["edges.dat"], "snap"):      # doctest: +SKIP
    ...     read("edges.dat").format
    'snap'
    """
    if not format:
        yield
        return
    parse_format(format, "--format")
    token = _CLI_FORMATS.set({**_CLI_FORMATS.get(), **{_key(p): format for p in paths}})
    try:
        yield
    finally:
        _CLI_FORMATS.reset(token)


def parse_format(spec: str, where="--format") -> tuple[str, dict]:
    """``"snap:weights"`` -> ``("snap", {"values": "weights"})``; errors name ``where``."""
    name, _, option = str(spec).partition(":")
    if name not in _READERS:
        raise ReadError(where, None, f"unknown format {name!r}; known formats: {KNOWN}")
    if not option:
        return name, {}
    key, allowed = _FORMAT_OPTIONS.get(name, (None, ()))
    if option not in allowed:
        choices = ", ".join(f"{name}:{a}" for a in allowed) or f"none for {name}"
        raise ReadError(where, None, f"unknown format option {spec!r}; options: {choices}")
    return name, {key: option}


def read(path, format: str | None = None, *, matrix: bool = True, **kw) -> SparseInput:
    """Read a sparse input file, choosing the reader from its name.

    Parameters
    ----------
    path : str or os.PathLike
    format : str, optional
        One of ``FORMATS`` or ``"edges"`` (CSV edge list), optionally with a reader option
        after a colon (``"snap:weights"``); default the CLI's ``--format`` for this path,
        else :func:`detect_format`.
    matrix : bool
        False: a ratings file's triplets only (``meta``), no CSR matrix.
    **kw
        Passed to the reader (``directed=False`` for snap, ``n_features=`` for libsvm...).

    Examples
    --------
    >>> from daskhpc.io import read
    >>> read("soc-Slashdot0902.txt.gz").shape       # doctest: +SKIP
    (82168, 82168)
    >>> read("a9a.t", n_features=123).shape         # doctest: +SKIP
    (16281, 123)
    """
    if format is None:
        format = _CLI_FORMATS.get().get(_key(path))
    name, options = (detect_format(path), {}) if format is None else \
        parse_format(format, path)
    if not matrix and name == "ratings":
        kw["matrix"] = False
    return _READERS[name](path, **{**options, **kw})


def detect_format(path) -> str:
    """The format of ``path``: by extension (``.gz`` ignored), else by content.

    ``ratings.*`` names are ratings unless the extension names another matrix format
    (``ratings.mtx``). Other names (LIBSVM's ``a9a.t``) are sniffed: a ``%%MatrixMarket``
    banner means mtx, ``label index:value`` lines libsvm.

    Examples
    --------
    >>> detect_format("astro-ph.mtx.gz"), detect_format("ml/ratings.txt")
    ('mtx', 'ratings')
    """
    name = Path(path).name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    fmt = _SUFFIXES.get(Path(name).suffix)
    if name.startswith("ratings.") and fmt in (None, "snap"):
        return "ratings"   # ratings.txt, ratings.list: not edge lists
    if fmt == "ratings" and Path(name).suffix == ".csv" and _two_fields(path):
        return "edges"   # edges.csv: source,target (ratings have 3 or 4 fields)
    if fmt is not None:
        return fmt
    sniffed = _sniff(path)
    if sniffed is None:
        raise ReadError(path, None, f"cannot tell the format from the name or the content; "
                        f"known formats: {KNOWN}; give it with --format NAME "
                        f"(format= in Python)")
    return sniffed


def _two_fields(path) -> bool:
    """Whether the first non-comment line of a CSV file has exactly two fields."""
    try:
        head = _head(path)
    except (OSError, ReadError):
        return False   # let the reader name the problem
    for line in head.lstrip(b"\xef\xbb\xbf").splitlines():
        if line.strip() and not line.lstrip().startswith((b"#", b"%")):
            return b'"' not in line and len(line.split(b",")) == 2
    return False


def _head(path) -> bytes:
    """The file's first bytes, un-gzipped."""
    with open(path, "rb") as f:
        head = f.read(_HEAD_BYTES)
    if head[:2] == _GZIP_MAGIC:
        with gzip.open(path, "rb") as f:
            head = gunzip(path, f.read, _HEAD_BYTES)
    return head


def _sniff(path) -> str | None:
    head = _head(path)
    if head.lstrip(b"\xef\xbb\xbf")[:14].lower() == b"%%matrixmarket":
        return "mtx"
    lines = head.splitlines()
    if len(head) == _HEAD_BYTES:
        lines = lines[:-1]   # the last line may be cut by the read
    rows = [ln for ln in lines if ln.strip() and not ln.lstrip().startswith(b"#")][:20]
    if rows and any(b":" in r for r in rows) and all(_LIBSVM_LINE.fullmatch(r) for r in rows):
        return "libsvm"
    return None
