"""What an SSGD epoch costs on a network, per row partition, and the fastest one.

In sub-epoch t part p updates its block (p, b), t = subepoch(p, b), ``14 F`` flops a
rating over its rows of W and H, then sends the epoch plan's phase t: :func:`epoch_cost`
prices that with a :class:`~daskhpc.comm.CostModel` (a block's flops at the in-cache rate
where its rows and ratings fit the cache) and ``_setup.choose`` ranks the :data:`LAYOUTS`."""

from __future__ import annotations

import numpy as np

from daskhpc.comm import CostModel, StepCost

#: The row partitions ``--partition auto`` chooses between
LAYOUTS = ("hp", "random")
#: flops of one rating's update per word of a row (``sgd_block``): 2 F for w.h, 4 F for
#: the norms in the loss, 4 F for each row's update
FLOPS_PER_RATING = 14
#: bytes a block's sweep reads per rating: two indices and the value
RATING_BYTES = 16


def epoch_loads(s) -> tuple[np.ndarray, np.ndarray]:
    """(K sub-epochs, K parts) each: the flops each part computes in each sub-epoch, and
    the bytes its sweep touches (its rows of W and H, its ratings)."""
    K, a = s.K, s.assignment
    ptr = s.blocks()
    counts = np.diff(ptr).reshape(K, K)          # [part, column block]
    p, b = np.divmod(np.arange(K * K), K)
    t = s.strata.subepoch(p, b, 0)
    rows = np.bincount(a.row_parts, minlength=K)[p] + np.bincount(a.col_blocks, minlength=K)[b]
    load, touched = np.zeros((K, K)), np.zeros((K, K))
    load[t, p] = counts[p, b] * FLOPS_PER_RATING * s.options.width
    touched[t, p] = rows * s.options.width * 8 + counts[p, b] * RATING_BYTES
    return load, touched


def epoch_cost(s, model: CostModel, owner=None, hosts=None) -> StepCost:
    """Predicted seconds of one epoch of setup ``s`` (its epoch plan after its loads)."""
    load, touched = epoch_loads(s)
    return model.step(s.runplan.epoch_plan(), load, owner=owner, hosts=hosts,
                      working_set=touched)
