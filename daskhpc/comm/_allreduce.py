"""A small dense allreduce over parts: recursive doubling, summed in a fixed tree order.

The schedule has ``rounds``; in each, some parts send their current partial sum to one
partner. With ``P2`` the largest power of two <= P and ``r = P - P2``:

1. *fold* (only if r > 0): part ``P2 + j`` sends to part ``j`` (j < r), which adds it;
2. *doubling* round t = 0 .. log2(P2) - 1: parts ``p`` and ``p XOR 2^t`` (both < P2)
   exchange and both form ``lower + upper`` (the partial of the lower part ids first);
3. *unfold* (only if r > 0): part ``j`` sends the total to part ``P2 + j``.

Both partners of a round compute the same expression from the same operands, so every
part ends with the same bits, and :func:`tree_sum` reproduces them in one process (the
serial references use it). SSGD-style per-part CPU order never enters: the result is a
function of the part ids only.

No dask here.

Examples
--------
>>> s = AllreduceSchedule(3)
>>> [r.kind for r in s.rounds], [r.sends for r in s.rounds]
(['fold', 'doubling', 'unfold'], [{2: 0}, {0: 1, 1: 0}, {0: 2}])
>>> tree_sum([1.0, 2.0, 3.0])
6.0
>>> s.plan(words=4).report()["tot_msgs"]
4
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._plan import Plan

__all__ = ["AllreduceSchedule", "Round", "tree_sum"]


@dataclass(frozen=True)
class Round:
    """One round: ``sends[p] = q`` means part p sends its partial to part q."""

    kind: str           # "fold", "doubling" or "unfold"
    sends: dict

    def receives(self) -> dict:
        """``{receiver: sender}`` of the round."""
        return {q: p for p, q in self.sends.items()}


class AllreduceSchedule:
    """The rounds of a recursive-doubling allreduce over ``nparts`` parts."""

    def __init__(self, nparts: int):
        if nparts < 1:
            raise ValueError(f"an allreduce needs at least one part, got {nparts}")
        self.nparts = P = int(nparts)
        P2 = 1 << (P.bit_length() - 1)
        r = P - P2
        rounds = []
        if r:
            rounds.append(Round("fold", {P2 + j: j for j in range(r)}))
        t = 1
        while t < P2:
            rounds.append(Round("doubling", {p: p ^ t for p in range(P2)}))
            t <<= 1
        if r:
            rounds.append(Round("unfold", {j: P2 + j for j in range(r)}))
        self.rounds = rounds
        self.p2, self.extra = P2, r

    def combine(self, rnd: Round, part: int, mine, received):
        """What ``part`` holds after receiving ``received`` in round ``rnd``.

        Fold and doubling add, the lower part id's partial first; unfold replaces.
        """
        if rnd.kind == "unfold":
            return received
        sender = rnd.receives()[part]
        return mine + received if part < sender else received + mine

    def plan(self, words: int, *, first_phase: int = 0, name: str = "allreduce") -> Plan:
        """One message per send, round i in phase ``first_phase + i``; one unit of
        ``words`` words each."""
        msgs = [(first_phase + i, p, q) for i, rnd in enumerate(self.rounds)
                for p, q in sorted(rnd.sends.items())]
        ph, src, dst = np.array(msgs, np.int64).reshape(-1, 3).T
        return Plan(self.nparts, ph, src, dst, volume=np.ones(len(msgs), np.int64),
                    nphases=first_phase + len(self.rounds), unit="vectors",
                    words_per_unit=int(words), name=name)


def tree_sum(values):
    """The allreduce's sum of ``values`` (one per part, in part order), in one process.

    Bit for bit what :class:`AllreduceSchedule` leaves on every part.

    Examples
    --------
    >>> import numpy as np
    >>> tree_sum([np.ones(2), np.ones(2) * 2, np.ones(2) * 3, np.ones(2) * 4]).tolist()
    [10.0, 10.0]
    """
    vals = list(values)
    if not vals:
        raise ValueError("tree_sum of nothing")
    s = AllreduceSchedule(len(vals))
    for rnd in s.rounds:
        if rnd.kind == "unfold":
            break
        new = list(vals)
        for q, p in rnd.receives().items():
            new[q] = s.combine(rnd, q, vals[q], vals[p])
        vals = new
    return vals[0]
