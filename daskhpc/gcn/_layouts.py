"""What a GCN epoch costs on a network, per row partition, and the fastest one.

An epoch is L forward phases (layer k: the exchange of H^{k-1} or H^{k-1} W^k rows, then
the aggregation A_hat H and the transform H W) and L backward phases (layer k: G^k rows,
then the products for G^{k-1} and dW^k), then the dense allreduce of the dW and b
(recursive doubling over the hosts). Part p's load in a phase is its rows' share:
``2 nnz_p w`` flops for the sparse product of w-wide rows and ``2 n_p d_{k-1} d_k`` for
the dense one (``2 nnz(X_p) d_1`` at layer 1 with sparse features; twice that backward,
dW and the input's gradient, except at layer 1). The products with W are priced at the
model's ``dense_flop_s`` (a BLAS product), the aggregations at ``flop_s``. :func:`epoch_cost`
prices an epoch with a :class:`~daskhpc.comm.CostModel`; :func:`~daskhpc.gcn._setup.choose` prepares every
layout of :data:`LAYOUTS` and ranks them (``--partition auto`` runs the first).

Examples
--------
>>> from daskhpc.comm import network_model
>>> from daskhpc.gcn._setup import choose
>>> name, s, rows = choose("cora", 4, network_model("ethernet-10g"))  # doctest: +SKIP
>>> [r["layout"] for r in rows]                                     # doctest: +SKIP
['hp', 'random']
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from daskhpc.comm import CostModel, StepCost

from ._plan import epoch_plan, vector_words

__all__ = ["LAYOUTS", "epoch_load", "epoch_loads", "epoch_cost"]

#: The row partitions ``--partition auto`` chooses between
LAYOUTS = ("hp", "random")


def epoch_load(s) -> np.ndarray:
    """(2 L phases, K parts): flops each part computes in each phase of an epoch."""
    sparse, dense = epoch_loads(s)
    return sparse + dense


def epoch_loads(s) -> tuple[np.ndarray, np.ndarray]:
    """:func:`epoch_load` split: ``(sparse, dense)`` flops, the aggregations A_hat H and
    the products with W (at a BLAS rate)."""
    K, d, L = s.K, s.dims, s.L
    parts = s.assignment.parts
    A = s.graph.A
    nnz = np.bincount(parts, weights=np.diff(A.indptr), minlength=K)
    rows = np.bincount(parts, minlength=K).astype(float)
    X = s.graph.X
    # layer 1 multiplies the features: by their nonzeros where they are sparse
    x_entries = np.bincount(parts, weights=np.diff(X.indptr), minlength=K) \
        if sp.issparse(X) else rows * d[0]
    sparse, dense = np.zeros((2 * L, K)), np.zeros((2 * L, K))
    for k in range(1, L + 1):
        # H W at the dense rate even where H (layer 1's features) is stored sparse: W
        # stays in cache and H's rows stream, unlike the aggregation's scattered rows
        # (a CSR of 64 entries a row times a 64 x 16 W: 0.4 ns a flop, as a BLAS GEMM;
        # the aggregation's CSR kernel: 10-20 ns)
        prod = 2.0 * (x_entries if k == 1 else rows * d[k - 1]) * d[k]
        sparse[k - 1] = 2.0 * nnz * s.widths[k - 1]                   # forward, layer k
        dense[k - 1] = prod
        # backward: dW^k, and the input's gradient except at layer 1
        sparse[2 * L - k] = 2.0 * nnz * d[k]
        dense[2 * L - k] = (1.0 if k == 1 else 2.0) * prod
    return sparse, dense


def epoch_cost(s, model: CostModel, owner=None, hosts=None) -> StepCost:
    """Predicted seconds of one full-batch epoch of setup ``s``."""
    sparse, dense = epoch_loads(s)
    cost = model.step(epoch_plan(s), sparse, owner=owner, hosts=hosts, dense_load=dense)
    nhosts = len(set(hosts[:max(owner) + 1])) if hosts is not None and owner is not None \
        else s.K
    return cost.plus_comm(model.allreduce(vector_words(s) * s.word_bytes, nhosts))
