"""What a multiply costs on a network, per process grid, and the grids to choose from.

A multiply broadcasts A and B blocks along the layers' rows and columns (every batch),
multiplies (``2`` flops per product, per cell), and reduces the layers' partial C along
the fibers. :func:`multiply_cost` prices that with a :class:`~daskhpc.comm.CostModel`
(the broadcasts as keys a worker fetches once for all its cells); :func:`grids` lists
the ``q x q x l`` grids of K cells that ``--grid auto`` chooses between.

Examples
--------
>>> [str(g) for g in grids(16)]
['1x1x16', '2x2x4', '4x4x1']
"""

from __future__ import annotations

import math

import numpy as np

from daskhpc.comm import CostModel, StepCost

from ._grid import Grid
from ._plan import step_plans

__all__ = ["grids", "multiply_cost"]

#: the steps of one multiply (the symbolic step runs once per run, not per multiply)
STEPS = ("a_bcast", "b_bcast", "fiber")


def grids(K: int) -> list[Grid]:
    """Every ``q x q x l`` grid of exactly ``K`` cells, fewest rows first."""
    return [Grid(q, K // (q * q)) for q in range(1, math.isqrt(K) + 1) if K % (q * q) == 0]


def multiply_cost(sym, model: CostModel, owner=None, hosts=None) -> StepCost:
    """Predicted seconds of one multiply (all its batches) from its symbolic counts."""
    plans = step_plans(sym)
    g = sym.grid
    per_cell = sym.flops_cell.sum(axis=0)              # (q, q, l)
    load = np.zeros(g.p)
    for i, j, k in g.cells():
        load[g.rank(i, j, k)] = 2.0 * per_cell[i, j, k]
    total = model.step(None, load, owner=owner, hosts=hosts)
    for name in STEPS:
        cost = model.step(plans[name], owner=owner, hosts=hosts, broadcast=name != "fiber")
        total = total.then(cost)
    return total
