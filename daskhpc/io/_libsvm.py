"""LIBSVM / SVMlight files: ``label index:value index:value ... [# comment]``."""

from __future__ import annotations

import re

import numpy as np

from ._common import Lines, SparseInput, as_int, check_finite, csr, read_bytes
from ._errors import ReadError

_COMMENT = re.compile(rb"#[^\n]*")
_QID = re.compile(rb"(?<!\S)qid:\S*")


def read_libsvm(path, *, n_features: int | None = None,
                zero_based: bool | str = "auto") -> SparseInput:
    """Read a LIBSVM/SVMlight file into a CSR sample matrix and labels.

    Parameters
    ----------
    path : str or os.PathLike
    n_features : int, optional
        Number of columns (a test split's: the training split's); default the largest index.
    zero_based : bool or "auto", default "auto"
        Whether feature indices start at 0; ``"auto"``: when some index is 0.

    Returns
    -------
    SparseInput
        ``matrix`` (samples x features; a feature repeated within a line is summed),
        ``labels`` (float64), ``meta["zero_based"]``. ``qid:`` tokens and ``#`` comments
        are ignored.

    Examples
    --------
    >>> s = read_libsvm("a9a")                      # doctest: +SKIP
    >>> s.shape, s.nnz, s.labels[:3]                # doctest: +SKIP
    ((32561, 123), 451592, array([-1., -1., -1.]))
    """
    raw = read_bytes(path)
    # Both rewrites keep every newline, so line numbers stay the file's.
    if b"#" in raw:
        raw = _COMMENT.sub(b"", raw)
    if b"qid:" in raw:
        raw = _QID.sub(b"", raw)
    lines = Lines(path, raw)
    idx = lines.data_lines(b"")
    if idx.size == 0:
        raise ReadError(path, None, "empty file")

    # A well formed line "label i:v ... i:v" with k features has 1 + k tokens
    # and k colons, and 1 + 2k tokens once the colons become blanks.
    colon = np.frombuffer(raw, dtype=np.uint8) == ord(":")
    seen = np.concatenate(([0], np.cumsum(colon)))
    n_colons = (seen[lines.ends] - seen[lines.starts])[idx]
    split = Lines(path, raw.replace(b":", b" "))
    ntok, ntok_split = lines.ntok[idx], split.ntok[idx]
    k = lines.first_bad(idx, (n_colons != ntok - 1) | (ntok_split != 2 * ntok - 1))
    if k is not None:
        raise lines.error(k, _diagnose(lines.tokens(k)))

    flat = split.numbers(idx)
    first = np.concatenate(([0], np.cumsum(ntok_split)[:-1]))
    labels = flat[first]
    check_finite(lines, idx, labels, "label")
    is_pair = np.ones(flat.size, dtype=bool)
    is_pair[first] = False
    pairs = flat[is_pair].reshape(-1, 2)
    rows = np.repeat(np.arange(idx.size), ntok - 1)
    at = idx[rows]   # file line of each feature, for the messages

    cols = as_int(lines, at, pairs[:, 0], "feature index")
    vals = pairs[:, 1]
    check_finite(lines, at, vals)
    lines.check(at, cols < 0, lambda r: f"feature index {cols[r]} is negative")
    zero = _zero_based(lines, at, cols, zero_based)
    if not zero:
        cols = cols - 1
    if n_features is None:
        n_features = int(cols.max()) + 1 if cols.size else 0
    lines.check(at, cols >= n_features, lambda r: f"feature index "
                f"{cols[r] + (0 if zero else 1)} is beyond n_features={n_features}")
    matrix = csr(rows, cols, vals, (idx.size, int(n_features)))
    return SparseInput(str(path), "libsvm", matrix=matrix, labels=labels,
                       index_maps=(None, None), meta={"zero_based": zero})


def _zero_based(lines, at, cols, zero_based) -> bool:
    if zero_based == "auto":
        return bool(cols.size) and int(cols.min()) == 0
    if zero_based not in (True, False):
        raise ValueError(f"zero_based must be True, False or 'auto', not {zero_based!r}")
    if not zero_based:
        lines.check(at, cols == 0, lambda r: "feature index 0 in a 1-based file (pass "
                    "zero_based=True or 'auto')")
    return bool(zero_based)


def _diagnose(tokens: list[bytes]) -> str:
    """Why a line failed the shape check, in words (slow path only)."""
    if b":" in tokens[0]:
        return f"missing label: line starts with {_show(tokens[0])}"
    for tok in tokens[1:]:
        head, sep, tail = tok.partition(b":")
        if not sep or not head or not tail or b":" in tail:
            return f"malformed feature {_show(tok)} (expected index:value)"
    return "malformed line (expected: label index:value ...)"


def _show(tok: bytes) -> str:
    return repr(tok.decode("utf-8", errors="replace"))
