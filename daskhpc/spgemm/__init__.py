"""Memory-constrained batched 2D/3D sparse SUMMA SpGEMM (BatchedSumma3D) on Dask.

C = A·B on a ``q x q x l`` grid of cells placed on Dask workers, in ``b`` batches of
C's columns chosen by Symbolic3D from a per-worker memory budget; a scheduler plugin
admits batch ``t + w`` only once batch ``t`` has been consumed. :func:`plan` is
Symbolic3D and every step's volume without a cluster. ``import daskhpc.spgemm`` loads
no dask.

Examples
--------
>>> import daskhpc as dh
>>> from daskhpc import spgemm
>>> client = dh.connect(n_workers=2)                                # doctest: +SKIP
>>> A = dh.datasets.cora().adjacency
>>> res = spgemm.multiply(A, client=client, grid="1x1x2", consume="count",
...                       memory_per_worker="64MB")                   # doctest: +SKIP
>>> res.value["nnz"] == (A @ A).nnz                                  # doctest: +SKIP
True

References
----------
Hussain, Selvitopi, Buluç, Azad. Communication-Avoiding and Memory-Constrained
Sparse Matrix-Matrix Multiplication at Extreme Scale. IPDPS 2021.
"""

from ._api import multiply, plan
from ._serial import serial_multiply
from ._apps import aat, column_stochastic, mcl_step, triangle_count
from ._block import CscBlock
from ._consumers import (Consumer, Count, Keep, MaskedSum, Prune, Write, load_batch,
                         parse_consumer)
from ._grid import Grid, Layout
from ._local import local_multiply, local_symbolic, merge
from ._policy import BatchPolicy
from ._result import SpgemmResult
from ._setup import Setup, prepare
from ._symbolic import batch_count, batch_lower_bound, grid_symbolic

__all__ = [
    "BatchPolicy", "Consumer", "Count", "CscBlock", "Grid", "Keep", "Layout", "MaskedSum",
    "Prune", "SpgemmResult", "Write", "aat", "batch_count", "batch_lower_bound",
    "column_stochastic", "grid_symbolic", "load_batch", "local_multiply", "local_symbolic",
    "mcl_step", "merge", "multiply", "parse_consumer", "plan", "triangle_count",
    "serial_multiply", "prepare", "Setup",
]
