"""What an SSGD epoch costs on a network, per row partition, and the fastest one.

In sub-epoch t part p updates its block (p, b), t = subepoch(p, b), about ``6 F`` flops a
rating, then sends the epoch plan's phase t: :func:`epoch_cost` prices that with a
:class:`~daskhpc.comm.CostModel` and ``_setup.choose`` ranks the :data:`LAYOUTS`."""

from __future__ import annotations

import numpy as np

from daskhpc.comm import CostModel, StepCost

#: The row partitions ``--partition auto`` chooses between
LAYOUTS = ("hp", "random")
#: flops of one rating's update per word of a row: 2 F for w.h, 2 F for each row's update
FLOPS_PER_RATING = 6


def epoch_load(s) -> np.ndarray:
    """(K sub-epochs, K parts): flops each part computes in each sub-epoch."""
    K = s.K
    ptr, _ = s.blocks()
    counts = np.diff(ptr).reshape(K, K)          # [part, column block]
    p, b = np.divmod(np.arange(K * K), K)
    t = s.strata.subepoch(p, b, 0)
    load = np.zeros((K, K))
    load[t, p] = counts[p, b] * FLOPS_PER_RATING * s.options.width
    return load


def epoch_cost(s, model: CostModel, owner=None, hosts=None) -> StepCost:
    """Predicted seconds of one epoch of setup ``s`` (its epoch plan after its loads)."""
    return model.step(s.runplan.epoch_plan(), epoch_load(s), owner=owner, hosts=hosts)
