"""The ratings a run trains on: validated triplets, and a seeded train/test split.

Input mistakes a user can fix (NaN ratings, empty rows or columns, more parts than rows)
raise :class:`~daskhpc.errors.InputError` saying what and where."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from daskhpc._narrow import counts, hash_wide
from daskhpc._workflows import check_parts as kit_check_parts
from daskhpc.errors import InputError


@dataclass(eq=False)
class Ratings:
    """Rating triplets ``(rows[t], cols[t], vals[t])`` of an ``N x M`` (users x items) matrix.

    32-bit arrays stay so; zero-stride ones (:func:`placeholder`) stand for values kept on
    the workers. ``order``: ``"given"``, ``"file"`` (read here) or ``(test_fraction, seed)``
    (reordered in place by :func:`split`, training ratings first)."""

    rows: np.ndarray
    cols: np.ndarray
    vals: np.ndarray
    shape: tuple[int, int]
    source: dict = field(default_factory=dict)
    order: object = "given"

    def __post_init__(self):
        if not _placeholder(self.rows):
            self.rows, self.cols = (kept(a, (np.int32, np.int64)) for a in (self.rows,
                                                                              self.cols))
        if not _placeholder(self.vals):
            self.vals = kept(self.vals, (np.float32, np.float64))
        self.shape = (int(self.shape[0]), int(self.shape[1]))

    @property
    def nnz(self) -> int:
        return int(self.vals.size)

    def subset(self, take: np.ndarray) -> "Ratings":
        """The ratings at positions (or where the boolean mask) ``take``."""
        take = np.asarray(take)
        n = int(np.count_nonzero(take)) if take.dtype == bool else take.size
        vals = placeholder(n) if _placeholder(self.vals) else self.vals[take]
        if _placeholder(self.rows):
            return Ratings(placeholder(n, np.int64), placeholder(n, np.int64), vals,
                           self.shape, dict(self.source))
        return Ratings(self.rows[take], self.cols[take], vals, self.shape, dict(self.source))

    @property
    def on_workers(self) -> bool:
        """The ids are placeholders: the ratings are on the workers."""
        return _placeholder(self.rows)

    def mean(self) -> float:
        return mean_of(self.vals)

    def digest(self) -> str:
        """:func:`wide_digest` of rows, cols and vals in file order (a checkpoint's)."""
        import hashlib

        if not isinstance(self.order, tuple):
            return wide_digest(self.rows, self.cols, self.vals)
        h, is_test = hashlib.sha256(), holdout_mask(self.nnz, *self.order)
        for a in (self.rows, self.cols, self.vals):
            hash_wide(h, _file_order(a, is_test))
        return h.hexdigest()

    def __repr__(self):
        return f"Ratings({self.shape[0]} x {self.shape[1]}, {self.nnz} ratings)"


def _file_order(a: np.ndarray, is_test: np.ndarray, chunk: int = 1 << 20):
    """``a`` (training ratings first) back in file order, a ``chunk`` at a time."""
    n = a.size - int(np.count_nonzero(is_test))
    tr = te = 0
    for lo in range(0, a.size, chunk):
        m = is_test[lo:lo + chunk]
        k = int(np.count_nonzero(m))
        out = np.empty(m.size, a.dtype)
        out[~m], out[m] = a[tr:tr + m.size - k], a[n + te:n + te + k]
        tr, te = tr + m.size - k, te + k
        yield out


def kept(a, dtypes) -> np.ndarray:
    """``a`` contiguous, in its dtype when that is one of ``dtypes``, else the last."""
    a = np.asarray(a)
    return np.ascontiguousarray(a, a.dtype if a.dtype in dtypes else dtypes[-1])


def mean_of(v: np.ndarray, chunk: int = 1 << 20) -> float:
    """The mean of ``v`` summed in float64, the same bits for float32 and float64 arrays
    (a float32 array a chunk at a time where every partial sum is exact)."""
    v = np.asarray(v)
    if not v.size:
        return 0.0
    if v.dtype == np.float32 and v.size > chunk:
        total = size = 0.0
        tiny = np.inf
        for lo in range(0, v.size, chunk):
            c = np.abs(v[lo:lo + chunk], dtype=np.float64)
            size += float(np.sum(c))
            nz = c[c > 0]
            tiny = min(tiny, float(nz.min()) if nz.size else np.inf)
            total += float(np.sum(v[lo:lo + chunk], dtype=np.float64))
        # float32 values are multiples of 2^(e - 23) for the smallest's exponent e: every
        # partial sum below 2^(53 + e - 23) is exact
        if size == 0.0 or size * (1 + 2**-20) < 2.0 ** (30 + np.frexp(tiny)[1] - 1):
            return total / v.size
    return float(np.asarray(v, np.float64).mean())


def wide_digest(*arrays, chunk: int = 1 << 20) -> str:
    """``array_digest`` of the arrays widened to 64 bits, without wide copies."""
    import hashlib

    h = hashlib.sha256()
    hash_wide(h, arrays, chunk=chunk)
    return h.hexdigest()


def placeholder(n: int, dtype=np.float64) -> np.ndarray:
    """``n`` zeros that take no memory (a read-only zero-stride view)."""
    return np.broadcast_to(np.zeros(1, dtype)[0], (int(n),))


def _placeholder(v) -> bool:
    return isinstance(v, np.ndarray) and v.ndim == 1 and v.strides == (0,)


def as_ratings(data, *, names=None) -> Ratings:
    """Validate ``data`` (a file, a reader's result, a sparse matrix or COO triplets) as
    :class:`Ratings`; ``names(axis, i)`` names rows and columns in errors."""
    if isinstance(data, (str, os.PathLike)):
        from daskhpc.io import read

        data = read(data, matrix=False)
    r, file_names = (data, None) if isinstance(data, Ratings) else raw_ratings(data)
    names = names or file_names
    if r is None:
        if not (isinstance(data, tuple) and len(data) in (3, 4)):
            raise InputError(f"cannot use {type(data).__name__} as ratings: give a file, a "
                             "scipy.sparse matrix or (rows, cols, vals) triplets")
        rows, cols, vals = (np.asarray(a) for a in data[:3])
        for what, ix in (("row", rows), ("column", cols)):
            if ix.size and ix.min() < 0:
                t = int(np.flatnonzero(ix < 0)[0])
                raise InputError(f"{what} index {int(ix[t])} of rating {t} (0-based) is "
                                 f"negative: row and column indices must be non-negative")
        shape = data[3] if len(data) == 4 else (
            int(rows.max()) + 1 if rows.size else 0, int(cols.max()) + 1 if cols.size else 0)
        r = Ratings(rows, cols, vals, shape, {"shape": [int(shape[0]), int(shape[1])],
                                              "nnz": int(np.size(vals))})
    _validate(r, names or (lambda axis, i: f"{('row', 'column')[axis]} {int(i)}"))
    return r


class FileNames:
    """``names(axis, i)``: how the user's file names row (0) or column ``i`` (``user alice``,
    ``row 3``: original ids, 1-based in MatrixMarket and LIBSVM)."""

    def __init__(self, maps, base: int = 0, fmt: str | None = None):
        self.maps, self.base, self.fmt = maps, int(base), fmt

    @classmethod
    def of(cls, s) -> FileNames:
        """The names of a reader's result (``SparseInput``)."""
        maps = tuple(s.index_maps) if len(s.index_maps) == 2 else (None, None)
        return cls(maps, int(s.format in ("mtx", "libsvm")), s.format)

    def ids(self, axis: int, idx) -> list:
        """The file's ids of rows (columns) ``idx``: original ids, else numbers."""
        idx = np.asarray(idx, dtype=np.int64)
        m = self.maps[axis]
        if m is not None:
            return [x.item() if hasattr(x, "item") else x for x in m[idx]]
        return [int(i) + self.base for i in idx]

    def label(self, axis: int, ident) -> str:
        words = ("user", "item") if self.fmt == "ratings" else ("row", "column")
        return f"{words[axis]} {ident}"

    def __call__(self, axis: int, i: int) -> str:
        return self.label(axis, self.ids(axis, [i])[0])


def raw_ratings(data):
    """``(unvalidated Ratings, FileNames or None)`` of a reader's result or a sparse matrix."""
    if hasattr(data, "matrix") and hasattr(data, "describe"):
        return _from_input(data), FileNames.of(data)
    if sp.issparse(data):
        coo = sp.coo_array(data)
        order = np.lexsort((coo.col, coo.row))
        return Ratings(coo.row[order], coo.col[order], coo.data[order], coo.shape,
                       {"shape": list(coo.shape), "nnz": int(coo.nnz)}), None
    return None, None


def _from_input(s) -> Ratings:
    if s.tensor is not None:
        raise InputError(f"{s.path}: SSGD needs a ratings matrix, the file holds a "
                         f"{len(s.shape)}-way tensor")
    m = s.meta
    if "rows" in m and "cols" in m and "vals" in m:  # ratings reader: file order
        return Ratings(m["rows"], m["cols"], m["vals"], s.shape, s.describe())
    coo = sp.coo_array(s.matrix)
    return Ratings(coo.row, coo.col, coo.data, s.shape, s.describe())


def _validate(r: Ratings, names) -> None:
    where = r.source.get("path", "input")
    if r.nnz == 0:
        raise InputError(f"{where}: no ratings")
    if r.rows.shape != r.vals.shape or r.cols.shape != r.vals.shape:
        raise InputError(f"{where}: rows, cols and vals must have one entry per rating")
    N, M = r.shape
    for what, ix, n in (("row", r.rows, N), ("column", r.cols, M)):
        out = np.flatnonzero(ix >= n)
        if out.size:
            t = int(out[0])
            raise InputError(f"{where}: {what} index {int(ix[t])} of rating {t} (0-based) "
                             f"lies outside the {N} x {M} shape ({out.size} such ratings)")
    bad = np.flatnonzero(~np.isfinite(r.vals))
    if bad.size:
        t = int(bad[0])
        raise InputError(f"{where}: rating {r.vals[t]} at ({names(0, r.rows[t])}, "
                         f"{names(1, r.cols[t])}) is not a finite number ({bad.size} such "
                         f"ratings)")
    for axis, (what, idx, n) in enumerate((("row", r.rows, N), ("column", r.cols, M))):
        empty = np.flatnonzero(counts(idx, n) == 0)
        if empty.size:
            raise InputError(
                f"{where}: {names(axis, empty[0])} has no ratings ({empty.size} of {n} "
                f"{what}s are empty); SSGD needs at least one rating per user and item: "
                f"drop the empty {what}s first")


def check_parts(nparts: int, r: Ratings) -> int:
    """Refuse a part count SSGD cannot use (K < 1, or more parts than users)."""
    dropped = (r.source.get("dropped_empty") or {}).get("rows", 0)
    why = (f" once its {dropped} empty row{'s' if dropped != 1 else ''} "
           f"{'are' if dropped != 1 else 'is'} dropped") if dropped else ""
    where = f" of {r.source['path']}" if "path" in r.source else ""
    return kit_check_parts(nparts, r.shape[0], f"rows (users){where}{why}")


def split(r: Ratings, test_fraction: float, seed: int = 0) -> tuple[Ratings, Ratings]:
    """Hold out a seeded random ``test_fraction`` of the ratings, both halves in input order.

    Users or items only in the test set are predicted from their initial factors."""
    is_test = holdout_mask(r.nnz, test_fraction, seed)
    if is_test is None:
        return r, r.subset(np.zeros(0, np.int64))
    key = (float(test_fraction), int(seed))
    if r.order not in ("file", key) or _placeholder(r.vals):
        # by mask: positions would be 8 bytes a rating on top
        return r.subset(~is_test), r.subset(is_test)
    # ratings read here: reordered in place, training ratings first (a copy of one
    # column's at a time), and train and test are views: no copy of the ratings
    n = r.nnz - int(np.count_nonzero(is_test))
    if r.order == "file":
        for a in (r.rows, r.cols, r.vals):
            test, at = a[is_test], 0
            # a chunk's training ratings moved down at a time (never past the chunk)
            for lo in range(0, a.size, 1 << 20):
                kept = a[lo:lo + (1 << 20)][~is_test[lo:lo + (1 << 20)]]
                a[at:at + kept.size] = kept
                at += kept.size
            a[n:] = test
        r.order = key
    return tuple(Ratings(r.rows[sl], r.cols[sl], r.vals[sl], r.shape, dict(r.source))
                 for sl in (slice(0, n), slice(n, None)))


def holdout_mask(nnz: int, test_fraction: float, seed: int = 0) -> np.ndarray | None:
    """Which of ``nnz`` ratings :func:`split` holds out (None: none), by position."""
    if not 0.0 <= test_fraction < 1.0:
        raise InputError(f"--test-fraction must lie in [0, 1), got {test_fraction}")
    n_test = int(round(test_fraction * nnz))
    if n_test == 0:
        return None
    if n_test >= nnz:
        raise InputError(f"--test-fraction {test_fraction} leaves no training ratings")
    rng = np.random.default_rng([int(seed), 0x55D])
    if 10000 < nnz < 2**31 and n_test > nnz // 50:
        from ._kernels import tail_shuffle

        # rng.choice(nnz, n_test, replace=False)'s own draws on a 32-bit arange (its
        # int64 one is 8 bytes a rating): the last n_test items after the shuffle
        data, i, left = np.arange(nnz, dtype=np.int32), nnz - 1, np.zeros(0, np.uint32)
        while i >= max(nnz - n_test, 1):
            draws = np.concatenate([left, rng.bit_generator.random_raw(1 << 16).view(np.uint32)])
            used, i = tail_shuffle(data, max(nnz - n_test, 1), draws, i)
            left = draws[used:]
        chosen, data = data[nnz - n_test:].copy(), None
    else:
        chosen = rng.choice(nnz, size=n_test, replace=False)
    is_test = np.zeros(nnz, dtype=bool)
    is_test[chosen] = True
    return is_test
