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


def epoch_load(s, working_set: bool = False) -> np.ndarray:
    """(K sub-epochs, K parts): flops each part computes in each sub-epoch (``working_set``:
    the bytes its sweep touches, its rows of W and H and its ratings)."""
    K = s.K
    ptr, _ = s.blocks()
    counts = np.diff(ptr).reshape(K, K)          # [part, column block]
    p, b = np.divmod(np.arange(K * K), K)
    t = s.strata.subepoch(p, b, 0)
    load = np.zeros((K, K))
    if working_set:
        a = s.assignment
        rows = (np.bincount(a.row_parts, minlength=K)[p]
                + np.bincount(a.col_blocks, minlength=K)[b])
        load[t, p] = rows * s.options.width * 8 + counts[p, b] * RATING_BYTES
    else:
        load[t, p] = counts[p, b] * FLOPS_PER_RATING * s.options.width
    return load


def epoch_cost(s, model: CostModel, owner=None, hosts=None) -> StepCost:
    """Predicted seconds of one epoch of setup ``s`` (its epoch plan after its loads)."""
    return model.step(s.runplan.epoch_plan(), epoch_load(s), owner=owner, hosts=hosts,
                      working_set=epoch_load(s, working_set=True))
