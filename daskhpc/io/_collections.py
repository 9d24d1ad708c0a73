"""Dask collections as input: validated, their nonzeros persisted as pieces on the workers
and routed from there to their parts' workers (:func:`route`); no value reaches the client."""

from __future__ import annotations

import operator
import sys
import uuid

import numpy as np

from daskhpc._narrow import index_dtype
from daskhpc.errors import InputError

#: What to install for DataFrame input (``pip install "daskhpc[dataframe]"``).
DATAFRAME_EXTRA = 'dask.dataframe needs pandas and pyarrow: pip install "daskhpc[dataframe]"'


def is_collection(x) -> bool:
    """True for a Dask DataFrame or Array (checked by type, importing nothing)."""
    mod = type(x).__module__ or ""
    return mod.split(".", 1)[0] == "dask" and hasattr(x, "__dask_graph__") and \
        _kind(x) is not None


def _kind(x) -> str | None:
    mod = type(x).__module__ or ""
    if mod.startswith("dask.array") and hasattr(x, "chunks"):
        return "array"
    if mod.startswith("dask.dataframe") and hasattr(x, "columns") and hasattr(x, "dtypes"):
        return "frame"
    return None


def dataframe_module():
    """``dask.dataframe``, or an InputError naming the extra to install."""
    try:
        import dask.dataframe as dd
    except ImportError as e:
        raise InputError(f"{DATAFRAME_EXTRA} ({e})") from None
    return dd


class _Pieces:
    """What the workers hold of a collection: ``pieces`` (Futures), ``offsets`` (where
    each piece's items start), ``remake`` and ``name``."""

    def release(self) -> None:
        """Let the workers free the pieces."""
        for f in self.pieces:
            f.release()
        self.pieces = []

    def reread(self, client) -> None:
        """Compute the pieces again from the collection, after :meth:`release` (a lost
        worker's parts routed again); RuntimeError if the counts per piece changed."""
        self.release()
        self.pieces = reread_pieces(client, self.remake, np.diff(self.offsets), self.name)


class Nonzeros(_Pieces):
    """A validated collection of nonzeros whose values stay on the workers.

    Attributes
    ----------
    name : str
        What messages call it (``A``, ``B``, ``tensor``).
    shape : tuple of int
    pins : int32 or int64 array (order, nnz)
        The ids of every nonzero, in collection order (the client's copy).
    offsets : int64 array (npieces + 1,)
        Where each piece's nonzeros start in that order.
    pieces : list of Future
        Per piece ``(ids (order, n) int64, values (n,) float64)`` on a worker.
    columns : list of str
        The columns read (ids, then the value), or ``["chunks"]`` for an array.
    token : str
        Dask's token of the collection (what identifies it in a checkpoint).
    """

    def __init__(self, name, shape, pins, offsets, pieces, columns, token, nonzero_values,
                 remake=None):
        self.name, self.shape, self.pins, self.offsets = name, tuple(shape), pins, offsets
        self.pieces, self.columns, self.token = pieces, columns, token
        self.nonzero_values = int(nonzero_values)
        self.remake = remake

    @property
    def order(self) -> int:
        return len(self.shape)

    @property
    def nnz(self) -> int:
        return int(self.offsets[-1])

    def gather_values(self, client) -> np.ndarray:
        """All values in collection order on the client (for ``check_serial`` only)."""
        gathered(self.name, self.nnz, 8 * self.nnz)
        parts = client.gather([client.submit(_values_of, p, pure=False) for p in self.pieces])
        return np.concatenate(parts) if parts else np.zeros(0)

    def __repr__(self) -> str:
        return (f"Nonzeros({self.name}: {' x '.join(map(str, self.shape))}, {self.nnz} "
                f"nonzeros in {len(self.pieces)} pieces)")


def gathered(name: str, n: int, nbytes: int) -> None:
    """One line on stderr: a collection's values go to the client (``check_serial``)."""
    print(f"check_serial: {name}: {n:,} values ({nbytes / 2**20:.1f} MiB) of the Dask "
          "collection gathered to the client for the serial reference", file=sys.stderr)


def read_nonzeros(x, client, *, order: int | None = None, columns=None, shape=None,
                  name: str = "input", min_order: int = 2) -> Nonzeros:
    """Check ``x`` and persist its nonzeros on ``client``'s workers, as pieces.

    A DataFrame holds one nonzero a row (0-based ids, then the value: ``row, col[, more
    modes], value``, or as ``columns=`` names them); an Array's chunks are scipy.sparse,
    ``sparse.COO`` or numpy. Only the ids (``pins``) and a summary reach the client; a
    bad collection raises a one-line InputError naming the column or chunk.

    Parameters
    ----------
    x : dask.dataframe.DataFrame or dask.array.Array
    client : distributed.Client
    order : int, optional
        Modes expected (2 for a matrix); default: from the array or the columns
        (a frame's columns less the value; at least ``min_order``).
    columns : list of str, optional
        The frame's id columns and then its value column; default every column in order.
    shape : tuple of int, optional
        Default: a frame's largest id + 1 per mode; an array's shape.
    name : str
        What the messages call the input.
    """
    kind = _kind(x)
    if kind is None:
        raise InputError(f"{name}: {type(x).__name__} is not a Dask DataFrame or Array")
    from dask import delayed
    from dask.base import tokenize

    if kind == "frame":
        dataframe_module()
        cols = _frame_columns(x, columns, order, name, min_order)
        order = len(cols) - 1
        pieces = [delayed(_frame_piece, pure=True)(d, cols) for d in x.to_delayed()]
        known = None
    else:
        if columns is not None:
            raise InputError(f"{name}: columns= is for a DataFrame, not a Dask Array")
        known = _array_check(x, order, name, min_order)
        order, cols = x.ndim, ["chunks"]
        pieces = []
        starts = [np.concatenate([[0], np.cumsum(c)[:-1]]) for c in x.chunks]
        blocks = x.to_delayed()
        for idx in np.ndindex(*blocks.shape):
            off = tuple(int(starts[d][idx[d]]) for d in range(x.ndim))
            pieces.append(delayed(_block_piece, pure=True)(blocks[idx], off))
    if shape is not None:
        try:
            shape = tuple(int(s) for s in shape)
        except (TypeError, ValueError):
            raise InputError(f"{name}: shape {shape!r} is not a sequence of integers") from None
        if len(shape) != order:
            raise InputError(f"{name}: shape {shape} has {len(shape)} modes, the input {order}")
    futures = client.compute(pieces)
    stats = client.gather([client.submit(_summary, f, pure=False) for f in futures])
    _checked_count(stats, cols, order, name, shape or known, futures, "nonzeros")
    hi = [max(s["max"][m] for s in stats if s["n"]) for m in range(order)]
    if shape is None:
        shape = known or tuple(h + 1 for h in hi)
    return _with_pins(client, futures, stats, name, shape, cols, tokenize(x),
                      lambda c: c.compute(pieces))


def _with_pins(client, futures, stats, name, shape, cols, token, remake,
               gather: bool = True) -> Nonzeros:
    """The Nonzeros of checked pieces; ``gather=False`` leaves the pins on the workers."""
    pins = None
    offsets = np.concatenate([[0], np.cumsum([s["n"] for s in stats])]).astype(np.int64)
    if gather:
        # a piece at a time into the result: not the pieces and their concatenation at once
        itype = index_dtype(max(shape))
        pins = np.empty((len(shape), int(offsets[-1])), itype)
        got = [client.submit(_pins, f, itype, pure=False) for f in futures]
        for k, f in enumerate(got):
            pins[:, offsets[k]:offsets[k + 1]] = f.result()
            f.release()
        del got
    return Nonzeros(name, shape, pins, offsets, futures, cols, token,
                    sum(s["nonzero"] for s in stats), remake=remake)


def rereading(client, sources, build):
    """``rebuild(parts, placement)`` for a part store (a lost worker's parts made again):
    the collections ``sources`` (:class:`Nonzeros`, :class:`Rows`) read again,
    ``build(parts, placement)`` (the parts' data on their workers), the collections
    released (the parts' joins keep what they read)."""
    def rebuild(parts, placement):
        for nz in sources:
            nz.reread(client)
        try:
            return build(parts, placement)
        finally:
            for nz in sources:
                nz.release()
    return rebuild


def reread_pieces(client, remake, counts, name: str) -> list:
    """``remake(client)``'s pieces, checked to hold ``counts`` items each (as first read)."""
    if remake is None:
        raise RuntimeError(f"{name}: the collection cannot be read again")
    futures = list(remake(client))
    got = client.gather([client.submit(_count, f, pure=False) for f in futures])
    if [int(n) for n in got] != [int(n) for n in counts]:
        for f in futures:
            f.release()
        raise RuntimeError(f"{name}: the collection changed since it was read (items per "
                           f"partition {[int(n) for n in counts]}, now {got}); run again")
    return futures


def _named_columns(x, columns, name) -> list:
    """``columns`` (default: all of the DataFrame's), each checked to be one of them."""
    names = list(x.columns)
    cols = names if columns is None else list(columns)
    for c in cols:
        if c not in names:
            raise InputError(f"{name}: column {c!r} is not in the DataFrame (columns: "
                             f"{', '.join(map(str, names))})")
    return cols


def _frame_columns(x, columns, order, name, min_order) -> list:
    cols = _named_columns(x, columns, name)
    want = f"{order} id columns and a value" if order else \
        f"at least {min_order} id columns and a value"
    if len(cols) < min_order + 1 or (order is not None and len(cols) != order + 1):
        raise InputError(f"{name}: {len(cols)} columns ({', '.join(map(str, cols))}); need "
                         f"{want} (name them with columns=[...])")
    _column_kinds(x, cols[:-1], cols[-1], name, "ids must be integers (0-based)", "value")
    return cols


def _column_kinds(x, ids, value, name, ids_rule: str, what: str, strings=False) -> None:
    """A one-line InputError unless the ``ids`` columns hold integers (or ``strings``) and
    the ``value`` column (None: none) holds numbers."""
    for c in ids:
        dt = x.dtypes[c]
        if getattr(dt, "kind", "O") not in ("iuOU" if strings else "iu") and \
                not (strings and "str" in str(dt)):
            raise InputError(f"{name}: column {c!r} is {dt}; {ids_rule}")
    if value is not None and getattr(x.dtypes[value], "kind", "O") not in "biuf":
        raise InputError(f"{name}: {what} column {value!r} is {x.dtypes[value]}; {what}s "
                         "must be numbers")


def _checked_count(stats, cols, order, name, shape, pieces, what, **rules) -> int:
    """The entries the stats count; a one-line InputError (pieces released) if bad or empty."""
    problem = _problem(stats, cols, order, name, shape, **rules)
    if problem:
        for f in pieces:
            f.release()
        raise InputError(problem)
    nnz = sum(s["n"] for s in stats)
    if nnz == 0:
        raise InputError(f"{name}: the collection holds no {what}")
    return nnz


def check_array(x, name: str, chunks=("numpy", "scipy.sparse"),
                use: str = "numpy or scipy.sparse", kinds: str = "biuf",
                values: str = "numbers") -> None:
    """Raise a one-line InputError unless the Dask Array's chunk sizes are known, its dtype
    numeric and its chunks from the ``chunks`` modules.

    Parameters
    ----------
    x : dask.array.Array
    name : str
        What the message calls ``x``.
    chunks : tuple of str
        Modules the chunk type may come from; ``use`` names them in the message.
    kinds : str
        The dtype kinds allowed; ``values`` names them in the message.

    Examples
    --------
    >>> import dask.array as da
    >>> from daskhpc.io import check_array
    >>> check_array(da.ones((4, 3), chunks=2), "X")
    """
    if any(np.isnan(c) for cs in x.chunks for c in cs):
        raise InputError(f"{name}: the Dask Array's chunk sizes are unknown (nan); call "
                         ".compute_chunk_sizes() first")
    if getattr(x.dtype, "kind", "O") not in kinds:
        raise InputError(f"{name}: the Dask Array's dtype is {x.dtype}; values must be "
                         f"{values}")
    meta = type(x._meta)
    if not (meta.__module__ or "").startswith(chunks):
        raise InputError(f"{name}: chunks of type {meta.__name__}; use {use} chunks")


def _array_check(x, order, name, min_order) -> tuple:
    if order is not None and x.ndim != order:
        raise InputError(f"{name}: a {x.ndim}-D Dask Array, need {order}-D")
    if x.ndim < min_order:
        raise InputError(f"{name}: a {x.ndim}-D Dask Array, need at least {min_order}-D")
    check_array(x, name, ("scipy.sparse", "sparse", "numpy"), "scipy.sparse, sparse.COO or numpy")
    return tuple(int(s) for s in x.shape)


def _problem(stats, cols, order, name, shape, negative: str = "ids are 0-based",
             value: str = "value") -> str | None:
    """The first problem of the summaries as one line, or None."""
    label = (lambda m: f"column {cols[m]!r}") if cols != ["chunks"] else \
        (lambda m: f"mode {m + 1}")
    where = "partition" if cols != ["chunks"] else "chunk"
    for k, s in enumerate(stats):
        if not s["n"]:
            continue
        for m in range(order):
            if s["missing"][m]:
                return f"{name}: {label(m)} has missing ids in {where} {k}"
            if s["min"][m] < 0:
                return (f"{name}: {label(m)} holds a negative id ({s['min'][m]}) in {where} "
                        f"{k}; {negative}")
            if shape is not None and s["max"][m] >= shape[m]:
                return (f"{name}: {label(m)} holds id {s['max'][m]} in {where} {k}, outside "
                        f"the shape {' x '.join(map(str, shape))}")
        if s["bad"]:
            what = f"the {value} column {cols[-1]!r}" if cols != ["chunks"] else "values"
            return (f"{name}: {what} holds NaN or infinite values in {where} {k} "
                    f"({s['bad']} of them)")
    return None


def _frame_piece(df, cols) -> tuple:
    ids = np.empty((len(cols) - 1, len(df)), np.int64)
    missing = []
    for m, c in enumerate(cols[:-1]):
        col = df[c]
        missing.append(bool(col.isna().any()))
        ids[m] = (col.fillna(-1) if missing[-1] else col).to_numpy(dtype=np.int64)
    return ids, df[cols[-1]].to_numpy(dtype=np.float64, na_value=np.nan), missing


def _block_piece(block, offset) -> tuple:
    if hasattr(block, "tocoo") and hasattr(block, "nnz") and not hasattr(block, "coords"):
        c = block.tocoo()                                      # scipy.sparse
        ids = np.stack([c.row.astype(np.int64), c.col.astype(np.int64)])
        vals = np.asarray(c.data, np.float64)
    elif hasattr(block, "coords") and hasattr(block, "data"):  # sparse.COO
        ids = np.asarray(block.coords, np.int64).reshape(len(offset), -1).copy()
        vals = np.asarray(block.data, np.float64)
    else:
        a = np.asarray(block)
        nz = np.nonzero(a)
        ids = np.array(nz, np.int64).reshape(len(offset), -1)
        vals = np.asarray(a[nz], np.float64)
    ids += np.asarray(offset, np.int64)[:, None]
    return ids, vals, [False] * len(offset)


def _summary(piece) -> dict:
    ids, vals, missing = piece
    n = int(vals.size)
    out = {"n": n, "missing": list(missing), "min": [0] * ids.shape[0],
           "max": [0] * ids.shape[0], "bad": 0, "nonzero": 0}
    if n:
        out["min"] = [int(x) for x in ids.min(axis=1)]
        out["max"] = [int(x) for x in ids.max(axis=1)]
        out["bad"] = int(n - np.count_nonzero(np.isfinite(vals)))
        out["nonzero"] = int(np.count_nonzero(vals))
    return out


def _pins(piece, itype):
    return piece[0].astype(itype)


def _values_of(piece):
    return piece[1]


def _count(piece) -> int:
    return int(piece[1].shape[0])


def _select(piece, take, bounds, with_ids: bool):
    """The piece's nonzeros for each destination: ``take[bounds[d]:bounds[d + 1]]``."""
    ids, vals, _ = piece
    cuts = (take[bounds[d]:bounds[d + 1]] for d in range(len(bounds) - 1))
    return [(ids[:, t], vals[t]) if with_ids else vals[t] for t in cuts]


def labels_route(labels: np.ndarray, offsets: np.ndarray, nparts: int) -> list:
    """Per piece ``(take, bounds)`` for one destination per nonzero: ``labels`` (in
    collection order) name each nonzero's part; inside a part the collection order stays.

    >>> [(t.tolist(), b.tolist()) for t, b in labels_route(np.array([1, 0, 1, 0]),
    ...                                                    np.array([0, 3, 4]), 2)]
    [([1, 0, 2], [0, 1, 3]), ([0], [0, 1, 1])]
    """
    out = []
    for lo, hi in zip(offsets[:-1], offsets[1:]):
        lab = np.asarray(labels[lo:hi])
        take = np.argsort(lab, kind="stable")
        bounds = np.searchsorted(lab[take], np.arange(nparts + 1)).astype(np.int64)
        out.append((take.astype(index_dtype(hi - lo)), bounds))   # int32: half the bytes
    return out


def route(client, nz: Nonzeros, takes: list, where: dict, join, args: dict | None = None,
          *, with_ids: bool = False, name: str = "route", parts=None) -> dict:
    """Send every piece's nonzeros to their parts' workers and build each part there.

    Parameters
    ----------
    client : distributed.Client
    nz : Nonzeros
    takes : list of (take, bounds)
        Per piece, the positions for part ``d``: ``take[bounds[d]:bounds[d + 1]]``
        (:func:`labels_route`).
    where : dict
        ``part -> worker address``.
    join : callable
        ``join(arg, *segments)`` on the part's worker, a segment (values, or ``(ids,
        values)`` with ``with_ids``) per piece that has nonzeros for it, in piece order.
    args : dict, optional
        ``part -> arg`` (small, or a Future already on the part's worker).
    parts : iterable of int, optional
        Build only these parts (the others' worker lost none: a recovery); default all.

    Returns
    -------
    dict
        ``part -> Future`` of ``join``'s result, on the part's worker.
    """
    from distributed import Future

    token = uuid.uuid4().hex[:8]
    who = client.who_has(nz.pieces)
    nparts = len(takes[0][1]) - 1 if takes else 0
    wanted = list(range(nparts)) if parts is None else sorted(int(d) for d in parts)
    selects, per_part = [], {d: [] for d in wanted}
    for k, (piece, (take, bounds)) in enumerate(zip(nz.pieces, takes)):
        ds = [d for d in wanted if bounds[d + 1] > bounds[d]]
        if not ds:
            continue
        holders = list(who.get(piece.key) or [])
        opts = {"workers": holders[:1], "allow_other_workers": True} if holders else {}
        tk = take if isinstance(take, Future) else client.scatter(
            np.ascontiguousarray(take), hash=False,
            **({"workers": holders[:1]} if holders else {}))
        sel = client.submit(_select, piece, tk, np.asarray(bounds), with_ids,
                            key=f"daskhpc-{name}-select-{token}-{k}", **opts)
        selects += [sel, tk]
        items = client.map(operator.getitem, [sel] * len(ds), ds, pure=False,
                           key=[f"daskhpc-{name}-item-{token}-{k}-{d}" for d in ds], **opts)
        for d, item in zip(ds, items):
            per_part[d].append(item)
    out = {}
    for d in wanted:
        out[d] = client.submit(join, (args or {}).get(d), *per_part[d],
                               key=f"daskhpc-{name}-part-{token}-{d}",
                               workers=[where[d]], allow_other_workers=False)
        selects += per_part[d]
    for f in selects:
        f.release()
    return out
