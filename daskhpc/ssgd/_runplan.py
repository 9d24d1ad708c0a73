"""A whole run's messages: the epoch patterns of :mod:`._plan` laid out over E epochs.

An *instance* is message m of pattern q sent in epoch e at sub-epoch ``e * K + ts[m]``;
instances consumed after the last epoch are left out and nothing arrives from before
the first, so :meth:`RunPlan.run_plan` is exactly what the run sends (the transfer
ledger is compared against it). The test RMSE after epoch e needs every test column's
newest h_j: one extra message per (holder, part) pair and epoch (:meth:`RunPlan.eval_plan`),
never mixed into the section VI metrics."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from daskhpc.arrays import unique_sorted
from daskhpc.comm import Plan

from ._plan import Layout, Pattern, epoch_pattern, run_starts
from ._strata import RingStrata


@dataclass(eq=False)
class Instances:
    """Messages of the run: pattern id, message id, epoch, absolute send time."""

    pattern: np.ndarray
    message: np.ndarray
    epoch: np.ndarray
    send: np.ndarray

    @property
    def size(self) -> int:
        return int(self.pattern.size)


def holders(lay: Layout, strata: RingStrata, strategy: str, epoch: int) -> np.ndarray:
    """Part holding the newest copy of every H row after ``epoch`` (-1: none): its last
    updater, for DSGD its block's last updater."""
    K = lay.nparts
    M = lay.col_blocks.size
    if strategy == "dsgd":
        return strata.updater(lay.col_blocks, K - 1, epoch).astype(np.int64)
    out = np.full(M, -1, dtype=np.int64)
    c, p = lay.pins_col, lay.pins_part
    t = strata.subepoch(p, lay.col_blocks[c], epoch)
    o = np.lexsort((t, c))           # per column, the latest update last
    out[c[o]] = p[o]                 # later writes win
    return out


@dataclass(eq=False)
class RunPlan:
    """Epoch patterns (one for a fixed ring), their instances over the run, and the
    evaluation messages."""

    layout: Layout
    strata: RingStrata
    strategy: str
    epochs: int
    rank: int
    patterns: list[Pattern]
    eval_patterns: list[dict] = field(default_factory=list)
    eval_epochs: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    #: the test ratings' (column, part) keys (what the evaluation patterns are made of)
    test_pins: np.ndarray | None = None
    _instances: Instances | None = None

    @classmethod
    def build(cls, lay: Layout, strata: RingStrata, strategy: str, epochs: int,
              rank: int = 1, test=None, eval_every: int | None = 1,
              method: str = "bitwise", epoch0: int = 0, test_pins=None):
        """``epoch0`` (epochs before this plan) only shifts which epochs are evaluated."""
        E = int(epochs)
        patterns = [epoch_pattern(lay, strata, strategy, e, method)
                    for e in ([0] if strata.fixed else range(E))]
        rp = cls(lay, strata, strategy, E, int(rank), patterns)
        if test is not None and test.nnz and eval_every is not None and eval_every >= 0:
            # every ``eval_every``-th epoch and always the last; 0: the last one only
            rp.eval_epochs = np.array([e for e in range(E) if e == E - 1 or (
                eval_every and (epoch0 + e + 1) % eval_every == 0)], np.int64)
            K = lay.nparts
            rp.test_pins = unique_sorted(test.cols * K + lay.row_parts[test.rows]) \
                if test_pins is None else test_pins
            rp.eval_patterns = [rp._eval_pattern(rp.test_pins, e)
                                for e in ([0] if strata.fixed else range(E))]
        return rp

    @property
    def instances(self) -> Instances:
        """The messages of the run (built on first use)."""
        if self._instances is None:
            self._instances = self._instantiate()
        return self._instances

    def _instantiate(self) -> Instances:
        K, E = self.layout.nparts, self.epochs
        parts = []
        for q, pat in enumerate(self.patterns):
            eps = np.arange(E) if pat.epoch is None else np.array([pat.epoch])
            first_ty = pat.seg_ty[pat.seg_ptr[:-1]] if pat.num_messages else \
                np.zeros(0, np.int64)       # segments are sorted by ty: the first is earliest
            m = np.tile(np.arange(pat.num_messages), eps.size)
            e = np.repeat(eps, pat.num_messages)
            keep = e * K + first_ty[m] < E * K
            parts.append((np.full(int(keep.sum()), q), m[keep], e[keep],
                          (e * K + pat.ts[m])[keep]))
        return Instances(*(np.concatenate([p[i] for p in parts]).astype(np.int64)
                           for i in range(4)))

    def _eval_pattern(self, need, epoch: int) -> dict:
        lay = self.layout
        K = lay.nparts
        col, part = need // K, need % K                 # (column, part) pairs
        src = holders(lay, self.strata, self.strategy, epoch)[col]
        move = (src >= 0) & (src != part)
        col, part, src = col[move], part[move], src[move]
        o = np.lexsort((col, lay.col_blocks[col], part, src))
        col, part, src = col[o], part[o], src[o]
        first = run_starts(src, part)
        return {"src": src[first], "dst": part[first],
                "ptr": np.concatenate([first, [o.size]]).astype(np.int64), "cols": col,
                "epoch": None if self.strata.fixed else epoch}

    def eval_pattern(self, epoch: int) -> dict:
        return self.eval_patterns[0 if self.strata.fixed else epoch]

    def epoch_plan(self, epoch: int | None = None) -> Plan:
        """The section VI plan of one epoch (the steady-state one for random strata)."""
        if epoch is None:
            epoch = 0 if self.strata.fixed else min(1, self.epochs - 1)
        pat = self.patterns[0 if self.strata.fixed else epoch]
        return pat.plan(self.rank, name=f"ssgd-{self.strategy}")

    def run_plan(self) -> Plan:
        """Every message the run sends (phases = absolute sub-epochs)."""
        inst = self.instances
        cols = []
        for q, pat in enumerate(self.patterns):
            mask = inst.pattern == q
            m = inst.message[mask]
            cols.append((inst.send[mask], pat.src[m], pat.dst[m], pat.volume()[m]))
        send, src, dst, vol = (np.concatenate(c) for c in zip(*cols))
        return Plan(self.layout.nparts, send, src, dst, volume=vol,
                    nphases=self.epochs * self.layout.nparts, unit="rows",
                    words_per_unit=self.rank, name=f"ssgd-{self.strategy}-run")

    def eval_plan(self) -> Plan | None:
        """The evaluation messages of all evaluated epochs (phase = epoch)."""
        if not self.eval_patterns or not self.eval_epochs.size:
            return None
        cols = []
        for e in self.eval_epochs:
            ev = self.eval_pattern(int(e))
            cols.append((np.full(ev["src"].size, e), ev["src"], ev["dst"], np.diff(ev["ptr"])))
        ph, src, dst, vol = (np.concatenate(c) for c in zip(*cols))
        return Plan(self.layout.nparts, ph, src, dst, volume=vol, nphases=self.epochs,
                    unit="rows", words_per_unit=self.rank, name="ssgd-eval")

    def segment_rows(self, q: int, s: int) -> np.ndarray:
        """Global columns of segment ``s`` of pattern ``q`` (a whole block for DSGD)."""
        pat = self.patterns[q]
        if pat.whole:
            b = pat.seg_block[s]
            lay = self.layout
            return lay.block_cols[lay.block_ptr[b]:lay.block_ptr[b + 1]]
        return pat.cols[pat.col_ptr[s]:pat.col_ptr[s + 1]]
