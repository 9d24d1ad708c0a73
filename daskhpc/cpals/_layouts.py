"""What a CP-ALS iteration costs on a network, per layout, and the fastest one.

In mode n every part computes its MTTKRP rows (``2 N R`` flops a nonzero), owners solve
their rows (``2 R^2`` a row), rows are folded and expanded and the Grams all-reduced.
:func:`iteration_cost` prices that with a :class:`~daskhpc.comm.CostModel`;
``_setup.choose`` ranks the :data:`LAYOUTS`."""

from __future__ import annotations

import numpy as np

from daskhpc.comm import CostModel, StepCost

#: (grain, partition) of every layout ``--partition auto`` chooses between
LAYOUTS = (("fine", "hp"), ("fine", "random"), ("coarse", "hp"), ("coarse", "block"))


def layout_name(grain: str, partition: str) -> str:
    """``fine-hp``: a layout's name in the plan's ``layouts``."""
    return f"{grain}-{partition}"


def iteration_load(s) -> np.ndarray:
    """(phases, K): flops each part computes before each phase of the iteration plan."""
    X, d, K, R, N = s.tensor, s.dist, s.K, s.R, s.N
    fine = d.grain == "fine"
    load = np.zeros((2 * N if fine else N, K))
    for n in range(N):
        first = 2 * n if fine else n              # the mode's fold (fine) or expand
        load[first] += 2.0 * N * R * d.loads(X, n)
        owned = np.bincount(d.owners[n], minlength=K)
        load[first + 1 if fine else first] += 2.0 * R * R * owned
    return load


def iteration_cost(s, model: CostModel, owner=None, hosts=None) -> StepCost:
    """Predicted seconds of one iteration of setup ``s``, its loads at ``dense_flop_s`` (cached
    R-wide rows) and the floor once a program step."""
    free = model.replace(floor_s=0.0)
    cost = free.step(s.iteration_plan(), owner=owner, hosts=hosts,
                     dense_load=iteration_load(s))
    grams = free.step(s.allreduce_plan(), owner=owner, hosts=hosts)
    total = cost.then(grams)
    return total.plus_comm((len(total.phase_s) - s.N) * model.floor_s)
