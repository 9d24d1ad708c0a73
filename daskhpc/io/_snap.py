"""SNAP style edge lists (``.txt``, ``.txt.gz``, ``.edges``, ``.el``): ``source target
[third]`` integer ids per line, tab or space separated; ``#`` and ``%`` lines comments."""

from __future__ import annotations

import numpy as np

from ._common import Lines, SparseInput, as_int, check_finite, csr, dense_ids, read_bytes
from ._errors import ReadError


#: What ``values=`` may do with a third column.
VALUES = ("ignore", "weights")


def read_snap(path, *, directed: bool = True, symmetrize: bool = False,
              header: bool | None = None, values: str = "ignore") -> SparseInput:
    """Read an edge list into a square 0/1 CSR adjacency matrix.

    Node ids are re-indexed densely (sorted unique ids of both columns -> ``0..n-1``,
    ``index_maps == (ids, ids)``, or ``(None, None)`` when already dense). A repeated edge
    is stored once with value 1.0; self loops are kept. With ``header=None`` a first line
    ``n m`` (node and edge counts, as in email-Enron) is a header when exactly ``m`` edge
    lines follow and every id is below ``n``: then the ``n`` nodes keep the file's
    numbering and ``meta["header_detected"]`` is True.

    Parameters
    ----------
    path : str or os.PathLike
    directed, symmetrize : bool, default True, False
        ``directed=False`` or ``symmetrize=True`` stores every edge both ways.
    header : bool or None, default None
        Force (True) or forbid (False) reading the first line as ``n m``.
    values : {"ignore", "weights"}
        A third column (a timestamp in SNAP's temporal networks) is kept in
        ``meta["third_column"]`` (``"ignore"``), or gives the matrix values, repeated edges
        summed (``"weights"``; the CLI's ``--format snap:weights``).

    Returns
    -------
    SparseInput
        ``matrix`` (n x n), ``index_maps``, and ``meta`` with ``header_detected``,
        ``directed``, ``edge_lines``, ``duplicate_edges``, ``columns``, with 3 columns
        ``values`` and ``third_column``, and ``looks_undirected`` (:func:`undirected_hint`).

    Examples
    --------
    >>> g = read_snap("email-Enron.txt.gz")                  # doctest: +SKIP
    >>> g.shape, g.nnz, g.meta["header_detected"]            # doctest: +SKIP
    ((36692, 36692), 367662, True)
    """
    if values not in VALUES:
        raise ReadError(path, None, f"unknown edge values {values!r}; choose one of "
                        f"{', '.join(VALUES)}")
    lines = Lines(path, read_bytes(path))
    idx = lines.data_lines(b"#%")
    if idx.size == 0:
        raise ReadError(path, None, "empty file")
    ntok = lines.ntok[idx]
    # the width is the second line's: the first may be an "n m" count line
    width = int(ntok[1]) if idx.size > 1 and ntok[1] in (2, 3) else int(ntok[0])
    bad = (ntok != width) | ((ntok != 2) & (ntok != 3))
    lead = width == 3 and ntok[0] == 2 and header is not False
    if lead:
        bad[0] = False             # checked as a header below
    k = lines.first_bad(idx, bad)
    if k is not None:
        found = int(lines.ntok[k])
        if width in (2, 3) and found in (2, 3):
            like = idx[1] if idx.size > 1 and k != idx[1] else idx[0]
            raise lines.error(k, f"expected {width} columns like line {like + 1}, found "
                              f"{found}")
        raise lines.error(k, f"expected 2 or 3 columns (source target [weight or "
                          f"timestamp]), found {found}")
    third = None
    if width == 3:
        body = idx[1:] if lead else idx
        table = lines.numbers(body).reshape(-1, 3)
        pairs = table[:, :2]
        third = table[:, 2].copy()
        if lead:
            pairs = np.concatenate((lines.numbers(idx[:1]).reshape(1, 2), pairs))
            third = np.concatenate(([np.nan], third))
    else:
        pairs = lines.numbers(idx)
    ids = as_int(lines, idx.repeat(2), pairs.reshape(-1), "node id").reshape(-1, 2)
    lines.check(idx, (ids < 0).any(axis=1), lambda r: "node ids must be non-negative integers")

    has_header = _header(lines, idx, ids, header)
    if lead and not has_header:
        raise lines.error(idx[0], f"expected 3 columns like line {idx[1] + 1}, found 2 "
                          f"(and not an 'n m' count line)")
    if third is not None:
        third = third[1:] if has_header else third
        if values == "weights":
            check_finite(lines, idx[1:] if has_header else idx, third, "edge weight")
    if has_header:
        n = int(ids[0, 0])
        src, dst = ids[1:, 0], ids[1:, 1]
        id_map = None
    else:
        both = np.concatenate((ids[:, 0], ids[:, 1]))
        id_map, dense = dense_ids(both)
        src, dst = dense[:len(ids)], dense[len(ids):]
        n = id_map.size if id_map is not None else int(both.max()) + 1

    weights = third if values == "weights" and third is not None else np.ones(src.size)
    arcs = csr(src, dst, weights, (n, n))
    duplicates = src.size - arcs.nnz
    undirected = symmetrize or not directed
    if undirected:
        arcs = csr(np.concatenate((src, dst)), np.concatenate((dst, src)),
                   np.concatenate((weights, weights)), (n, n))
    if weights is not third:
        arcs.data[:] = 1.0
    meta = {"header_detected": has_header, "directed": not undirected,
            "edge_lines": int(src.size), "duplicate_edges": int(duplicates),
            "columns": width}
    if not undirected:
        hint = undirected_hint(_declared(lines), src, dst)
        if hint:
            meta["looks_undirected"] = hint
    if third is not None:
        meta.update(values=values, third_column=third)
    return SparseInput(str(path), "snap", matrix=arcs, index_maps=(id_map, id_map), meta=meta)


def _declared(lines: Lines, first: int = 20) -> str | None:
    """What the file's leading comments say: ``"undirected"``, ``"directed"`` or None."""
    comments = np.flatnonzero(np.isin(lines.first, np.frombuffer(b"#%", np.uint8)))[:first]
    text = b" ".join(lines.data[lines.starts[k]:lines.ends[k]] for k in comments).lower()
    if b"undirected" in text:
        return "undirected"
    return "directed" if b"directed" in text else None


def undirected_hint(declared: str | None, src: np.ndarray, dst: np.ndarray) -> str | None:
    """Why an edge list read as directed is probably an undirected graph, or None: no edge
    is also listed reversed, and the comments say undirected or every edge goes from the
    lower id to the higher (or every one the reverse). A note, not a change."""
    off = src != dst
    if not off.any() or declared == "directed":
        return None
    s, d = src[off], dst[off]
    if (s < d).all() or (s > d).all():
        way = "lower node id to the higher" if s[0] < d[0] else "higher node id to the lower"
        return f"every edge goes from the {way}, none reversed"
    if declared != "undirected":
        return None
    n = int(max(s.max(), d.max())) + 1
    arcs = csr(s, d, np.ones(s.size), (n, n))
    if arcs.multiply(arcs.T).count_nonzero():
        return None                     # some edges are there both ways
    return "its header says undirected, and every edge is listed in one direction only"


def _header(lines: Lines, idx: np.ndarray, ids: np.ndarray, header: bool | None) -> bool:
    """Whether the first data line is an ``n m`` count line (see read_snap)."""
    if header is False:
        return False
    n, m = int(ids[0, 0]), int(ids[0, 1])
    rest = ids[1:]
    fits_count = rest.shape[0] == m
    fits_ids = rest.size == 0 or int(rest.max()) < n
    if header is None:
        return n > 0 and fits_count and fits_ids
    if not fits_count:
        raise lines.error(idx[0], f"header announces {m} edges, the file holds {rest.shape[0]}")
    if not fits_ids:
        r = int(np.flatnonzero((rest >= n).any(axis=1))[0]) + 1
        raise lines.error(idx[r], f"node id {int(ids[r].max())} is not below the "
                          f"header's node count {n}")
    return True
