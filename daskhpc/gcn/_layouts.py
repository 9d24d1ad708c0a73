"""What a GCN epoch costs on a network, per row partition, and the fastest one.

An epoch is L forward and L backward phases and the dense dW allreduce. Part p's load in
a phase: ``2 nnz_p w`` flops of aggregation (at the model's ``flop_s``) and ``2 n_p
d_{k-1} d_k`` of products with W (at ``dense_flop_s``; ``2 nnz(X_p) d_1`` at layer 1 with
sparse features; twice backward but at layer 1). :func:`epoch_cost` prices an epoch with
a :class:`~daskhpc.comm.CostModel`; ``_setup.choose`` ranks the :data:`LAYOUTS`."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from daskhpc.comm import CostModel, StepCost

from ._plan import epoch_plan, vector_words

#: The row partitions ``--partition auto`` chooses between
LAYOUTS = ("hp", "random")


def epoch_load(s) -> np.ndarray:
    """(2 L phases, K parts): flops each part computes in each phase of an epoch."""
    sparse, dense = epoch_loads(s)
    return sparse + dense


def epoch_loads(s) -> tuple[np.ndarray, np.ndarray]:
    """:func:`epoch_load` split ``(sparse, dense)``: the aggregations and the products with W."""
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
        # H W at the dense rate even for sparse features: W stays in cache and H's rows
        # stream (0.4 ns a flop, as BLAS; the aggregation's scattered rows: 10-20 ns)
        prod = 2.0 * (x_entries if k == 1 else rows * d[k - 1]) * d[k]
        sparse[k - 1] = 2.0 * nnz * s.widths[k - 1]                   # forward, layer k
        dense[k - 1] = prod
        # backward: dW^k, and the input's gradient except at layer 1
        sparse[2 * L - k] = 2.0 * nnz * d[k]
        dense[2 * L - k] = (1.0 if k == 1 else 2.0) * prod
    return sparse, dense


def epoch_cost(s, model: CostModel, owner=None, hosts=None) -> StepCost:
    """Predicted seconds of one full-batch epoch of setup ``s``, with its share of the
    evaluation forward pass (every ``eval_every`` epochs: its rows travel with the
    training pass's, and its phases compute again)."""
    every = int(s.options.eval_every)
    share = 1.0 / every if every > 0 and not s.batches else 0.0   # mini-batch: no pass
    sparse, dense = epoch_loads(s)
    sparse[:s.L] *= 1 + share
    dense[:s.L] *= 1 + share
    cost = model.step(epoch_plan(s, share), sparse, owner=owner, hosts=hosts,
                      dense_load=dense)
    nhosts = len(set(hosts[:max(owner) + 1])) if hosts is not None and owner is not None \
        else s.K
    return cost.plus_comm(model.allreduce(vector_words(s) * s.word_bytes, nhosts))
