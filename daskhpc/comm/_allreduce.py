"""A small dense allreduce over parts: recursive doubling, summed in a fixed tree order."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._plan import Plan


@dataclass(frozen=True)
class Round:
    """One round: ``sends[p] = q`` means part p sends its partial to part q."""

    kind: str           # "fold", "doubling" or "unfold"
    sends: dict

    def receives(self) -> dict:
        """``{receiver: sender}`` of the round."""
        return {q: p for p, q in self.sends.items()}


class AllreduceSchedule:
    """The rounds of a recursive-doubling allreduce over ``nparts`` parts.

    With ``P2`` the largest power of two <= P and ``r = P - P2``: a *fold* round (if r > 0:
    part ``P2 + j`` sends to part ``j``), doubling rounds t (parts ``p`` and ``p XOR 2^t``
    exchange and both form ``lower + upper``), an *unfold* round (the total back to
    ``P2 + j``). Every part ends with the same bits, a function of the part ids only, and
    :func:`tree_sum` reproduces them in one process.

    Examples
    --------
    >>> s = AllreduceSchedule(3)
    >>> [r.kind for r in s.rounds], [r.sends for r in s.rounds]
    (['fold', 'doubling', 'unfold'], [{2: 0}, {0: 1, 1: 0}, {0: 2}])
    >>> s.plan(words=4).report()["tot_msgs"]
    4
    """

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
        """What ``part`` holds after receiving ``received`` in round ``rnd`` (fold and
        doubling add, the lower part id's partial first; unfold replaces)."""
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
    """The allreduce's sum of ``values`` (one per part, in part order) in one process: bit
    for bit what :class:`AllreduceSchedule` leaves on every part.

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
