"""Ring strata: which column block each part updates in each sub-epoch.

In sub-epoch k part p updates column block beta = ((p + s) mod K + k) mod K (eq. (5),
0-based, ring seed s), so a block travels p -> p-1 -> p-2 ...: CESSGD's ``get_cbidx`` /
``get_se``. Ring strata are fixed-distance strata (Definition 2). ``strata="random"``
draws a seeded ring seed per epoch (RING_RANDOM_SEED). ``T = epoch * K + k`` numbers the
sub-epochs of a run."""

from __future__ import annotations

import numpy as np

from daskhpc.errors import InputError

STRATA = ("ring", "random")


class RingStrata:
    """The ring stratum schedule of K parts over a run (``random``: a seeded ring per epoch;
    epoch 0 here is the run's epoch ``offset``)."""

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

    def shifted(self, offset: int) -> RingStrata:
        """The same schedule starting ``offset`` epochs later."""
        return RingStrata(self.K, self.kind, self.ring_seed, self.seed, self.offset + offset)

    def __repr__(self):
        return f"RingStrata(K={self.K}, {self.kind}, ring_seed={self.ring_seed})"
