"""``daskhpc plan spgemm``: Symbolic3D, b and every step's volume without a cluster.

No dask here.

Examples
--------
>>> import scipy.sparse as sp
>>> a = sp.random(200, 200, density=0.05, random_state=0, format="csr")
>>> out = plan(a, a, grid="2x2x2", memory_per_worker="1MB")
>>> out["batches"], sorted(out["steps"])
(1, ['a_bcast', 'b_bcast', 'fiber', 'symbolic'])
"""

from __future__ import annotations

import math

from daskhpc.comm import CostModel
from daskhpc.spgemm._prep import check_inputs, permutations
from daskhpc.spgemm._grid import Grid
from daskhpc.spgemm._memory import parse_bytes
from daskhpc.spgemm._plan import WORD_BYTES, WORDS_PER_UNIT, step_plans, table2
from daskhpc.spgemm._symbolic import (BYTES_PER_UNMERGED, batch_lower_bound, batches_for,
                                      grid_symbolic)

__all__ = ["plan"]


def plan(a, b=None, *, grid="1x1x1", memory_per_worker=None, workers: int | None = None,
         batches="auto", seed: int | None = 0, r: float = BYTES_PER_UNMERGED,
         alpha: float | None = None, beta: float | None = None) -> dict:
    """The batch count and per-step communication of BatchedSumma3D, symbolically.

    Parameters
    ----------
    a, b : scipy sparse
        A and B (``b=None``: A·A).
    grid : "QxQxL" or Grid
        Any size: thousands of cells are fine.
    memory_per_worker : bytes or "512MB", optional
        Without it b = 1 (unless ``batches`` is given).
    workers : int, optional
        Workers the cells are dealt to; default one cell per worker.
    batches : "auto" or int
    seed : int or None
        The random permutation the run would use.
    alpha, beta : float, optional
        Message latency (s) and inverse bandwidth (s/byte); defaults from
        :class:`~daskhpc.comm.CostModel`.

    Returns
    -------
    dict
        ``grid``, ``p``, ``batches`` (Algorithm 3 line 12), ``batches_lower_bound``
        (eq. (2)), ``steps`` (one Plan report per step), ``table2``,
        ``estimate_s`` (alpha-beta time per step and in total) and ``quality``.
    """
    a, b = check_inputs(a, a if b is None else b)
    g = grid if isinstance(grid, Grid) else Grid.parse(grid)
    nworkers = g.p if workers is None else int(workers)
    cells_per_worker = math.ceil(g.p / nworkers)
    pr, pk, pc = permutations((a.shape[0], a.shape[1], b.shape[1]), seed)
    ap, bp = a[pr][:, pk], b[pk][:, pc]
    sym = grid_symbolic(ap, bp, g, 1)
    mem = None if memory_per_worker is None else parse_bytes(memory_per_worker)
    out = {"grid": str(g), "p": g.p, "workers": nworkers}
    if batches == "auto":
        nb = 1 if mem is None else batches_for(
            sym.max_unmerged, int(sym.nnz_a.max()), int(sym.nnz_b.max()),
            mem / cells_per_worker, r, str(g))
    else:
        nb = int(batches)
    if mem is not None:
        out["memory_per_worker"] = mem
        out["batches_lower_bound"] = batch_lower_bound(sym, mem * nworkers, r)
    out["symbolic"] = {"max_nnz_c": sym.max_unmerged, "max_nnz_a": int(sym.nnz_a.max()),
                       "max_nnz_b": int(sym.nnz_b.max()), "r": r}
    if nb > 1:
        sym = grid_symbolic(ap, bp, g, nb)
    out["batches"] = nb
    cost = CostModel(*(x for x in (alpha, beta) if x is not None)) \
        if alpha is not None and beta is not None else CostModel()
    plans = step_plans(sym)
    out["steps"] = {name: pl.report() for name, pl in plans.items()}
    out["table2"] = table2(sym)
    est = {name: cost.plan_time(pl) for name, pl in plans.items()}
    out["estimate_s"] = {**est, "total": sum(est.values()), **cost.as_dict()}
    out["unit"] = {"unit": "nonzeros", "words_per_unit": WORDS_PER_UNIT,
                   "word_bytes": WORD_BYTES}
    out["quality"] = {"nnz_c": sym.nnz_c, "flops": sym.flops,
                      "compression_factor": sym.flops / max(sym.nnz_c, 1),
                      "max_unmerged_per_cell": sym.max_unmerged,
                      "sum_layer_nnz": sym.sum_layer_nnz}
    return out
