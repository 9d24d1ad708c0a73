"""CSV edge lists (``edges.csv`` of the SNAP "musae" data sets): ``source,target`` per line,
an optional header; the ids are kept as they are (shared with the node tables)."""

from __future__ import annotations

import numpy as np

from ._common import Lines, SparseInput, as_int, csr, parses, read_bytes
from ._errors import ReadError


def read_edge_csv(path, *, directed: bool = True, symmetrize: bool = False,
                  num_nodes: int | None = None, header: bool | None = None) -> SparseInput:
    """Read a ``source,target`` CSV edge list into a square 0/1 CSR adjacency matrix.

    Parameters
    ----------
    path : str or os.PathLike
    directed, symmetrize : bool, default True, False
        ``directed=False`` or ``symmetrize=True`` stores every edge both ways.
    num_nodes : int, optional
        Number of nodes (ids must be below it); default: the largest id + 1.
    header : bool or None, default None
        Whether the first data line is a header (default: if a token is not a number).

    Returns
    -------
    SparseInput
        ``matrix`` (n x n, float64 pattern: a repeated edge is stored once, self loops
        are kept), ``index_maps == (None, None)`` (ids are kept), ``meta`` with
        ``header`` (column names or None), ``directed``, ``edge_lines``,
        ``duplicate_edges`` and ``self_loops``.

    Examples
    --------
    >>> g = read_edge_csv("facebook_page_page/edges.csv", symmetrize=True)  # doctest: +SKIP
    >>> g.shape, g.meta["header"]                                          # doctest: +SKIP
    ((22470, 22470), ['id_1', 'id_2'])
    """
    raw = read_bytes(path)
    if b'"' in raw:
        k = raw[:raw.index(b'"')].count(b"\n")
        raise ReadError(path, k + 1, "quoted field in an edge list (ids must be plain integers)")
    # Same-length replacement: byte offsets and line numbers do not move.
    lines = Lines(path, raw.replace(b",", b" "))
    idx = lines.data_lines(b"#%")
    if idx.size == 0:
        raise ReadError(path, None, "empty file")
    names = None
    if header or (header is None and not all(parses(t, 1) for t in lines.tokens(idx[0]))):
        names = [t.decode("utf-8", errors="replace") for t in lines.tokens(idx[0])]
        if len(names) != 2:
            raise lines.error(idx[0], f"expected a header of 2 columns, found {len(names)}")
        idx = idx[1:]
        if idx.size == 0:
            raise ReadError(path, None, "empty file: a header but no edges")
    k = lines.first_bad(idx, lines.ntok[idx] != 2)
    if k is not None:
        raise lines.error(k, f"expected 2 fields (source,target), found {lines.ntok[k]}")
    ids = as_int(lines, idx.repeat(2), lines.numbers(idx), "node id").reshape(-1, 2)
    lines.check(idx, (ids < 0).any(axis=1), lambda r: "node ids must be non-negative")
    n = int(ids.max()) + 1
    if num_nodes is not None:
        lines.check(idx, (ids >= num_nodes).any(axis=1), lambda r: f"node id "
                    f"{int(ids[r].max())} is not below the node count {num_nodes}")
        n = int(num_nodes)
    src, dst = ids[:, 0], ids[:, 1]
    arcs = csr(src, dst, np.ones(src.size), (n, n))
    duplicates = src.size - arcs.nnz
    undirected = symmetrize or not directed
    if undirected:
        arcs = csr(np.concatenate((src, dst)), np.concatenate((dst, src)),
                   np.ones(2 * src.size), (n, n))
    arcs.data[:] = 1.0
    meta = {"header": names, "directed": not undirected, "edge_lines": int(src.size),
            "duplicate_edges": int(duplicates), "self_loops": int((src == dst).sum())}
    return SparseInput(str(path), "edges", matrix=arcs, index_maps=(None, None), meta=meta)
