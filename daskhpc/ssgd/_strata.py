"""Ring strata: which column block each part updates in each sub-epoch.

With K parts and ring seed s, in sub-epoch k (0-based) part p updates column block

    beta = ((p + s) mod K + k) mod K                       (paper eq. (5), 0-based)

so part p updates block beta in sub-epoch ``(beta - p - s) mod K`` and the part after p
to update any block is p - 1 (mod K): a column block travels p -> p-1 -> p-2 ... This is
``get_cbidx`` / ``get_se`` of the paper's public code (CESSGD ``sschedule.c``), whose
fixed-seed schedule uses s = 0. Every ring strata is a *fixed-distance* strata
(Definition 2): part y updates every block ``d = (x - y) mod K`` sub-epochs after x.

``strata="random"`` draws a new ring seed for every epoch (the public code's
RING_RANDOM_SEED), from a seeded generator so runs are reproducible.

Absolute time ``T = epoch * K + k`` numbers the sub-epochs of a whole run.

Examples
--------
>>> s = RingStrata(4)
>>> [s.block(p, 1) for p in range(4)]
[1, 2, 3, 0]
>>> s.subepoch(3, 1), s.updater(1, 2)
(2, 3)
>>> s.distance(3, 1)
2
"""

from __future__ import annotations

import numpy as np

from daskhpc.errors import InputError

__all__ = ["RingStrata", "STRATA"]

STRATA = ("ring", "random")


class RingStrata:
    """The ring stratum schedule of K parts over a run.

    Parameters
    ----------
    nparts : int
        K.
    kind : {"ring", "random"}
        ``ring``: one seed for all epochs (``ring_seed``); ``random``: a seed per epoch.
    ring_seed : int
        The seed of a fixed ring (0, as in the paper's code).
    seed : int
        Seeds the per-epoch draws of ``random``.
    offset : int
        Epoch 0 of this schedule is epoch ``offset`` of the run (a run resumed after
        ``offset`` epochs draws the same per-epoch rings as the uninterrupted run).
    """

    def __init__(self, nparts: int, kind: str = "ring", ring_seed: int = 0, seed: int = 0,
                 offset: int = 0):
        if kind not in STRATA:
            raise InputError(f"unknown strata {kind!r}; choose one of {list(STRATA)}")
        self.K = int(nparts)
        self.kind = kind
        self.ring_seed = int(ring_seed) % max(self.K, 1)
        self.seed = int(seed)
        self.offset = int(offset)
        self._seeds: dict[int, int] = {}

    @property
    def fixed(self) -> bool:
        """True when every epoch uses the same ring (the plan is periodic)."""
        return self.kind == "ring" or self.K == 1

    def epoch_seed(self, epoch: int = 0) -> int:
        """The ring seed s of ``epoch``."""
        if self.fixed:
            return self.ring_seed
        if epoch not in self._seeds:
            rng = np.random.default_rng([self.seed, 0x5EED, int(epoch) + self.offset])
            self._seeds[epoch] = int(rng.integers(self.K))
        return self._seeds[epoch]

    # -- eq. (5) and its inverses (vectorised: p, beta, k may be arrays) -------------
    def block(self, p, k, epoch: int = 0):
        """Column block part ``p`` updates in sub-epoch ``k`` (``get_cbidx``)."""
        return ((p + self.epoch_seed(epoch)) % self.K + k) % self.K

    def subepoch(self, p, beta, epoch: int = 0):
        """Sub-epoch in which part ``p`` updates block ``beta`` (``get_se``)."""
        return (beta - p - self.epoch_seed(epoch)) % self.K

    def updater(self, beta, k, epoch: int = 0):
        """Part that updates block ``beta`` in sub-epoch ``k``."""
        return (beta - k - self.epoch_seed(epoch)) % self.K

    def distance(self, x, y):
        """d^{xy}: sub-epochs from x's update of any block to y's (eq. (6))."""
        return (x - y) % self.K

    def ring_order(self, x: int) -> np.ndarray:
        """Upsilon^{p_x}: the parts in the order they update a block after x (x first)."""
        return (x - np.arange(self.K)) % self.K

    def table(self, epoch: int = 0) -> np.ndarray:
        """K x K array: ``table[p, k]`` is the block p updates in sub-epoch k."""
        p = np.arange(self.K)[:, None]
        k = np.arange(self.K)[None, :]
        return self.block(p, k, epoch)

    def shifted(self, offset: int) -> RingStrata:
        """The same schedule starting ``offset`` epochs later."""
        return RingStrata(self.K, self.kind, self.ring_seed, self.seed, self.offset + offset)

    def describe(self) -> dict:
        return {"strata": self.kind, "ring_seed": self.ring_seed}

    def __repr__(self):
        return f"RingStrata(K={self.K}, {self.kind}, ring_seed={self.ring_seed})"
