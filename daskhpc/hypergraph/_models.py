"""Hypergraph models of the papers, built vectorised from scipy.sparse / sparse.COO inputs."""

from __future__ import annotations

import numba
import numpy as np
import scipy.sparse as sp

from ._hypergraph import Hypergraph


def _as_sparse(A):
    if not sp.issparse(A):
        raise TypeError(f"expected a scipy.sparse matrix, got {type(A).__name__}")
    return A


def column_net(A, net_cost: int = 1, weights: str = "nnz") -> Hypergraph:
    """Column-net model: vertex i per row, net j per column with pins {i : a_ij != 0}.

    Vertex weight is the row's nonzero count (``weights="nnz"``) or 1 (``"unit"``); every
    net costs ``net_cost`` (F for SSGD, so that SOED is the P2P volume in words).

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> A = sp.csr_array([[1, 0, 1], [0, 1, 1]])
    >>> h = column_net(A)
    >>> h.num_vertices, h.num_nets, h.vertex_weights.ravel().tolist()
    (2, 3, [2, 2])

    References
    ----------
    Catalyurek & Aykanat (1999); SSGD paper, section V.
    """
    A = sp.csc_array(_as_sparse(A))
    A.sum_duplicates()
    A.sort_indices()
    # a row's nonzeros counted from the nets' pins (no second conversion, to CSR)
    w = np.bincount(A.indices, minlength=A.shape[0]) if weights == "nnz" else \
        np.ones(A.shape[0], np.int64)
    return Hypergraph(A.shape[0], A.indptr, A.indices, w,
                      np.full(A.shape[1], net_cost, dtype=np.int64), "column-net",
                      {"shape": list(A.shape), "nnz": int(A.nnz)})


def row_net(A, net_cost: int = 1, weights: str = "nnz") -> Hypergraph:
    """Row-net model: vertex j per column, net i per row (column-wise 1D partitioning)."""
    h = column_net(sp.csr_array(_as_sparse(A)).T, net_cost, weights)
    h.name = "row-net"
    h.meta["shape"] = list(A.shape)
    return h


def _coords(X):
    """(N, nnz) int64 coordinates and the shape of a sparse.COO or a (coords, shape) pair."""
    coords, shape = (X.coords, X.shape) if hasattr(X, "coords") and hasattr(X, "shape") else X
    return np.asarray(coords, dtype=np.int64), tuple(int(s) for s in shape)


def tensor_coarse(X, net_cost: int = 1) -> Hypergraph:
    """Coarse-grain model (hypertensor 3.1): one vertex t_m^i and one net n_m^i per index.

    Net n_m^i holds t_m^i and, for every nonzero with i in mode m, the vertices of its other
    indices. Vertex weights have N constraints: w[t_m^i, m] = nnz of slice i of mode m, 0 in
    the other modes. With net cost R, km1 is the exact CP-ALS volume per iteration.

    Vertex (and net) ids are ``offsets[m] + i`` with ``offsets = meta["offsets"]``.
    """
    coords, shape = _coords(X)
    N = coords.shape[0]
    offsets = np.concatenate([[0], np.cumsum(shape)]).astype(np.int64)
    V = int(offsets[-1])
    coords = np.ascontiguousarray(coords)
    # each slice's nonzeros (the fine-grain nets), then its distinct vertices: linear in pins
    net_ptr, pins = _coarse_pins(coords, offsets, *_fine_pins(coords, offsets, V))
    w = np.zeros((V, N), dtype=np.int64)
    for m in range(N):
        w[offsets[m]:offsets[m + 1], m] = np.bincount(coords[m], minlength=shape[m])
    return Hypergraph(V, net_ptr, pins, w, np.full(V, net_cost, np.int64), "tensor-coarse",
                      {"shape": list(shape), "offsets": offsets.tolist(), "nnz": coords.shape[1]})


def tensor_fine(X, net_cost: int = 1) -> Hypergraph:
    """Fine-grain model (hypertensor 3.2), in the single-constraint form the paper recommends.

    One vertex per nonzero (weight 1: one Hadamard product per mode), one net per index of
    every mode (net ``offsets[m] + i`` holds the nonzeros with index i in mode m). The factor
    rows are placed afterwards by :func:`daskhpc.hypergraph.assign_factor_rows`.
    """
    coords, shape = _coords(X)
    N, nnz = coords.shape
    offsets = np.concatenate([[0], np.cumsum(shape)]).astype(np.int64)
    # every (net, nonzero) pair is distinct (a nonzero is in one net per mode, the modes'
    # nets are disjoint): the nets' pins by a counting sort, nonzeros ascending in a net
    net_ptr, pins = _fine_pins(np.ascontiguousarray(coords), offsets, int(offsets[-1]))
    return Hypergraph(nnz, net_ptr, pins, None, np.full(net_ptr.size - 1, net_cost, np.int64),
                      "tensor-fine",
                      {"shape": list(shape), "offsets": offsets.tolist(), "nnz": nnz})


@numba.njit(cache=True, nogil=True)
def _fine_pins(coords, offsets, num_nets):  # pragma: no cover - numba
    N, nnz = coords.shape
    ptr = np.zeros(num_nets + 1, np.int64)
    for m in range(N):
        for e in range(nnz):
            ptr[offsets[m] + coords[m, e] + 1] += 1
    for n in range(num_nets):
        ptr[n + 1] += ptr[n]
    at = ptr[:-1].copy()
    pins = np.empty(N * nnz, np.int64)
    for m in range(N):
        for e in range(nnz):
            n = offsets[m] + coords[m, e]
            pins[at[n]] = e
            at[n] += 1
    return ptr, pins


@numba.njit(cache=True, nogil=True)
def _coarse_pins(coords, offsets, slice_ptr, slice_nnz):  # pragma: no cover - numba
    # Net n (index i of mode m): t_m^i itself and the vertices of every index of the
    # nonzeros of slice i, each once (stamp), ascending.
    N = coords.shape[0]
    V = slice_ptr.size - 1
    stamp = np.full(V, -1, np.int64)
    ptr = np.zeros(V + 1, np.int64)
    for fill in range(2):                  # count, then write
        if fill:
            pins = np.empty(ptr[V], np.int64)
            stamp[:] = -1
        else:
            pins = np.empty(0, np.int64)
        for n in range(V):
            k = ptr[n]
            stamp[n] = n
            if fill:
                pins[k] = n
            k += 1
            for j in range(slice_ptr[n], slice_ptr[n + 1]):
                e = slice_nnz[j]
                for m in range(N):
                    u = offsets[m] + coords[m, e]
                    if stamp[u] != n:
                        stamp[u] = n
                        if fill:
                            pins[k] = u
                        k += 1
            if fill:
                pins[ptr[n]:k].sort()
            else:
                ptr[n + 1] = k
    return ptr, pins


def symmetric_graph(A):
    """Pattern of A + A^T without the diagonal (the graph-partitioning baseline's input)."""
    A = sp.csr_array(_as_sparse(A))
    if A.shape[0] != A.shape[1]:
        raise ValueError(f"the graph model needs a square matrix, got {A.shape[0]} x {A.shape[1]}")
    P = sp.csr_array((np.ones(A.nnz), A.indices, A.indptr), shape=A.shape)
    G = sp.csr_array(P + P.T)
    G.setdiag(0)
    G.eliminate_zeros()
    G.data[:] = 1
    G.sort_indices()
    return G


def stochastic(A, batches: int = 10, batch_size: int | float = 0.1, seed: int = 0,
               self_loops: bool = True) -> Hypergraph:
    """Stochastic hypergraph of sampled mini-batches (GCN paper, Algorithm 3).

    Line 1: draw ``batches`` vertex-induced subgraphs G'_i (uniform vertex sampling without
    replacement, ``batch_size`` vertices or that fraction of them). Line 2: the column-net
    hypergraph H'_i of each. Line 3: merge them: vertices are all of V (so the partition is a
    row partition of A), nets are the union of every batch's nets. Vertex weights are the
    full-batch row nonzero counts, so balance carries over when vertices are equally likely.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> A = sp.random_array((50, 50), density=0.1, random_state=1)
    >>> h = stochastic(A, batches=4, batch_size=20, seed=0)
    >>> h.num_vertices
    50
    """
    A = sp.csr_array(_as_sparse(A))
    n = A.shape[0]
    if A.shape[0] != A.shape[1]:
        raise ValueError("the stochastic model needs a square adjacency matrix")
    if self_loops:
        A = sp.csr_array(A + sp.eye_array(n, format="csr"))
    size = int(round(batch_size * n)) if isinstance(batch_size, float) else int(batch_size)
    size = min(max(size, 1), n)
    rng = np.random.default_rng(seed)
    ptrs, pins, total = [np.zeros(1, np.int64)], [], 0
    for _ in range(batches):
        keep = np.sort(rng.choice(n, size=size, replace=False))
        sub = sp.csc_array(A[keep][:, keep])  # H'_i: nets are sub's columns
        sub.sort_indices()
        counts = np.diff(sub.indptr)
        nonempty = counts > 0
        ptrs.append(total + np.cumsum(counts[nonempty]))
        pins.append(keep[sub.indices])
        total += sub.nnz
    net_ptr = np.concatenate(ptrs)
    w = np.diff(A.indptr)
    return Hypergraph(n, net_ptr, np.concatenate(pins) if pins else np.zeros(0, np.int64), w,
                      None, "stochastic",
                      {"batches": batches, "batch_size": size, "seed": seed, "shape": [n, n]})
