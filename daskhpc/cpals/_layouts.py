"""What a CP-ALS iteration costs on a network, per layout, and the fastest one.

An iteration runs the N modes in turn. In mode n every part computes its MTTKRP rows
(``2 N R`` flops per nonzero it processes: the Hadamard product of N - 1 factor rows and
the scaled accumulation), then (fine grain) folds its partial rows to their owners,
every owner solves its rows (``2 R^2`` flops a row), expands the new rows to the parts
that need them, and the R x R Grams are all-reduced; both loads at the dense rate.
:func:`iteration_cost` prices that
with a :class:`~daskhpc.comm.CostModel`; :func:`~daskhpc.cpals._setup.choose` prepares every layout of
:data:`LAYOUTS` (grain and partition) and ranks them (``--partition auto`` runs the
first).

Examples
--------
>>> from daskhpc import datasets
>>> from daskhpc.comm import network_model
>>> from daskhpc.cpals._setup import choose
>>> name, s, rows = choose(datasets.path("tensor"), 4,
...                        network_model("ethernet-10g"))          # doctest: +SKIP
>>> sorted(r["layout"] for r in rows)                             # doctest: +SKIP
['coarse-block', 'coarse-hp', 'fine-hp', 'fine-random']
"""

from __future__ import annotations

import numpy as np

from daskhpc.comm import CostModel, StepCost

__all__ = ["LAYOUTS", "layout_name", "iteration_load", "iteration_cost"]

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
    """Predicted seconds of one iteration of setup ``s`` (its Gram allreduces too).

    The loads are priced at ``dense_flop_s``: the MTTKRP and the solve stream R-wide
    factor rows that stay in cache, as a BLAS product does (the MTTKRP of the MovieLens
    tensor, R 16: 0.07-0.09 ns a counted flop on one core, against 0.24 for the dense
    product and 5 for the out-of-cache CSR kernel ``flop_s`` is timed on). The floor is
    paid once a step of the program, which fuses a mode's last allreduce round, its
    expand and the next mode's MTTKRP into one step: N fewer steps than the plans'
    phases (N L coarse, N (L + 1) fine)."""
    free = model.replace(floor_s=0.0)
    cost = free.step(s.iteration_plan(), owner=owner, hosts=hosts,
                     dense_load=iteration_load(s))
    grams = free.step(s.allreduce_plan(), owner=owner, hosts=hosts)
    total = cost.then(grams)
    return total.plus_comm((len(total.phase_s) - s.N) * model.floor_s)
