"""What a multiply costs on a network, per process grid, and the grids to choose from.

:func:`multiply_cost` prices the broadcasts, the flops (2 a product, ``MERGE_FLOPS`` a
merged nonzero) and the fiber reduction with a :class:`~daskhpc.comm.CostModel`;
:func:`grids` lists the grids ``--grid auto`` chooses between.
"""

from __future__ import annotations

import math

import numpy as np

from daskhpc.comm import CostModel, StepCost

from ._grid import Grid
from ._plan import step_plans

#: flops of a nonzero into or out of an accumulator (measured 12-30 ns on one core)
MERGE_FLOPS = 2

#: the steps of one multiply (the symbolic step runs once per run)
STEPS = ("a_bcast", "b_bcast", "fiber")


def grids(K: int) -> list[Grid]:
    """Every ``q x q x l`` grid of exactly ``K`` cells, fewest rows first."""
    return [Grid(q, K // (q * q)) for q in range(1, math.isqrt(K) + 1) if K % (q * q) == 0]


def multiply_cost(sym, model: CostModel, owner=None, hosts=None) -> StepCost:
    """Predicted seconds of one multiply (all its batches) from its symbolic counts."""
    plans = step_plans(sym)
    g = sym.grid
    per_cell = sym.flops_cell.sum(axis=0)              # (q, q, l)
    # Merge-Fiber's input: the pieces the other layers send to a cell
    incoming = sym.layer.sum(axis=0).sum(axis=2) - np.einsum("ijkk->ijk",
                                                              sym.layer.sum(axis=0))
    merged = sym.unmerged.sum(axis=0) + incoming
    load = np.zeros(g.p)
    for i, j, k in g.cells():
        load[g.rank(i, j, k)] = 2.0 * per_cell[i, j, k] + MERGE_FLOPS * merged[i, j, k]
    total = model.step(None, load, owner=owner, hosts=hosts)
    for name in STEPS:
        cost = model.step(plans[name], owner=owner, hosts=hosts, broadcast=name != "fiber")
        total = total.then(cost)
    return total
