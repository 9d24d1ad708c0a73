"""Graph partitioning baseline (GCN paper, section 5: GP against HP) with Mt-KaHyPar's graph
mode: the ``graph=`` given, else the clique expansion of the hypergraph's nets."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ._hypergraph import Hypergraph
from ._mtkahypar import _context, _initializer
from ._prepare import combined_weights


def clique_expansion(h: Hypergraph, max_net_size: int = 1000):
    """Symmetric graph with an edge between vertices that share a net (weight: how many)."""
    keep = (h.net_sizes >= 2) & (h.net_sizes <= max_net_size)
    net_of_pin = h.net_of_pin()
    mask = keep[net_of_pin]
    B = sp.csr_array((np.ones(int(mask.sum())), (h.pins[mask], net_of_pin[mask])),
                     shape=(h.num_vertices, h.num_nets))
    G = sp.csr_array(B @ B.T)
    G.setdiag(0)
    G.eliminate_zeros()
    return G


def partition_graph(h: Hypergraph, nparts: int, *, epsilon: float = 0.03, seed: int = 0,
                    threads: int = 1, graph=None, max_net_size: int = 1000, **_) -> np.ndarray:
    """Edge-cut graph partition of ``graph`` (or the clique expansion of ``h``)."""
    import mtkahypar

    G = clique_expansion(h, max_net_size) if graph is None else sp.csr_array(graph)
    if G.shape != (h.num_vertices, h.num_vertices):
        raise ValueError(f"graph is {G.shape[0]} x {G.shape[1]} for {h.num_vertices} vertices")
    upper = sp.triu(G, k=1, format="coo")
    init = _initializer(threads)
    ctx = _context(init, nparts, "cut", epsilon, "deterministic")
    mtkahypar.set_seed(int(seed))
    edges = list(zip(upper.row.tolist(), upper.col.tolist()))
    ew = np.maximum(np.rint(upper.data), 1).astype(np.int64).tolist()
    g = init.create_graph(ctx, h.num_vertices, len(edges), edges, combined_weights(h).tolist(), ew)
    return np.asarray(g.partition(ctx).get_partition(), dtype=np.int64)
