"""Node tables beside a graph: sparse binary features (SNAP "musae" ``features.json``) and
class labels (a CSV with a header, such as ``target.csv``)."""

from __future__ import annotations

import csv
import io
import itertools
import json

import numpy as np
import scipy.sparse as sp

from ._common import csr, read_bytes
from ._errors import ReadError


def read_node_features(path, *, num_nodes: int | None = None,
                       num_features: int | None = None) -> sp.csr_array:
    """Read ``{"node": [feature ids]}`` JSON into an n x f float64 0/1 CSR matrix.

    Parameters
    ----------
    path : str or os.PathLike
    num_nodes : int, optional
        n; default the largest node id + 1. Nodes absent from the file get no feature.
    num_features : int, optional
        f; default the largest feature id + 1.

    Examples
    --------
    >>> X = read_node_features("facebook_page_page/features.json")   # doctest: +SKIP
    >>> X.shape, X.nnz                                              # doctest: +SKIP
    ((22470, 4714), 314583)
    """
    text = read_bytes(path).decode("utf-8", errors="replace")
    try:
        table = json.loads(text)
    except json.JSONDecodeError as e:
        raise ReadError(path, e.lineno, f"not valid JSON ({e.msg})") from None
    if not isinstance(table, dict):
        raise ReadError(path, 1, "expected a JSON object {node id: [feature ids]}")

    def bad(key, problem: str) -> ReadError:       # at the line of node ``key``
        at = text.find(f'"{key}"')
        return ReadError(path, None if at < 0 else text.count("\n", 0, at) + 1, problem)

    keys = list(table)
    nodes = np.full(len(keys), -1, np.int64)
    for i, key in enumerate(keys):
        if not (key.isdigit() and key.isascii()):
            raise bad(key, f"node id {key!r} is not a non-negative integer")
        nodes[i] = int(key)
        if not isinstance(table[key], list):
            raise bad(key, f"node {key}: expected a list of feature ids")
    lens = np.fromiter((len(table[k]) for k in keys), np.int64, len(keys))
    flat = list(itertools.chain.from_iterable(table[k] for k in keys))
    ok = np.fromiter((type(v) is int and v >= 0 for v in flat), bool, len(flat))
    if not ok.all():
        node = keys[int(np.searchsorted(np.cumsum(lens), int(np.argmin(ok)), side="right"))]
        raise bad(node, f"node {node}: feature ids must be non-negative integers, found "
                        f"{flat[int(np.argmin(ok))]!r}")
    cols = np.asarray(flat, np.int64)
    n = int(nodes.max()) + 1 if nodes.size else 0
    if num_nodes is not None:
        if nodes.size and nodes.max() >= num_nodes:
            key = keys[int(np.argmax(nodes))]
            raise bad(key, f"node id {key} is not below the node count {num_nodes}")
        n = int(num_nodes)
    f = int(cols.max()) + 1 if cols.size else 0
    if num_features is not None:
        if cols.size and cols.max() >= num_features:
            node = keys[int(np.searchsorted(np.cumsum(lens), int(np.argmax(cols)), side="right"))]
            raise bad(node, f"node {node}: feature id {int(cols.max())} is not below "
                            f"{num_features}")
        f = int(num_features)
    rows = np.repeat(nodes, lens)
    X = csr(rows, cols, np.ones(cols.size), (n, f))
    X.data[:] = 1.0
    return X


def read_node_labels(path, *, id_column: str = "id", label_column: str | None = None,
                     num_nodes: int | None = None) -> tuple[np.ndarray, list[str]]:
    """Read one label per node from a CSV with a header line.

    Parameters
    ----------
    path : str or os.PathLike
    id_column, label_column : str
        Columns of the node id (non-negative integers) and of the class (default the
        last); classes are numbered in the sorted order of their names.
    num_nodes : int, optional
        Every node ``0..num_nodes-1`` must have exactly one row; default: the ids found
        must be exactly ``0..n-1``.

    Returns
    -------
    labels, classes : numpy.ndarray, list of str
        int64 class id of every node; ``classes[c]`` is the name of class c.

    Examples
    --------
    >>> y, classes = read_node_labels("facebook_page_page/target.csv")  # doctest: +SKIP
    >>> classes                                                        # doctest: +SKIP
    ['company', 'government', 'politician', 'tvshow']
    """
    text = read_bytes(path).decode("utf-8", errors="replace")
    reader = csv.reader(io.StringIO(text))
    try:
        head = next(reader)
    except StopIteration:
        raise ReadError(path, None, "empty file") from None
    except csv.Error as e:
        raise ReadError(path, 1, f"bad CSV ({e})") from None
    head = [h.strip() for h in head]
    label_column = head[-1] if label_column is None else label_column
    for col in (id_column, label_column):
        if col not in head:
            raise ReadError(path, 1, f"no column {col!r} in the header {head}")
    ic, lc = head.index(id_column), head.index(label_column)
    ids, names, where = [], [], []
    try:
        for row in reader:
            if not row:
                continue
            line = reader.line_num
            if len(row) != len(head):
                raise ReadError(path, line, f"expected {len(head)} fields like the header, "
                                f"found {len(row)}")
            tok = row[ic].strip()
            if not (tok.isdigit() and tok.isascii()):
                raise ReadError(path, line, f"node id {tok!r} is not a non-negative integer")
            ids.append(int(tok))
            names.append(row[lc].strip())
            where.append(line)
    except csv.Error as e:
        raise ReadError(path, reader.line_num, f"bad CSV ({e})") from None
    if not ids:
        raise ReadError(path, None, "a header but no rows")
    ids_a = np.asarray(ids, np.int64)
    n = int(num_nodes) if num_nodes is not None else int(ids_a.max()) + 1
    order = np.argsort(ids_a, kind="stable")
    rep = np.flatnonzero(ids_a[order][1:] == ids_a[order][:-1])
    if rep.size:
        second = int(order[rep[0] + 1])
        raise ReadError(path, where[second], f"node {ids[second]} has a second row")
    if ids_a.max() >= n:
        r = int(np.argmax(ids_a))
        raise ReadError(path, where[r], f"node id {ids[r]} is not below the node count {n}")
    if ids_a.size != n:
        missing = int(np.setdiff1d(np.arange(n), ids_a)[0])
        raise ReadError(path, None, f"node {missing} has no row ({ids_a.size} rows for "
                        f"{n} nodes)")
    classes, codes = np.unique(np.asarray(names, dtype=object).astype(str), return_inverse=True)
    labels = np.empty(n, np.int64)
    labels[ids_a] = codes.reshape(-1)
    return labels, [str(c) for c in classes]
