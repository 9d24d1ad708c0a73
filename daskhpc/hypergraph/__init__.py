"""Hypergraph models of sparse matrices and tensors, their partitioners and cut metrics.

No dask here: everything runs on a laptop without a cluster.

Examples
--------
>>> import scipy.sparse as sp
>>> import daskhpc.hypergraph as hg
>>> A = sp.random_array((300, 200), density=0.03, random_state=0, format="csr")
>>> h = hg.column_net(A)
>>> p = hg.partition(h, 4, "random", seed=0)
>>> sorted(p.metrics())[:3]
['balance_notes', 'balance_possible', 'balanced']
"""

from ._auto import choose_partitioner
from ._finegrain import assign_factor_rows, fine_grain_volume
from ._hypergraph import Hypergraph
from ._metrics import (balance_report, connectivity, connectivity_sets, net_parts, imbalance,
                       max_part_weight, metrics, part_weights)
from ._models import column_net, row_net, stochastic, symmetric_graph, tensor_coarse, tensor_fine
from ._partfile import read_pair_file, read_part_file, write_pair_file
from ._partition import OBJECTIVES, Partition, partition, partitioners, register_partitioner
from ._recursive import recursive_bisection
from ._refine import refine

__all__ = [
    "Hypergraph", "Partition", "partition", "partitioners", "register_partitioner", "OBJECTIVES",
    "column_net", "row_net", "tensor_coarse", "tensor_fine", "stochastic", "symmetric_graph",
    "assign_factor_rows", "fine_grain_volume", "recursive_bisection",
    "metrics", "connectivity", "connectivity_sets", "net_parts", "part_weights", "imbalance",
    "max_part_weight", "balance_report",
    "read_part_file", "read_pair_file", "write_pair_file", "choose_partitioner", "refine",
]
