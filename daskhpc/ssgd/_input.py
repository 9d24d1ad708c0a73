"""The input of a run, read and validated once: the ratings without empty rows and
columns, and how the user's file names each row and column (the CLI's check, ``prepare``
and ``fit``'s resume path all take it through :func:`load`)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from daskhpc._narrow import counts, index_dtype
from daskhpc.errors import InputError

from ._data import FileNames, Ratings, as_ratings, raw_ratings


@dataclass(eq=False)
class Input:
    """Validated ratings and the names of their rows and columns: ``index_maps`` (original
    ids), ``kept`` (their indices in the matrix as read), ``values`` (a collection's)."""

    ratings: Ratings
    index_maps: tuple = (None, None)
    kept: tuple = (None, None)
    file_shape: tuple = (0, 0)
    base: int = 0
    format: str | None = None
    #: a Dask collection's ratings on the workers (``_collect.Values``); None: in ``ratings``
    values: object = None

    @property
    def path(self) -> str:
        return self.ratings.source.get("path", "input")


def load(data, *, format: str | None = None, keep_empty: bool = False) -> Input:
    """Read (a path) and validate the ratings; drop (or, ``keep_empty``, refuse) empty rows."""
    if isinstance(data, Input):
        return data
    if isinstance(data, (str, os.PathLike)):
        from daskhpc.io import read

        # the triplets only, without the CSR matrix SSGD does not use: 12 bytes a rating
        inp = _loaded(read(data, format=format, matrix=False), keep_empty)
        inp.ratings.order = "file"         # its own arrays: split reorders them in place
        return inp
    return _loaded(data, keep_empty)


def _loaded(data, keep_empty: bool) -> Input:
    raw, names = raw_ratings(data)
    if raw is None:                          # triplets or Ratings: validated as given
        r = as_ratings(data)
        return Input(r, file_shape=r.shape)
    names = names or FileNames((None, None))
    maps, base, fmt = names.maps, names.base, names.fmt
    keep = [counts(idx, n) > 0 for idx, n in
            ((raw.rows, raw.shape[0]), (raw.cols, raw.shape[1]))]
    empty = [np.flatnonzero(~k) for k in keep]
    if not any(e.size for e in empty) or raw.nnz == 0:
        return Input(as_ratings(raw, names=names), maps, (None, None), raw.shape, base, fmt)
    where = raw.source.get("path", "input")
    first = [names.ids(axis, e[:5]) for axis, e in enumerate(empty)]
    if keep_empty:
        axis = 0 if empty[0].size else 1
        what = ("row", "user") if axis == 0 else ("column", "item")
        raise InputError(f"{where}: {names.label(axis, first[axis][0])} has no ratings "
                         f"({empty[axis].size} of {raw.shape[axis]} {what[0]}s are empty); "
                         f"SSGD needs a rating per {what[1]}: run without --keep-empty to "
                         f"drop them")
    new = [(np.cumsum(k) - 1).astype(index_dtype(int(k.sum()))) for k in keep]
    kept = tuple(np.flatnonzero(k) for k in keep)
    out_maps = tuple(k + base if m is None else m[k] for m, k in zip(maps, kept))
    shape = (int(kept[0].size), int(kept[1].size))
    source = dict(raw.source)
    source.update(shape=list(shape), nnz=raw.nnz, shape_in_file=list(raw.shape))
    dropped = {"rows": int(empty[0].size), "columns": int(empty[1].size),
               "first_rows": first[0], "first_columns": first[1]}
    source["dropped_empty"] = dropped
    parts = [f"{n} empty {w}{'s' if n != 1 else ''} ({', '.join(map(str, f))}"
             f"{', ...' if n > 5 else ''})"
             for n, w, f in ((dropped["rows"], "row", first[0]),
                             (dropped["columns"], "column", first[1])) if n]
    source.setdefault("notes", []).append(
        f"{where}: dropped {' and '.join(parts)} of the {raw.shape[0]} x {raw.shape[1]} "
        f"matrix: SSGD needs a rating per row and column (--keep-empty refuses instead)")
    r = Ratings(new[0][raw.rows], new[1][raw.cols], raw.vals, shape, source)
    return Input(as_ratings(r, names=FileNames(out_maps, base, fmt)), out_maps, kept,
                 raw.shape, base, fmt)
