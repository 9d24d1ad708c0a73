"""Dask collections of edge lists and dense rows (gcn, linear): read, validate, route."""

from __future__ import annotations

import numpy as np

from daskhpc._narrow import index_dtype
from daskhpc.arrays import unique_sorted
from daskhpc.errors import InputError

from ._collections import (_checked_count, _column_kinds, _frame_piece, _kind, _named_columns,
                           _Pieces, _summary, _values_of, check_array, dataframe_module,
                           gathered)


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
    """
    if _kind(x) != "frame":
        raise InputError(f"{name}: {type(x).__name__} is not a Dask DataFrame of edges "
                         "(source, target[, weight])")
    dataframe_module()
    from dask import delayed
    from dask.base import tokenize

    cols = _named_columns(x, columns, name)
    if len(cols) not in (2, 3):
        raise InputError(f"{name}: {len(cols)} columns ({', '.join(map(str, cols))}); an "
                         "edge list has source, target and optionally a weight (name them "
                         "with columns=[...])")
    _column_kinds(x, cols[:2], cols[2] if len(cols) == 3 else None, name,
                  "node ids must be integers", "weight")
    futures = client.compute([delayed(_frame_piece, pure=True)(d, cols if len(cols) == 3
                                                                  else cols + cols[:1])
                              for d in x.to_delayed()])
    try:
        stats = client.gather([client.submit(_summary, f, pure=False) for f in futures])
        _checked_count(stats, cols, 2, name, None, futures, "edges",
                       negative="node ids must be non-negative integers", value="weight")
        uniq = [client.submit(_edge_unique, f, pure=False) for f in futures]
        while len(uniq) > 1:                        # a tree of unions on the workers
            uniq = [client.submit(_union, *uniq[i:i + 2], pure=False)
                    for i in range(0, len(uniq), 2)]
        n = client.submit(len, uniq[0], pure=False).result()
        lo = min(s["min"][m] for s in stats if s["n"] for m in range(2))
        hi = max(s["max"][m] for s in stats if s["n"] for m in range(2))
        id_map = None if (lo == 0 and hi == n - 1) else uniq[0]
        itype = index_dtype(n)
        pins = client.gather([client.submit(_dense_pins, f, id_map, itype, pure=False)
                              for f in futures])
    finally:
        for f in futures:
            f.release()
    pins = np.concatenate(pins, axis=1)
    return Edges(n, pins, id_map, len(cols) == 3, cols, tokenize(x))


def _edge_unique(piece):
    return unique_sorted(piece[0].reshape(-1))


def _union(a, b=None):
    return a if b is None else np.union1d(a, b)


def _dense_pins(piece, id_map, itype):
    ids = piece[0]
    return (ids if id_map is None else np.searchsorted(id_map, ids)).astype(itype)


class Rows(_Pieces):
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

    def __init__(self, shape, offsets, pieces, nonzeros, token, chunks, remake=None,
                 name: str = "features"):
        self.shape, self.offsets, self.pieces = tuple(shape), offsets, pieces
        self.nonzeros, self.token, self.chunks = int(nonzeros), token, chunks
        self.remake, self.name = remake, name

    def gather(self, client):
        """All rows on the client (for checks such as ``check_serial`` only)."""
        gathered(self.name, self.nonzeros, 8 * self.nonzeros)
        blocks = client.gather([client.submit(_values_of, p, pure=False) for p in self.pieces])
        return join_rows(blocks) if blocks else np.zeros((0,) + self.shape[1:])


def read_rows(x, client, *, name: str = "features", rows: int | None = None) -> Rows:
    """Check a Dask Array of rows (1-D, or 2-D with numpy or scipy.sparse chunks) and keep
    its row blocks on the workers (column chunks joined there)."""
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
    def remake(c):
        return [c.submit(_as_piece, f, pure=False) for f in c.compute(list(blocks))]

    return Rows(x.shape, offsets, pieces, sum(nz for _, nz in stats), token, x.chunks[0],
                remake=remake, name=name)


def check_rows(x, *, name: str = "features", rows: int | None = None) -> None:
    """The metadata checks of :func:`read_rows` (nothing computed)."""
    if _kind(x) != "array":
        raise InputError(f"{name}: {type(x).__name__} is not a Dask Array")
    if x.ndim not in (1, 2):
        raise InputError(f"{name}: a {x.ndim}-D Dask Array; need rows (1-D or 2-D)")
    check_array(x, name)
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


def join_rows(segments, order: int | None = None):
    """The rows a part received (:func:`route` segments, in piece order) as one block;
    with ``order``, ``(ids, values)`` segments (``with_ids``) as one ``(ids, values)``."""
    import scipy.sparse as sp

    if order is not None:
        if not segments:
            return np.zeros((order, 0), np.int64), np.zeros(0)
        return (np.concatenate([sg[0] for sg in segments], axis=1),
                np.concatenate([sg[1] for sg in segments]))
    if segments and sp.issparse(segments[0]):
        return sp.vstack(segments, format="csr")
    return np.concatenate(segments) if segments else None
