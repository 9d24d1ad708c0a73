"""Ratings with their original ids (ssgd) from a Dask DataFrame or from files the workers
read (Parquet, CSV), ids mapped as the ratings-file reader maps them."""

from __future__ import annotations

import numpy as np

from daskhpc._narrow import index_dtype, narrow_values
from daskhpc.errors import InputError

from ._collections import (_checked_count, _column_kinds, _kind, _named_columns, _summary,
                           _with_pins, dataframe_module)
from ._common import first_repeat
from ._paths import expand_patterns


def read_ratings_frame(x, client, *, columns=None, name: str = "ratings"):
    """Check a DataFrame of ratings with ORIGINAL ids and persist it as dense nonzeros.

    The ids are mapped as :func:`daskhpc.io.read_ratings` maps a file's (sorted unique ids
    become ``0..n-1``); only the distinct ids reach the client (Dask's ``unique``).

    Parameters
    ----------
    x : dask.dataframe.DataFrame
        One rating a row: user, item, rating.
    client : distributed.Client
    columns : list of 3 str, optional
        The user, item and rating columns (default: the first three).
    name : str
        What the messages call the input.

    Returns
    -------
    (Nonzeros, (user_map, item_map))
        Nonzeros with ids ``0..n-1`` that stay on the workers (``pins`` None: the caller
        finds a repeated pair there, :func:`repeated_pair`); a map is None, or the
        original id (int64 or str) of each row / column.
    """
    if _kind(x) != "frame":
        raise InputError(f"{name}: {type(x).__name__} is not a Dask DataFrame of ratings "
                         "(user, item, rating)")
    dataframe_module()
    from dask import delayed
    from dask.base import tokenize

    cols = _rating_columns(x, columns, name)
    token = tokenize(x, cols)
    frame = client.persist(x[cols])
    try:
        # a tree reduction (split_out=1: per partition, then merged), not a shuffle:
        # only distinct ids move, and only they reach the client
        uniq = client.gather(client.compute([frame[c].dropna().unique(split_out=1)
                                             for c in cols[:2]]))
        maps = [_id_map(np.asarray(u), x.dtypes[c], c, name) for u, c in zip(uniq, cols)]
        shape = tuple(int(m.size) for m in maps)
        sent = [client.scatter(m, broadcast=True, hash=False) for m in maps]
        pieces = client.compute([delayed(_rating_piece, pure=True)(d, cols, *sent)
                                 for d in frame.to_delayed()])
        stats = client.gather([client.submit(_summary, f, pure=False) for f in pieces])
    except InputError:
        raise
    except Exception as e:   # a file the workers could not read or parse
        raise InputError(f"{name}: reading the ratings failed: "
                         f"{_first_line(e)}") from None
    finally:
        del frame
    _checked_count(stats, cols, 2, name, shape, pieces, "ratings")
    def remake(c):
        again = [c.scatter(m, broadcast=True, hash=False) for m in maps]
        return c.compute([delayed(_rating_piece, pure=True)(d, cols, *again)
                          for d in x[cols].to_delayed()])

    nz = _with_pins(client, pieces, stats, name, shape, cols, token, remake, gather=False)
    out_maps = tuple(None if (m.dtype.kind in "iu" and m[0] == 0 and m[-1] == m.size - 1)
                     else m for m in maps)
    return nz, out_maps


def ratings_files(paths, *, name: str | None = None):
    """A Dask DataFrame (user, item, rating) of Parquet or CSV files, read by the workers.

    ``paths``: Parquet files or directories of them (``*.parquet``, ``*.pq``, or a
    directory; a pattern such as ``"dir/*.parquet"`` names the files it matches), or CSV
    files (comma separated, with or without a header; a fourth
    column, the timestamp, is ignored). What the client reads is metadata only: each
    Parquet file's schema (its footer) and each CSV file's first lines, so that an
    unreadable file, or one whose columns are not ids and a numeric rating, is named in
    a one-line InputError before the cluster does any work.
    """
    import os

    dd = dataframe_module()
    paths = [os.fspath(p) for p in (paths if isinstance(paths, (list, tuple)) else [paths])]
    paths = expand_patterns(paths)          # a quoted 'dir/*.parquet' names its files
    if not paths:
        raise InputError("no ratings files given")
    files = []
    for p in paths:
        if os.path.isdir(p):
            inner = sorted(os.path.join(p, f) for f in os.listdir(p)
                           if f.endswith((".parquet", ".pq", ".csv")) and not f.startswith("."))
            if not inner:
                raise InputError(f"{p}: a directory without .parquet or .csv files")
            files += inner
        elif not os.path.exists(p):
            raise InputError(f"{p}: no such file")
        else:
            files.append(p)
    parquet = [f.endswith((".parquet", ".pq")) for f in files]
    if any(parquet) and not all(parquet):
        raise InputError(f"{files[parquet.index(False)]}: mix of Parquet and CSV files; "
                         "give one kind")
    if all(parquet):
        names = _parquet_columns(files)
        return dd.read_parquet(files, columns=names[:3])
    header, width = _csv_layout(files)
    names = ["user", "item", "rating", "timestamp"][:width]
    return dd.read_csv(files, header=0 if header else None, names=names, usecols=[0, 1, 2],
                       blocksize="64MB")


def _parquet_columns(files) -> list:
    import pyarrow as pa
    import pyarrow.parquet as pq

    first = None
    for f in files:
        try:
            schema = pq.read_schema(f)
        except Exception as e:
            raise InputError(f"{f}: not a readable Parquet file ({_first_line(e)})") from None
        if len(schema.names) < 3:
            raise InputError(f"{f}: {len(schema.names)} columns ({', '.join(schema.names)}); "
                             "need user, item, rating")
        t = schema.types
        for k, what in ((0, "user id"), (1, "item id")):
            if not (pa.types.is_integer(t[k]) or pa.types.is_string(t[k]) or
                    pa.types.is_large_string(t[k])):
                raise InputError(f"{f}: column {schema.names[k]!r} ({what}) is {t[k]}; ids "
                                 "must be integers or strings")
        if not (pa.types.is_integer(t[2]) or pa.types.is_floating(t[2])):
            raise InputError(f"{f}: column {schema.names[2]!r} (rating) is {t[2]}; ratings "
                             "must be numbers")
        if first is None:
            first = (schema.names[:3], t[:3])
        elif (schema.names[:3], t[:3]) != first:
            raise InputError(f"{f}: columns {schema.names[:3]} of types {[str(x) for x in t[:3]]}"
                             f" differ from {files[0]}'s {first[0]} "
                             f"{[str(x) for x in first[1]]}")
    return first[0]


def _csv_layout(files) -> tuple:
    """``(header, width)`` of comma-separated files, from each file's first lines."""
    layout = None
    for f in files:
        try:
            with open(f, "rb") as fh:
                head = fh.read(1 << 16)
        except OSError as e:
            raise InputError(f"{f}: cannot read ({e.strerror})") from None
        lines = [ln for ln in head.split(b"\n")[:-1] if ln.strip() and ln[:1] not in b"#%"]
        if not lines:
            raise InputError(f"{f}: no ratings in the first 64 kB (an empty or binary file?)")
        tok = lines[0].split(b",")
        if len(tok) not in (3, 4):
            raise InputError(f"{f}:1: expected 3 or 4 comma-separated columns, found "
                             f"{len(tok)}")
        header = not _number(tok[2])
        rows = lines[1:] if header else lines
        for k, ln in enumerate(rows[:50]):
            t = ln.split(b",")
            line = k + 1 + int(header)
            if len(t) not in (3, 4):
                raise InputError(f"{f}:{line}: expected 3 or 4 comma-separated columns, "
                                 f"found {len(t)}")
            if not _number(t[2]):
                raise InputError(f"{f}:{line}: rating {t[2].decode(errors='replace')!r} is "
                                 "not a number")
            for c, what in ((0, "user id"), (1, "item id")):
                if b"." in t[c] and _number(t[c]):
                    raise InputError(f"{f}:{line}: {what} {t[c].decode()!r} is not an "
                                     "integer")
        this = (header, len(tok))
        if layout is None:
            layout = this
        elif this != layout:
            raise InputError(f"{f}: {'a header' if header else 'no header'} and {len(tok)} "
                             f"columns, unlike {files[0]}")
    return layout


def _number(tok: bytes) -> bool:
    try:
        float(tok)
        return True
    except ValueError:
        return False


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"


def _rating_columns(x, columns, name) -> list:
    names = list(x.columns)
    if columns is None:
        if len(names) < 3:
            raise InputError(f"{name}: {len(names)} columns ({', '.join(map(str, names))}); "
                             "need user, item, rating (name them with columns=[...])")
        cols = names[:3]
    else:
        cols = list(columns)
        if len(cols) != 3:
            raise InputError(f"{name}: columns= names {len(cols)} columns; give the user, "
                             "item and rating columns")
    _named_columns(x, cols, name)
    _column_kinds(x, cols[:2], cols[2], name, "ids must be integers or strings", "rating",
                  strings=True)
    return cols


def _id_map(u: np.ndarray, dtype, col, name) -> np.ndarray:
    """Sorted unique ids: int64 for an integer column, str otherwise (the reader's)."""
    if u.size == 0:
        raise InputError(f"{name}: column {col!r} holds no ids")
    if getattr(dtype, "kind", "O") in "iu":
        return np.sort(u.astype(np.int64))
    kinds = {type(v) for v in u.tolist()}
    if not kinds <= {str}:
        bad = next(v for v in u.tolist() if not isinstance(v, str))
        raise InputError(f"{name}: column {col!r} holds {bad!r} ({type(bad).__name__}) among "
                         "its ids; ids must be all integers or all strings")
    return np.unique(u.astype(str))


def _rating_piece(df, cols, user_map, item_map) -> tuple:
    """On a worker: a partition as ``(dense ids (2, n), ratings, missing)``, ids int32 and
    ratings float32 where that keeps every value."""
    n = len(df)
    ids = np.empty((2, n), index_dtype(max(user_map.size, item_map.size)))
    missing = []
    for m, (c, idmap) in enumerate(zip(cols[:2], (user_map, item_map))):
        col = df[c]
        miss = bool(col.isna().any())
        missing.append(miss)
        if miss:
            ids[m] = -1
            continue
        v = col.to_numpy(dtype=np.int64) if idmap.dtype.kind in "iu" else \
            np.asarray(col.to_numpy(dtype=object)).astype(str)
        ids[m] = np.searchsorted(idmap, v)
    vals = df[cols[2]].to_numpy(dtype=np.float64, na_value=np.nan)
    return ids, narrow_values(vals), missing


def repeated_pair(ids, shape):
    """``(first, second, user, item)`` of the first repeated (user, item) pair among
    ``ids`` (2, n) (positions and dense ids), or None."""
    import scipy.sparse as sp

    # counted by the pattern (5 bytes a pair, 32-bit ids), not by sorted keys (16)
    n = ids.shape[1]
    if n == 0 or sp.csr_array((np.ones(n, np.int8), (ids[0], ids[1])),
                              shape=tuple(shape)).nnz == n:
        return None
    key = ids[0].astype(np.int64) * shape[1] + ids[1]
    first, second = first_repeat(key)
    return int(first), int(second), int(ids[0][second]), int(ids[1][second])


def repeat_error(name, maps, offsets, first, second, u, i) -> InputError:
    """The one line that refuses a repeated pair (collection positions, dense ids)."""
    piece = int(np.searchsorted(offsets, second, side="right") - 1)
    u, i = (k if m is None else m[k] for m, k in zip(maps, (u, i)))
    return InputError(f"{name}: repeated rating for user {u}, item {i} "
                      f"(rows {first} and {second} of the collection, partition {piece}); "
                      f"one rating a pair")
