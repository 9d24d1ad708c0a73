"""Dask collections in and out of ``multiply``: values never pass through the client.

A collection input's nonzeros go from their pieces' workers to their cells' workers
(:func:`daskhpc.io.route`); a C kept on the workers becomes a dask array of
``csr_matrix`` chunks in the original order, joined worker to worker.
"""

from __future__ import annotations

import re
import uuid
from collections import Counter

import numpy as np
import scipy.sparse as sp

from daskhpc.errors import InputError
from daskhpc.io import join_rows

from ._block import CscBlock
from ._symbolic import inverse as _inverse


def read_inputs(client, a, b, columns=None) -> dict:
    """``{"A": Nonzeros, "B": Nonzeros}`` for the inputs that are collections (A·A: B is A)."""
    from daskhpc.io import is_collection, read_nonzeros

    out = {}
    for name, x in (("A", a), ("B", b)):
        if x is not None and is_collection(x):
            out[name] = read_nonzeros(x, client, order=2, columns=columns, name=name)
    if b is None and "A" in out:
        out["B"] = out["A"]                 # A·A: B's blocks come from the same pieces
    return out


def shapes(sources: dict, a, b) -> tuple[tuple, tuple]:
    """A's and B's shapes, an inferred inner dimension the larger of the two (A·A: square)."""
    sa = sources["A"].shape if "A" in sources else tuple(a.shape)
    if b is None or sources.get("B") is sources.get("A", 0):
        if "A" in sources and sources["A"].columns != ["chunks"]:
            n = max(sa)
            return (n, n), (n, n)
        return sa, sa
    sb = sources["B"].shape if "B" in sources else tuple(b.shape)
    inferred = {n for n in ("A", "B") if n in sources and sources[n].columns != ["chunks"]}
    if inferred and sa[1] != sb[0]:
        k = max(sa[1], sb[0])
        if not (("A" not in inferred and sa[1] != k) or ("B" not in inferred and sb[0] != k)):
            sa, sb = (sa[0], k), (k, sb[1])
    return sa, sb


def pattern(nz, shape) -> sp.csr_array:
    """The pattern of ``nz`` as canonical CSR, every value 1.0 held once (zero-stride)."""
    if any(hi >= s for hi, s in zip(nz.pins.max(axis=1), shape)):
        raise InputError(f"{nz.name}: ids reach {nz.pins.max(axis=1).tolist()}, outside the "
                         f"shape {' x '.join(map(str, shape))}")
    # int8 values while the COO becomes CSR (duplicates summed): 1 byte a nonzero
    m = sp.csr_array((np.ones(nz.nnz, np.int8), (nz.pins[0], nz.pins[1])), shape=shape)
    m.sum_duplicates()
    out = sp.csr_array((np.broadcast_to(np.float64(1.0), m.indices.shape), m.indices,
                        m.indptr), shape=shape)
    out.has_canonical_format = True
    return out


def route_blocks(client, s, placement, names=("A", "B"), only=None) -> tuple[dict, dict]:
    """The collection operands' ``{cell: Future}`` blocks, built on their cells' workers."""
    from daskhpc.io import labels_route, route

    g, lay = s.grid, s.layout(1)
    cells = g.cells() if only is None else [tuple(c) for c in only]
    where = {g.rank(*c): placement.worker(g.rank(*c)) for c in g.cells()}
    # a nonzero's cell (k * q + i) * q + j is a row part plus a column part, added a
    # slice at a time: the int32 labels are the only nnz-long array
    i32, q = np.int32, g.q
    rb = lay.row_block_of().astype(i32)
    ks, kk = (x.astype(i32) for x in lay.inner_slice_of())
    cb = np.repeat(np.arange(q, dtype=i32), np.diff(lay.col_bounds))
    out = []
    for name in ("A", "B"):
        nz = (s.sources or {}).get(name)
        if nz is None or name not in names:
            out.append(None)
            continue
        r, c = nz.pins[0], nz.pins[1]
        if name == "A":          # i from the row; j = the inner block, k its layer
            by_row = (rb * q)[_inverse(s.pr)]
            by_col = (kk * q * q + ks)[_inverse(s.pk)]
        else:                    # i and k from the inner index; j from the column
            by_row = (kk * q * q + ks * q)[_inverse(s.pk)]
            by_col = cb[_inverse(s.pc)]
        labels = by_row[r]
        for lo in range(0, labels.size, 1 << 20):
            labels[lo:lo + (1 << 20)] += by_col[c[lo:lo + (1 << 20)]]
        args = {}
        for (ci, cj, ck) in cells:
            if name == "A":
                rows, cols = s.pr[slice(*lay.rows(ci))], s.pk[slice(*lay.inner(cj, ck))]
            else:
                rows, cols = s.pk[slice(*lay.inner(ci, ck))], s.pc[slice(*lay.cols(cj))]
            args[g.rank(ci, cj, ck)] = (rows, cols)
        takes = labels_route(labels, nz.offsets, g.p)
        del labels, by_row, by_col            # the takes say it all now
        futs = route(client, nz, takes, where, _cell_block, args, with_ids=True,
                     name=f"spgemm-{name}",
                     parts=None if only is None else [g.rank(*c) for c in cells])
        out.append({c: futs[g.rank(*c)] for c in cells})
    return out[0], out[1]


def rebuilder(client, s, name: str):
    """``rebuild(cells, placement)`` for the part store: operand ``name``'s cells built again."""
    from daskhpc.io import rereading

    return rereading(client, [s.sources[name]], lambda cells, placement: route_blocks(
        client, s, placement, (name,), cells)[("A", "B").index(name)])


def _local_index(ids: np.ndarray, values: np.ndarray) -> np.ndarray:
    order = np.argsort(ids, kind="stable")
    return order[np.searchsorted(ids[order], values)]


def _cell_block(arg, *segments) -> CscBlock:
    """One cell's block from its nonzeros (original ids), as the client's cut makes it."""
    rows, cols = arg
    ids, vals = join_rows(segments, order=2)
    m = sp.csc_array((vals, (_local_index(rows, ids[0]), _local_index(cols, ids[1]))),
                     shape=(rows.size, cols.size))
    return CscBlock.from_scipy(m)


_NAME = re.compile(r"kept-(\w+)-([\d-]+)\.npz$")


def piece_of(name: str, t: int) -> tuple:
    """``(batch, cell)`` of a kept block from its file name (``cell[0]`` None: whole columns)."""
    m = _NAME.search(name)
    ints = tuple(int(x) for x in m.group(2).split("-"))
    return t, ints if len(ints) == 3 else (None, *ints)


def client_of(arr):
    """The client whose futures the dask array ``arr`` of C holds (None: it holds none)."""
    from distributed import Future

    # to_dask_array puts the futures themselves in the graph, one per chunk
    return next((v.client for v in arr.__dask_graph__().values() if isinstance(v, Future)),
                None)


def to_dask_array(client, s, lay, pieces: list):
    """C as a dask array from ``(Future, worker, batch, cell)`` of every kept block."""
    import dask.array as da

    g = lay.grid
    whole = any(cell[0] is None for _, _, _, cell in pieces)
    m = lay.m
    row_bounds = np.array([0, m]) if whole else np.asarray(lay.row_bounds)
    # every sub-block, empty ones included, is a chunk: one per (column block, u)
    col_bounds = np.concatenate([[0], np.cumsum(np.concatenate(
        [np.diff(lay.sub_bounds[j]) for j in range(g.q)]))]).astype(np.int64)
    nr, nc = row_bounds.size - 1, col_bounds.size - 1
    heights, widths = np.diff(row_bounds), np.diff(col_bounds)
    row_chunk, col_chunk = np.repeat(np.arange(nr), heights), np.repeat(np.arange(nc), widths)
    home = {(t, cell): w for _, w, t, cell in pieces}
    workers = sorted({w for _, w, _, _ in pieces}) or [None]
    token = uuid.uuid4().hex[:8]
    edges: dict = {}              # chunk -> [item futures]
    temps = []
    touched = []
    for f, w, t, cell in pieces:
        i, j, k = cell
        rows = np.arange(m) if i is None else s.pr[slice(*lay.rows(i))]
        cols = s.pc[lay.batch_columns(t, j, k)]
        touched.append((np.unique(row_chunk[rows]), np.unique(col_chunk[cols])))
    count = Counter((int(I), int(J)) for rset, cset in touched for I in rset for J in cset)
    drop = getattr(s, "semiring", 0) == 0    # other semirings keep entries whose value is 0
    direct = {}                   # chunk -> Future: a piece that is its chunk, converted
    for idx, ((f, w, t, cell), (rset, cset)) in enumerate(zip(pieces, touched)):
        if rset.size == 1 and cset.size == 1 and count[(int(rset[0]), int(cset[0]))] == 1:
            I, J = int(rset[0]), int(cset[0])
            direct[(I, J)] = client.submit(
                _piece_chunk, f, (int(heights[I]), int(widths[J])),
                (int(row_bounds[I]), int(col_bounds[J])), drop, workers=[w],
                allow_other_workers=False, key=f"daskhpc-spgemm-chunk-{token}-{I}-{J}")
            continue
        split = client.submit(_split, f, row_bounds, col_bounds, drop, workers=[w],
                              allow_other_workers=False,
                              key=f"daskhpc-spgemm-csplit-{token}-{idx}")
        temps.append(split)
        for I in rset:
            for J in cset:
                item = client.submit(_chunk_item, split, int(I) * nc + int(J), workers=[w],
                                     allow_other_workers=False,
                                     key=f"daskhpc-spgemm-citem-{token}-{idx}-{I}-{J}")
                edges.setdefault((int(I), int(J)), []).append(item)
                temps.append(item)
    name = f"spgemm-c-{token}"
    dsk = {}
    sub_of = [(j, u) for j in range(g.q) for u in range(lay.b * g.l)]
    for I in range(nr):
        for J in range(nc):
            if (I, J) in direct:
                dsk[(name, I, J)] = direct[(I, J)]
                continue
            j, u = sub_of[J]
            t, k = u % lay.b, u // lay.b
            w = home.get((t, (None if whole else I, j, k)), workers[(I * nc + J) % len(workers)])
            dsk[(name, I, J)] = client.submit(
                _chunk_join, (int(heights[I]), int(widths[J])),
                (int(row_bounds[I]), int(col_bounds[J])),
                *edges.get((I, J), []), key=f"daskhpc-spgemm-chunk-{token}-{I}-{J}",
                **({"workers": [w], "allow_other_workers": False} if w else {}))
    for f in temps:
        f.release()
    chunks = (tuple(int(x) for x in heights), tuple(int(x) for x in widths))
    return da.Array(dsk, name, chunks=chunks, dtype=np.float64, meta=sp.csr_matrix((0, 0)))


def _split(kept, row_bounds, col_bounds, drop: bool = True) -> dict:
    """A kept ``(block, rows, cols)`` split by chunk of C (:func:`_kernels.chunk_split`)."""
    from ._kernels import chunk_split

    block, rows, cols = kept
    nr = block.shape[0]
    row_ids = np.arange(nr, dtype=np.int64) if not isinstance(rows, np.ndarray) else \
        np.ascontiguousarray(rows, dtype=np.int64)
    col_ids = np.ascontiguousarray(cols, dtype=np.int64)
    nc = col_bounds.size - 1
    row_label = (np.searchsorted(row_bounds, row_ids, side="right") - 1) * nc
    col_label = np.searchsorted(col_bounds, col_ids, side="right") - 1
    starts, r, c, v = chunk_split(np.ascontiguousarray(block.ptr, dtype=np.int64),
                                  np.ascontiguousarray(block.idx, dtype=np.int32),
                                  np.ascontiguousarray(block.val, dtype=np.float64),
                                  row_label.astype(np.int64), row_ids,
                                  np.argsort(col_ids, kind="stable"),
                                  col_label.astype(np.int64), col_ids,
                                  (row_bounds.size - 1) * nc, drop)
    return {u: (r[lo:hi], c[lo:hi], v[lo:hi]) for u, (lo, hi) in
            enumerate(zip(starts[:-1], starts[1:])) if hi > lo}


def _piece_chunk(kept, shape, origin, drop: bool = True) -> sp.csr_matrix:
    """A kept piece that is a whole chunk of C, as canonical CSR on its worker."""
    block, rows, cols = kept
    r = block.idx.astype(np.int64) if not isinstance(rows, np.ndarray) else \
        np.asarray(rows, np.int64)[block.idx]
    cols = np.asarray(cols, np.int64)
    same_cols = cols.size == shape[1] and np.array_equal(cols, origin[1] + np.arange(shape[1]))
    if same_cols and block.shape[0] == shape[0] and (not isinstance(rows, np.ndarray) or
                                                     np.array_equal(rows, origin[0] +
                                                                    np.arange(shape[0]))):
        out = sp.csr_matrix(sp.csc_matrix((block.val, block.idx, block.ptr), shape=shape))
    else:
        c = np.repeat(cols, np.diff(block.ptr)) - origin[1]
        out = sp.coo_matrix((block.val, (r - origin[0], c)), shape=shape).tocsr()
    out.sum_duplicates()
    if drop:
        out.eliminate_zeros()        # entries that cancelled to exactly 0, as scipy drops
    return out


def _chunk_item(split: dict, chunk: int):
    return split.get(chunk)


def _chunk_join(shape, origin, *items) -> sp.csr_matrix:
    """One chunk of C, canonical CSR, from the pieces' entries in it."""
    items = [x for x in items if x is not None]
    if not items:
        return sp.csr_matrix(shape, dtype=np.float64)
    if len(items) == 1:
        r, c, v = items[0]
        r, c = r - origin[0], c - origin[1]
    else:
        r = np.concatenate([x[0] for x in items]) - origin[0]
        c = np.concatenate([x[1] for x in items]) - origin[1]
        v = np.concatenate([x[2] for x in items])
    out = sp.coo_matrix((v, (r, c)), shape=shape).tocsr()
    out.sum_duplicates()
    return out
