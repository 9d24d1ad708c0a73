"""Shared plumbing for the readers: file bytes, a vectorised line index, results (a per-line
scan runs only when a check fails, to name the line)."""

from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from ._errors import ReadError

if TYPE_CHECKING:  # pydata sparse pulls in numba: import it only where needed
    import sparse

FORMATS = ("mtx", "snap", "tns", "libsvm", "ratings")

_GZIP_MAGIC = b"\x1f\x8b"
_UTF8_BOM = b"\xef\xbb\xbf"

# Integers above 2**53 do not survive the float64 parse exactly.
_EXACT_INT = 2.0**53

#: Bytes a :class:`Lines` pass looks at at once (its per-byte temporaries' size)
CHUNK = 1 << 22
# ASCII whitespace, as both bytes.split() and np.fromstring(sep=" ") see it.
_SPACE = np.zeros(256, dtype=bool)
_SPACE[list(b" \t\n\r\v\f")] = True


@dataclass(repr=False)
class SparseInput:
    """What a reader returns: the sparse data plus what the file said about it.

    At most one of ``matrix`` (2-D formats) and ``tensor`` (``tns``) is set.

    Attributes
    ----------
    path, format : str
        The file read and its format (one of :data:`FORMATS`).
    matrix : scipy.sparse.csr_array or None
        float64, canonical (sorted indices, no duplicate entries). None for a ratings
        file read with ``matrix=False``: ``meta`` holds its triplets and ``shape``.
    tensor, labels : sparse.COO, numpy.ndarray or None
        float64, 0-based coordinates; float64 sample labels (``libsvm``).
    index_maps : tuple
        Per mode, the file's id of each dense index (``index_maps[0][i]``: of row ``i``),
        int64 or str; None when the file's ids were already dense.
    meta : dict
        Format specific facts (symmetry, field, header_detected, ...).

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> s = SparseInput("x.mtx", "mtx", matrix=sp.csr_array(sp.eye(3)))
    >>> s.shape, s.nnz, s.ndim
    ((3, 3), 3, 2)
    >>> s.describe()
    {'path': 'x.mtx', 'shape': [3, 3], 'nnz': 3}
    """

    path: str
    format: str
    matrix: sp.csr_array | None = None
    tensor: sparse.COO | None = None
    labels: np.ndarray | None = None
    index_maps: tuple = ()
    meta: dict = field(default_factory=dict)

    @property
    def data(self):
        """The matrix, or the tensor when there is no matrix."""
        return self.matrix if self.matrix is not None else self.tensor

    @property
    def shape(self) -> tuple[int, ...]:
        d = self.data        # None: ratings read without their matrix (``meta`` holds it)
        return tuple(int(n) for n in (self.meta["shape"] if d is None else d.shape))

    @property
    def nnz(self) -> int:
        """Stored entries (explicit zeros included)."""
        d = self.data
        return int(self.meta["vals"].size if d is None else d.nnz)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def describe(self) -> dict:
        """JSON-ready summary for the report's "input" section."""
        return {"path": self.path, "shape": list(self.shape), "nnz": self.nnz}

    def __repr__(self) -> str:
        return (f"SparseInput(path={self.path!r}, format={self.format!r}, "
                f"shape={self.shape}, nnz={self.nnz})")


def arrow_head(path):
    """``(pyarrow, pyarrow.csv, the first 64 kB of path)``, or None without pyarrow or
    when the file cannot be read (the general parse then raises)."""
    try:
        import pyarrow as pa
        from pyarrow import csv
    except ImportError:
        return None
    try:
        with open(path, "rb") as f:
            return pa, csv, f.read(1 << 16)
    except OSError:
        return None


def read_bytes(path) -> bytes:
    """The file's bytes, un-gzipped when the content (not the name) is gzip, without a
    UTF-8 BOM, old Mac ``\\r`` line ends made ``\\n``; a ReadError for a broken gzip."""
    raw = Path(path).read_bytes()
    if raw[:2] == _GZIP_MAGIC:
        raw = gunzip(path, gzip.decompress, raw)
    if raw[:3] == _UTF8_BOM:
        raw = raw[3:]
    if b"\r" in raw and b"\n" not in raw:
        raw = raw.replace(b"\r", b"\n")
    return raw


def gunzip(path, fn, *args):
    """``fn(*args)``, a gzip read, with a broken stream as a ReadError."""
    try:
        return fn(*args)
    except EOFError:
        raise ReadError(path, None, "truncated gzip (stream ends before its end "
                        "marker)") from None
    except (gzip.BadGzipFile, zlib.error) as e:
        raise ReadError(path, None, f"corrupt gzip ({e})") from None


class Lines:
    """A vectorised index of a text's lines and whitespace separated tokens.

    Line ``k`` (file line ``k + 1``) spans ``data[starts[k]:ends[k]]`` (without ``\\n``),
    holds ``ntok[k]`` tokens and begins with the byte ``first[k]`` after leading blanks (0
    for a blank line)."""

    def __init__(self, path, data: bytes):
        self.path = str(path)
        self.data = data
        buf = np.frombuffer(data, dtype=np.uint8)
        # Scanned in blocks of CHUNK bytes, twice (line ends, then token starts): the
        # per-byte temporaries are a block's, what is kept is per line.
        newline = [np.flatnonzero(buf[a:a + CHUNK] == ord("\n")) + a
                   for a in range(0, buf.size, CHUNK)]
        newline = np.concatenate(newline) if newline else np.zeros(0, np.int64)
        starts = np.empty(newline.size + 1, np.int64)
        starts[0] = 0
        starts[1:] = newline + 1
        ends = np.empty(newline.size + 1, np.int64)
        ends[:-1] = newline
        ends[-1] = buf.size
        del newline
        if starts.size > 1 and starts[-1] == buf.size:
            # the text ends with "\n": no line after it
            starts, ends = starts[:-1], ends[:-1]
        self.starts, self.ends = starts, ends
        self.ntok = np.zeros(starts.size, np.int64)
        self.first = np.zeros(starts.size, dtype=np.uint8)
        prev = False                             # the byte before the block is a word's
        for a in range(0, buf.size, CHUNK):
            b = buf[a:a + CHUNK]
            word = ~_SPACE[b]
            begins = word.copy()
            begins[1:] &= ~word[:-1]
            begins[0] &= not prev
            prev = bool(word[-1])
            at = np.flatnonzero(begins)
            del word, begins
            if not at.size:
                continue
            line = np.searchsorted(starts, at + a, side="right") - 1
            # a line's first token: the first start in the first block that has one
            lead = np.flatnonzero(np.diff(line, prepend=-1))
            new = self.ntok[line[lead]] == 0
            self.first[line[lead[new]]] = b[at[lead[new]]]
            lo = int(line[0])                    # the block's lines are a range
            self.ntok[lo:int(line[-1]) + 1] += np.bincount(line - lo)
        self._buf = buf

    def __len__(self) -> int:
        return self.starts.size

    def release(self) -> None:
        """Drop the text and its index; :meth:`error` and :meth:`check` still name lines."""
        self.data = self._buf = None
        self.starts = self.ends = self.ntok = self.first = None

    def tokens(self, k: int) -> list[bytes]:
        """The tokens of line ``k`` (0-based)."""
        return self.data[self.starts[k]:self.ends[k]].split()

    def data_lines(self, comments: bytes = b"#%") -> np.ndarray:
        """Indices of the lines holding tokens and not starting a comment."""
        keep = self.ntok > 0
        if comments:
            keep &= ~np.isin(self.first, np.frombuffer(comments, np.uint8))
        return np.flatnonzero(keep)

    def error(self, k: int, problem: str) -> ReadError:
        """A ReadError for line ``k`` (0-based)."""
        return ReadError(self.path, int(k) + 1, problem)

    def join(self, idx: np.ndarray) -> bytes:
        """The bytes of the lines ``idx``, still newline separated."""
        keep = np.zeros(len(self), dtype=bool)
        keep[idx] = True
        dropped = np.flatnonzero(~keep & (self.ntok > 0))
        if dropped.size == 0:
            return self.data   # only blank lines left out: no copy needed
        if idx.size == 0 or dropped[-1] < idx[0]:
            return self.data[self.starts[idx[0]]:] if idx.size else b""   # a leading block
        # Each line owns the bytes from its start to the next line's start
        # (its newline included): repeat its keep flag over them.
        owned = np.diff(np.append(self.starts, self._buf.size))
        return self._buf[np.repeat(keep, owned)].tobytes()

    def numbers(self, idx: np.ndarray) -> np.ndarray:
        """Every token of the lines ``idx`` as float64, in file order (``np.fromstring``
        a CHUNK at a time); a ReadError names the line of a token that is not a number."""
        expected = int(self.ntok[idx].sum())
        if expected == 0:
            # np.fromstring("  ") returns [-1.0]; never ask it
            return np.empty(0, dtype=np.float64)
        # a CHUNK of lines at a time into the result: not a copy of the whole text
        cum = np.cumsum(self.ends[idx] - self.starts[idx] + 1)
        cuts = np.searchsorted(cum, np.arange(CHUNK, cum[-1], CHUNK))
        values = np.empty(expected if cuts.size else 0, dtype=np.float64)
        at = 0
        for lo, hi in zip(np.concatenate([[0], cuts]), np.concatenate([cuts, [idx.size]])):
            if hi <= lo:
                continue
            part = idx[lo:hi]
            n = int(self.ntok[part].sum())
            try:
                got = np.fromstring(self._text(part), dtype=np.float64, sep=" ") if n else \
                    np.empty(0)
            except ValueError:
                got = None
            if got is None or got.size != n:
                raise self._bad_number(idx)
            if not cuts.size:
                return got                 # one block: no copy into the result
            values[at:at + n] = got
            at += n
        return values

    def _text(self, part: np.ndarray) -> bytes:
        """The bytes of the sorted lines ``part``: one slice if no data line is left out."""
        a, b = int(part[0]), int(part[-1])
        if np.count_nonzero(self.ntok[a:b + 1]) == part.size:
            return self.data[self.starts[a]:self.ends[b]]
        return self.join(part)

    def _bad_number(self, idx: np.ndarray) -> ReadError:
        # Slow path on failure: chunks of lines, then the failing chunk's tokens.
        chunk = 4096
        for lo in range(0, idx.size, chunk):
            part = idx[lo:lo + chunk]
            if parses(b"\n".join(self.data[self.starts[k]:self.ends[k]] for k in part),
                       int(self.ntok[part].sum())):
                continue
            for k in part:
                for tok in self.tokens(k):
                    if not parses(tok, 1):
                        shown = tok.decode("utf-8", errors="replace")
                        return self.error(k, f"bad token {shown!r} (not a number)")
        return ReadError(self.path, None, "could not parse the numbers")

    def first_bad(self, idx: np.ndarray, bad: np.ndarray) -> int | None:
        """The first line of ``idx[bad]`` (0-based), or None if none is bad."""
        where = np.flatnonzero(bad)
        return None if where.size == 0 else int(idx[where[0]])

    def check(self, idx: np.ndarray, bad: np.ndarray, problem) -> None:
        """Raise a ReadError at line ``idx[r]`` of the first ``r`` with ``bad[r]``;
        ``problem(r)`` says what is wrong."""
        if bad.any():
            r = int(np.flatnonzero(bad)[0])
            raise self.error(idx[r], problem(r))


def parses(text: bytes, count: int) -> bool:
    """Whether ``text`` holds exactly ``count`` numbers and nothing else."""
    if count == 0:
        return True
    try:
        return np.fromstring(text, dtype=np.float64, sep=" ").size == count
    except ValueError:
        return False


def as_int(lines: Lines, idx: np.ndarray, values: np.ndarray, what: str) -> np.ndarray:
    """``values`` (one per line ``idx``) as int64; a ReadError names a non-integer."""
    bad = ~(np.isfinite(values) & (values == np.round(values)) & (np.abs(values) < _EXACT_INT))
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        v = values[r]
        if np.isfinite(v) and v == np.round(v):
            raise lines.error(idx[r], f"{what} {v:.0f} is too large (the limit is 2**53)")
        raise lines.error(idx[r], f"{what} {_fmt(v)} is not an integer")
    return values.astype(np.int64)


def check_finite(lines: Lines, idx: np.ndarray, values: np.ndarray, what: str = "value") -> None:
    """Raise a ReadError at the first NaN or infinite value (one per line)."""
    lines.check(idx, ~np.isfinite(values),
                lambda r: f"{what} is {_fmt(values[r])} (NaN/inf not allowed)")


def _fmt(v: float) -> str:
    v = float(v)
    return str(int(v)) if np.isfinite(v) and v == int(v) else repr(v)


def dense_ids(ids: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
    """Sorted unique ids become ``0..n-1``: ``(id_map, dense)`` with ``id_map[dense] ==
    ids``; ``id_map`` None when the ids already are ``0..n-1`` (``dense`` is ``ids``)."""
    # by sorting: numpy 2.4's np.unique is ~100x slower on millions of int64 ids
    from daskhpc.arrays import unique_sorted

    uniq, dense = unique_sorted(ids, return_inverse=True)
    dense = dense.astype(np.int64).reshape(-1)
    if uniq.size == 0 or (uniq[0] == 0 and uniq[-1] == uniq.size - 1):
        return None, ids.astype(np.int64)
    return uniq.astype(np.int64), dense


def first_repeat(keys: np.ndarray) -> tuple[int, int] | None:
    """``(first, second)``: the earliest position ``second`` whose key an earlier one holds,
    and the first position of that key; None when no key repeats."""
    order = np.argsort(keys, kind="stable")
    ranked = keys[order]
    repeat = ranked[1:] == ranked[:-1]
    if not repeat.any():
        return None
    second = int(order[1:][repeat].min())
    return int(order[np.searchsorted(ranked, keys[second])]), second


def csr(rows, cols, vals, shape) -> sp.csr_array:
    """A canonical float64 CSR array; duplicates summed, explicit zeros kept."""
    m = sp.coo_array((np.asarray(vals, dtype=np.float64), (rows, cols)), shape=shape).tocsr()
    m.sum_duplicates()   # also sorts the indices
    return m
