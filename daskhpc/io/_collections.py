"""Dask collections as input: read, validate, and move nonzeros to their parts' workers.

A workflow that is given a ``dask.dataframe.DataFrame`` of nonzeros (one row each:
0-based ids, then the value; columns in the order ``row, col[, more modes], value``
unless ``columns=`` names them) or a ``dask.array.Array`` whose chunks are
``scipy.sparse`` matrices, ``sparse.COO`` arrays (or numpy arrays: their nonzeros) never
gathers the values to the client:

1. :func:`read_nonzeros` checks what it can from the metadata (integer ids, a numeric
   value, known chunk sizes), persists every partition as an (ids, values) *piece* on
   the workers, and computes, in one pass there, a small summary per piece (count,
   smallest and largest id per mode, NaN or infinite values) and the *pins* (the ids,
   int32 where they fit), the only per-nonzero data that reaches the client. A bad
   collection raises a one-line :class:`~daskhpc.errors.InputError` naming the column
   (or chunk) and the problem, before the workflow does any work.
2. The workflow partitions the pins on the client, and :func:`route` sends every
   nonzero from its piece's worker straight to its part's worker (one task per piece
   and part on the piece's worker, one task per part pinned on the part's worker), where
   the workflow's ``join`` builds the part's data. What the client sends the workers is
   integer positions (which nonzeros go to which part), never a value.

No dask at import time (the ``io`` package must not need it); ``dask.dataframe`` is
imported only for a DataFrame, and without pandas the message names the extra.

Examples
--------
>>> is_collection([1, 2]), is_collection(None)
(False, False)
"""

from __future__ import annotations

import numpy as np

from daskhpc.errors import InputError

__all__ = ["is_collection", "read_nonzeros", "Nonzeros", "route", "labels_route",
           "DATAFRAME_EXTRA"]

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


class Nonzeros:
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

    def __init__(self, name, shape, pins, offsets, pieces, columns, token, nonzero_values):
        self.name, self.shape, self.pins, self.offsets = name, tuple(shape), pins, offsets
        self.pieces, self.columns, self.token = pieces, columns, token
        self.nonzero_values = int(nonzero_values)

    @property
    def order(self) -> int:
        return len(self.shape)

    @property
    def nnz(self) -> int:
        return int(self.offsets[-1])

    def gather_values(self, client) -> np.ndarray:
        """All values in collection order on the client (only for checks such as
        ``check_serial``, which compare with a serial run on the client)."""
        parts = client.gather([client.submit(_values_of, p, pure=False) for p in self.pieces])
        return np.concatenate(parts) if parts else np.zeros(0)

    def release(self) -> None:
        """Let the workers free the pieces."""
        for f in self.pieces:
            f.release()
        self.pieces = []

    def __repr__(self) -> str:
        return (f"Nonzeros({self.name}: {' x '.join(map(str, self.shape))}, {self.nnz} "
                f"nonzeros in {len(self.pieces)} pieces)")


def read_nonzeros(x, client, *, order: int | None = None, columns=None, shape=None,
                  name: str = "input", min_order: int = 2) -> Nonzeros:
    """Check ``x`` and persist its nonzeros on ``client``'s workers (module docstring).

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

    Returns
    -------
    Nonzeros
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
    problem = _problem(stats, cols, order, name, shape or known)
    if problem:
        for f in futures:
            f.release()
        raise InputError(problem)
    nnz = sum(s["n"] for s in stats)
    if nnz == 0:
        raise InputError(f"{name}: the collection holds no nonzeros")
    hi = [max(s["max"][m] for s in stats if s["n"]) for m in range(order)]
    if shape is None:
        shape = known or tuple(h + 1 for h in hi)
    itype = np.int32 if max(shape) < 2**31 else np.int64
    pins = client.gather([client.submit(_pins, f, itype, pure=False) for f in futures])
    pins = np.concatenate(pins, axis=1) if pins else np.zeros((order, 0), itype)
    offsets = np.concatenate([[0], np.cumsum([s["n"] for s in stats])]).astype(np.int64)
    return Nonzeros(name, shape, pins, offsets, futures, cols, tokenize(x),
                    sum(s["nonzero"] for s in stats))


def _frame_columns(x, columns, order, name, min_order) -> list:
    names = list(x.columns)
    cols = names if columns is None else list(columns)
    for c in cols:
        if c not in names:
            raise InputError(f"{name}: column {c!r} is not in the DataFrame (columns: "
                             f"{', '.join(map(str, names))})")
    want = f"{order} id columns and a value" if order else \
        f"at least {min_order} id columns and a value"
    if len(cols) < min_order + 1 or (order is not None and len(cols) != order + 1):
        raise InputError(f"{name}: {len(cols)} columns ({', '.join(map(str, cols))}); need "
                         f"{want} (name them with columns=[...])")
    dtypes = x.dtypes
    for c in cols[:-1]:
        dt = dtypes[c]
        if getattr(dt, "kind", "O") not in "iu":
            raise InputError(f"{name}: column {c!r} is {dt}; ids must be integers (0-based)")
    if getattr(dtypes[cols[-1]], "kind", "O") not in "biuf":
        raise InputError(f"{name}: value column {cols[-1]!r} is {dtypes[cols[-1]]}; values "
                         "must be numbers")
    return cols


def _array_check(x, order, name, min_order) -> tuple:
    if order is not None and x.ndim != order:
        raise InputError(f"{name}: a {x.ndim}-D Dask Array, need {order}-D")
    if x.ndim < min_order:
        raise InputError(f"{name}: a {x.ndim}-D Dask Array, need at least {min_order}-D")
    if any(np.isnan(c) for cs in x.chunks for c in cs):
        raise InputError(f"{name}: the Dask Array's chunk sizes are unknown (nan); call "
                         ".compute_chunk_sizes() first")
    if getattr(x.dtype, "kind", "O") not in "biuf":
        raise InputError(f"{name}: the Dask Array's dtype is {x.dtype}; values must be numbers")
    meta = type(x._meta)
    mod = meta.__module__ or ""
    if not (mod.startswith(("scipy.sparse", "sparse", "numpy"))):
        raise InputError(f"{name}: chunks of type {meta.__name__}; use scipy.sparse, "
                         "sparse.COO or numpy chunks")
    return tuple(int(s) for s in x.shape)


def _problem(stats, cols, order, name, shape) -> str | None:
    """The first problem of the summaries, as one line, or None."""
    label = (lambda m: f"column {cols[m]!r}") if cols != ["chunks"] else \
        (lambda m: f"mode {m + 1}")
    where = "partition" if cols != ["chunks"] else "chunk"
    for k, s in enumerate(stats):
        if s.get("error"):
            return f"{name}: {where} {k}: {s['error']}"
    for k, s in enumerate(stats):
        if not s["n"]:
            continue
        for m in range(order):
            if s["missing"][m]:
                return f"{name}: {label(m)} has missing ids in {where} {k}"
            if s["min"][m] < 0:
                return (f"{name}: {label(m)} holds a negative id ({s['min'][m]}) in {where} "
                        f"{k}; ids are 0-based")
            if shape is not None and s["max"][m] >= shape[m]:
                return (f"{name}: {label(m)} holds id {s['max'][m]} in {where} {k}, outside "
                        f"the shape {' x '.join(map(str, shape))}")
        if s["bad"]:
            what = "the value column " + repr(cols[-1]) if cols != ["chunks"] else "values"
            return (f"{name}: {what} holds NaN or infinite values in {where} {k} "
                    f"({s['bad']} of them)")
    return None


# -- on the workers ------------------------------------------------------------------------

def _frame_piece(df, cols) -> tuple:
    ids = np.empty((len(cols) - 1, len(df)), np.int64)
    missing = []
    for m, c in enumerate(cols[:-1]):
        col = df[c]
        missing.append(bool(col.isna().any()))
        ids[m] = col.fillna(-1).to_numpy(dtype=np.int64) if missing[-1] else \
            col.to_numpy(dtype=np.int64)
    v = df[cols[-1]]
    vals = v.to_numpy(dtype=np.float64, na_value=np.nan)
    return ids, vals, missing


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
        finite = np.isfinite(vals)
        out["bad"] = int(n - np.count_nonzero(finite))
        out["nonzero"] = int(np.count_nonzero(vals))
    return out


def _pins(piece, itype):
    return piece[0].astype(itype)


def _values_of(piece):
    return piece[1]


def _select(piece, take, bounds, with_ids: bool):
    """The piece's nonzeros for each destination: ``take[bounds[d]:bounds[d + 1]]``."""
    ids, vals, _ = piece
    out = []
    for d in range(len(bounds) - 1):
        t = take[bounds[d]:bounds[d + 1]]
        out.append((ids[:, t], vals[t]) if with_ids else vals[t])
    return out


def _item(seq, d):
    return seq[d]


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
        out.append((take.astype(np.int64), bounds))
    return out


def route(client, nz: Nonzeros, takes: list, where: dict, join, args: dict | None = None,
          *, with_ids: bool = False, name: str = "route") -> dict:
    """Send every piece's nonzeros to their parts' workers and build each part there.

    Parameters
    ----------
    client : distributed.Client
    nz : Nonzeros
    takes : list of (take, bounds)
        Per piece: positions in the piece for each part ``d``, ``take[bounds[d]:
        bounds[d + 1]]`` (a nonzero may go to several parts); :func:`labels_route`.
    where : dict
        ``part index -> worker address`` (parts are numbered 0..len(bounds) - 2).
    join : callable
        ``join(arg, *segments)`` on the part's worker, one segment per piece that has
        nonzeros for it, in piece order: a values array, or ``(ids, values)`` with
        ``with_ids``.
    args : dict, optional
        ``part -> arg`` (small, or a Future already on the part's worker).

    Returns
    -------
    dict
        ``part -> Future`` of ``join``'s result, on the part's worker. The routing
        intermediates are released (Dask frees them once the parts exist).
    """
    import uuid

    token = uuid.uuid4().hex[:8]
    who = client.who_has(nz.pieces)
    nparts = len(takes[0][1]) - 1 if takes else 0
    selects, per_part = [], {d: [] for d in range(nparts)}
    for k, (piece, (take, bounds)) in enumerate(zip(nz.pieces, takes)):
        holders = list(who.get(piece.key) or [])
        opts = {"workers": holders[:1], "allow_other_workers": True} if holders else {}
        tk = client.scatter(np.ascontiguousarray(take), hash=False, **(
            {"workers": holders[:1]} if holders else {}))
        sel = client.submit(_select, piece, tk, np.asarray(bounds), with_ids,
                            key=f"daskhpc-{name}-select-{token}-{k}", **opts)
        selects += [sel, tk]
        ds = [d for d in range(nparts) if bounds[d + 1] > bounds[d]]
        # one submission per piece (client.map), not one per piece and part
        items = client.map(_item, [sel] * len(ds), ds, pure=False,
                           key=[f"daskhpc-{name}-item-{token}-{k}-{d}" for d in ds], **opts)
        for d, item in zip(ds, items):
            per_part[d].append(item)
    out = {}
    for d in range(nparts):
        out[d] = client.submit(join, (args or {}).get(d), *per_part[d],
                               key=f"daskhpc-{name}-part-{token}-{d}",
                               workers=[where[d]], allow_other_workers=False)
        selects += per_part[d]
    for f in selects:
        f.release()
    return out


# -- edge lists and dense rows (gcn, linear; helper coll26b) --------------------------------
#
# An edge list's ids are original ids, numbered as the SNAP reader numbers them (sorted
# unique ids of both columns -> 0..n-1; kept when they already are 0..n-1): the unique is
# a tree of unions on the workers, and the client receives only the dense pins. Dense row
# collections (node features, labels) are kept on the workers as row blocks and routed
# by :func:`route` to the parts that own their rows.

class Edges:
    """A validated edge list whose original ids stay on the workers.

    Attributes
    ----------
    n : int
        Nodes (distinct ids of both columns).
    pins : int32 or int64 array (2, nedges)
        Dense (source, target) of every edge, in collection order.
    id_map : Future or None
        The sorted original ids on a worker (node i is ``id_map[i]``); None when the ids
        already are ``0..n-1``.
    weighted : bool
        Whether a third (weight) column was read (validated: finite numbers).
    token : str
    """

    def __init__(self, n, pins, id_map, weighted, columns, token):
        self.n, self.pins, self.id_map, self.weighted = int(n), pins, id_map, weighted
        self.columns, self.token = columns, token

    def __repr__(self) -> str:
        return f"Edges({self.n} nodes, {self.pins.shape[1]} edges)"


def read_edge_list(x, client, *, columns=None, name: str = "edges") -> Edges:
    """Check a DataFrame edge list ``(source, target[, weight])`` and number its nodes.

    Parameters
    ----------
    x : dask.dataframe.DataFrame
        Integer node ids (any non-negative integers: numbered like
        :func:`daskhpc.io.read_snap` numbers them), optionally a numeric weight.
    client : distributed.Client
    columns : list of str, optional
        The source, target (and weight) columns; default every column in order.
    name : str
        What the messages call the input.

    Raises
    ------
    InputError
        Not a DataFrame, 2 or 3 columns not found, float ids (from the metadata);
        missing, negative ids or NaN weights (one pass on the workers); no edges.
    """
    if _kind(x) != "frame":
        raise InputError(f"{name}: {type(x).__name__} is not a Dask DataFrame of edges "
                         "(source, target[, weight])")
    dataframe_module()
    from dask import delayed
    from dask.base import tokenize

    names = list(x.columns)
    cols = names if columns is None else list(columns)
    for c in cols:
        if c not in names:
            raise InputError(f"{name}: column {c!r} is not in the DataFrame (columns: "
                             f"{', '.join(map(str, names))})")
    if len(cols) not in (2, 3):
        raise InputError(f"{name}: {len(cols)} columns ({', '.join(map(str, cols))}); an "
                         "edge list has source, target and optionally a weight (name them "
                         "with columns=[...])")
    for c in cols[:2]:
        if getattr(x.dtypes[c], "kind", "O") not in "iu":
            raise InputError(f"{name}: column {c!r} is {x.dtypes[c]}; node ids must be "
                             "integers")
    if len(cols) == 3 and getattr(x.dtypes[cols[2]], "kind", "O") not in "biuf":
        raise InputError(f"{name}: weight column {cols[2]!r} is {x.dtypes[cols[2]]}; "
                         "weights must be numbers")
    futures = client.compute([delayed(_frame_piece, pure=True)(d, cols if len(cols) == 3
                                                                  else cols + cols[:1])
                              for d in x.to_delayed()])
    try:
        stats = client.gather([client.submit(_summary, f, pure=False) for f in futures])
        problem = _edge_problem(stats, cols, name)
        if problem:
            raise InputError(problem)
        if not sum(s["n"] for s in stats):
            raise InputError(f"{name}: the collection holds no edges")
        uniq = [client.submit(_edge_unique, f, pure=False) for f in futures]
        while len(uniq) > 1:                        # a tree of unions on the workers
            uniq = [client.submit(_union, *uniq[i:i + 2], pure=False)
                    for i in range(0, len(uniq), 2)]
        n = client.submit(len, uniq[0], pure=False).result()
        lo = min(s["min"][m] for s in stats if s["n"] for m in range(2))
        hi = max(s["max"][m] for s in stats if s["n"] for m in range(2))
        id_map = None if (lo == 0 and hi == n - 1) else uniq[0]
        itype = np.int32 if n < 2**31 else np.int64
        pins = client.gather([client.submit(_dense_pins, f, id_map, itype, pure=False)
                              for f in futures])
    finally:
        for f in futures:
            f.release()
    pins = np.concatenate(pins, axis=1)
    return Edges(n, pins, id_map, len(cols) == 3, cols, tokenize(x))


def _edge_problem(stats, cols, name) -> str | None:
    for k, s in enumerate(stats):
        if not s["n"]:
            continue
        for m in range(2):
            if s["missing"][m]:
                return f"{name}: column {cols[m]!r} has missing ids in partition {k}"
            if s["min"][m] < 0:
                return (f"{name}: column {cols[m]!r} holds a negative id ({s['min'][m]}) in "
                        f"partition {k}; node ids must be non-negative integers")
        if len(cols) == 3 and s["bad"]:
            return (f"{name}: the weight column {cols[2]!r} holds NaN or infinite values "
                    f"in partition {k} ({s['bad']} of them)")
    return None


def _edge_unique(piece):
    from daskhpc.arrays import unique_sorted

    return unique_sorted(piece[0].reshape(-1))


def _union(a, b=None):
    return a if b is None else np.union1d(a, b)


def _dense_pins(piece, id_map, itype):
    ids = piece[0]
    return (ids if id_map is None else np.searchsorted(id_map, ids)).astype(itype)


class Rows:
    """A dense (or scipy.sparse) row collection kept on the workers as row blocks.

    Attributes
    ----------
    shape : tuple of int
    offsets : int64 array (npieces + 1,)
        The first row of every block.
    pieces : list of Future
        Per block ``(None, block, None)`` (the layout :func:`route` selects from).
    nonzeros : int
        Nonzero entries (a cost estimate; all rows are moved as they are).
    token : str
    """

    def __init__(self, shape, offsets, pieces, nonzeros, token, chunks):
        self.shape, self.offsets, self.pieces = tuple(shape), offsets, pieces
        self.nonzeros, self.token, self.chunks = int(nonzeros), token, chunks

    def gather(self, client):
        """All rows on the client (for checks such as ``check_serial`` only)."""
        import scipy.sparse as sp

        blocks = client.gather([client.submit(_block_of, p, pure=False) for p in self.pieces])
        if blocks and sp.issparse(blocks[0]):
            return sp.vstack(blocks, format="csr")
        return np.concatenate(blocks) if blocks else np.zeros((0,) + self.shape[1:])

    def release(self) -> None:
        for f in self.pieces:
            f.release()
        self.pieces = []


def read_rows(x, client, *, name: str = "features", rows: int | None = None) -> Rows:
    """Check a Dask Array of rows (1-D, or 2-D with numpy or scipy.sparse chunks) and keep
    its row blocks on the workers (column chunks joined there).

    Raises
    ------
    InputError
        Not a Dask Array, unknown chunk sizes, not numeric, ``rows`` given and not the
        array's length (from the metadata); NaN or infinite values (one pass).
    """
    check_rows(x, name=name, rows=rows)
    from dask.base import tokenize

    token = tokenize(x)
    if x.ndim == 2 and x.numblocks[1] > 1:
        x = x.rechunk({1: -1})                     # on the workers: a row block is whole
    blocks = x.to_delayed().reshape(-1)
    futures = client.compute(list(blocks))
    stats = client.gather([client.submit(_rows_summary, f, pure=False) for f in futures])
    for k, (bad, _) in enumerate(stats):
        if bad:
            for f in futures:
                f.release()
            raise InputError(f"{name}: NaN or infinite values in chunk {k} ({bad} of them)")
    pieces = [client.submit(_as_piece, f, pure=False) for f in futures]
    from distributed import wait

    wait(pieces)
    for f in futures:
        f.release()
    offsets = np.concatenate([[0], np.cumsum(x.chunks[0])]).astype(np.int64)
    return Rows(x.shape, offsets, pieces, sum(nz for _, nz in stats), token, x.chunks[0])


def check_rows(x, *, name: str = "features", rows: int | None = None) -> None:
    """The metadata checks of :func:`read_rows` (nothing computed)."""
    if _kind(x) != "array":
        raise InputError(f"{name}: {type(x).__name__} is not a Dask Array")
    if x.ndim not in (1, 2):
        raise InputError(f"{name}: a {x.ndim}-D Dask Array; need rows (1-D or 2-D)")
    if any(np.isnan(c) for cs in x.chunks for c in cs):
        raise InputError(f"{name}: the Dask Array's chunk sizes are unknown (nan); call "
                         ".compute_chunk_sizes() first")
    if getattr(x.dtype, "kind", "O") not in "biuf":
        raise InputError(f"{name}: the Dask Array's dtype is {x.dtype}; values must be numbers")
    mod = type(x._meta).__module__ or ""
    if not mod.startswith(("numpy", "scipy.sparse")):
        raise InputError(f"{name}: chunks of type {type(x._meta).__name__}; use numpy or "
                         "scipy.sparse chunks")
    if rows is not None and x.shape[0] != rows:
        raise InputError(f"{name}: {x.shape[0]} rows for {rows} nodes/rows")


def _rows_summary(block) -> tuple:
    data = block.data if hasattr(block, "tocsr") else np.asarray(block)
    finite = np.isfinite(data) if data.dtype.kind == "f" else np.ones(data.shape, bool)
    return int(data.size - np.count_nonzero(finite)), int(np.count_nonzero(data))


def _as_piece(block):
    if hasattr(block, "tocsr"):
        block = block.tocsr()
    return None, block, None


def _block_of(piece):
    return piece[1]


def rows_route(part_rows: list, offsets: np.ndarray) -> list:
    """Per piece ``(take, bounds)`` sending every part its rows (each ``part_rows[d]``
    ascending): the join gets them in ascending order.

    >>> [(t.tolist(), b.tolist()) for t, b in rows_route([np.array([0, 3]),
    ...                                                   np.array([1, 2])], np.array([0, 2, 4]))]
    [([0, 1], [0, 1, 2]), ([1, 0], [0, 1, 2])]
    """
    out = []
    for lo, hi in zip(offsets[:-1], offsets[1:]):
        sel = [r[np.searchsorted(r, lo):np.searchsorted(r, hi)] - lo for r in part_rows]
        bounds = np.concatenate([[0], np.cumsum([s.size for s in sel])]).astype(np.int64)
        take = np.concatenate(sel).astype(np.int64) if sel else np.zeros(0, np.int64)
        out.append((take, bounds))
    return out


def join_rows(segments):
    """The rows a part received (:func:`route` segments, in piece order) as one block."""
    import scipy.sparse as sp

    if segments and sp.issparse(segments[0]):
        return sp.vstack(segments, format="csr")
    return np.concatenate(segments) if segments else None


# -- ratings with their original ids (ssgd): a DataFrame, or files the workers read --------
# (one block: read_ratings_frame, ratings_files and their helpers)

__all__ += ["read_ratings_frame", "ratings_files"]


def read_ratings_frame(x, client, *, columns=None, name: str = "ratings"):
    """Check a DataFrame of ratings with ORIGINAL ids and persist it as dense nonzeros.

    The ids are mapped as :func:`daskhpc.io.read_ratings` maps a file's: sorted unique
    ids become ``0..n-1`` (integers, or strings sorted as strings), and a mode whose ids
    already are ``0..n-1`` has no map. The distinct ids are found with Dask's
    ``unique`` (a tree reduction on the workers): only they reach the client; each
    partition is then mapped on its worker.

    Parameters
    ----------
    x : dask.dataframe.DataFrame
        One rating a row: user, item, rating (further columns ignored when ``columns``
        names three).
    client : distributed.Client
    columns : list of 3 str, optional
        The user, item and rating columns (default: the first three... all columns when
        there are exactly three).
    name : str
        What the messages call the input.

    Returns
    -------
    (Nonzeros, (user_map, item_map))
        Nonzeros with ids ``0..n-1`` (collection order: partition after partition); a
        map is None, an int64 array or a str array (original id of each row / column).

    Raises
    ------
    InputError
        Not a DataFrame, a missing column, float or other non-id columns, a rating
        column that is not numeric (checked from the metadata, before any work), missing
        ids, NaN or infinite ratings, a repeated (user, item) pair (found on the
        workers), with one line naming the column, partition or ids.
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
    problem = _problem(stats, cols, 2, name, shape)
    if problem:
        for f in pieces:
            f.release()
        raise InputError(problem)
    nnz = sum(s["n"] for s in stats)
    if nnz == 0:
        raise InputError(f"{name}: the collection holds no ratings")
    itype = np.int32 if max(shape) < 2**31 else np.int64
    pins = client.gather([client.submit(_pins, f, itype, pure=False) for f in pieces])
    pins = np.concatenate(pins, axis=1)
    offsets = np.concatenate([[0], np.cumsum([s["n"] for s in stats])]).astype(np.int64)
    nz = Nonzeros(name, shape, pins, offsets, pieces, cols, token,
                  sum(s["nonzero"] for s in stats))
    _no_repeated_pairs(nz, maps, cols, name)
    out_maps = tuple(None if (m.dtype.kind in "iu" and m[0] == 0 and m[-1] == m.size - 1)
                     else m for m in maps)
    return nz, out_maps


def ratings_files(paths, *, name: str | None = None):
    """A Dask DataFrame (user, item, rating) of Parquet or CSV files, read by the workers.

    ``paths``: Parquet files or directories of them (``*.parquet``, ``*.pq``, or a
    directory), or CSV files (comma separated, with or without a header; a fourth
    column, the timestamp, is ignored). What the client reads is metadata only: each
    Parquet file's schema (its footer) and each CSV file's first lines, so that an
    unreadable file, or one whose columns are not ids and a numeric rating, is named in
    a one-line InputError before the cluster does any work.
    """
    import os

    dd = dataframe_module()
    paths = [os.fspath(p) for p in (paths if isinstance(paths, (list, tuple)) else [paths])]
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
    for c in cols:
        if c not in names:
            raise InputError(f"{name}: column {c!r} is not in the DataFrame (columns: "
                             f"{', '.join(map(str, names))})")
    dtypes = x.dtypes
    for c in cols[:2]:
        kind = getattr(dtypes[c], "kind", "O")
        if kind not in "iuOU" and "str" not in str(dtypes[c]):
            raise InputError(f"{name}: column {c!r} is {dtypes[c]}; ids must be integers or "
                             "strings")
    if getattr(dtypes[cols[2]], "kind", "O") not in "biuf":
        raise InputError(f"{name}: rating column {cols[2]!r} is {dtypes[cols[2]]}; ratings "
                         "must be numbers")
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
    """On a worker: a partition as ``(dense ids (2, n), ratings, missing)``."""
    n = len(df)
    ids = np.empty((2, n), np.int64)
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
    return ids, vals, missing


def _no_repeated_pairs(nz, maps, cols, name) -> None:
    """Refuse a second rating of a (user, item) pair, as the file reader does."""
    key = nz.pins[0].astype(np.int64) * nz.shape[1] + nz.pins[1]
    ranked = np.sort(key)
    repeat = np.flatnonzero(ranked[1:] == ranked[:-1])
    del ranked
    if not repeat.size:
        return
    order = np.argsort(key, kind="stable")
    ranked = key[order]
    dup = ranked[1:] == ranked[:-1]
    second = int(order[1:][dup].min())
    first = int(order[np.searchsorted(ranked, key[second])])
    u, i = (maps[m][nz.pins[m][second]] for m in range(2))
    piece = int(np.searchsorted(nz.offsets, second, side="right") - 1)
    nz.release()
    raise InputError(f"{name}: repeated rating for user {u}, item {i} (rows {first} and "
                     f"{second} of the collection, partition {piece}); one rating a pair")
