"""The stratum-order policy: which SSGD steps may run now (a plain object, no Dask)."""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import defaultdict


class StratumPolicy:
    """Tracks SSGD units and the order rules between them.

    A unit ``(run, part, T, block)`` is one sub-epoch T of one part. Stratified SGD is
    serializable when the units of a part run in order of T and the units on one H block
    run one at a time in order of T: a unit may start once the previous unit of its part
    and the previous unit on its block are done.

    Examples
    --------
    >>> pol = StratumPolicy()
    >>> pol.add([("r", 0, 0, 0), ("r", 1, 0, 1), ("r", 0, 1, 1), ("r", 1, 1, 0)])
    >>> pol.predecessors(("r", 0, 1, 1))
    [('r', 0, 0, 0), ('r', 1, 0, 1)]
    >>> pol.hold(("r", 0, 1, 1))
    >>> pol.finish(("r", 0, 0, 0)), pol.finish(("r", 1, 0, 1))
    ([], [('r', 0, 1, 1)])
    """

    def __init__(self):
        self._by_part: dict[tuple, list[int]] = defaultdict(list)    # (run, part) -> Ts
        self._by_block: dict[tuple, list[int]] = defaultdict(list)   # (run, block) -> Ts
        self._block_part: dict[tuple, int] = {}                      # (run, block, T) -> part
        self._part_block: dict[tuple, int] = {}                      # (run, part, T) -> block
        self._units: set[tuple] = set()
        self._done: set[tuple] = set()
        self._held: set[tuple] = set()

    def add(self, units) -> None:
        """Register units ``(run, part, T, block)`` (any order, repeats ignored)."""
        for u in units:
            u = tuple(u)
            if u in self._units:
                continue
            run, part, T, block = u
            self._units.add(u)
            insort(self._by_part[(run, part)], T)
            insort(self._by_block[(run, block)], T)
            self._block_part[(run, block, T)] = part
            self._part_block[(run, part, T)] = block

    def __contains__(self, unit) -> bool:
        return tuple(unit) in self._units

    def predecessors(self, unit) -> list[tuple]:
        """The previous unit of the same part and the previous unit on the same block."""
        return self._adjacent(unit, -1)

    def _adjacent(self, unit, d: int) -> list[tuple]:
        """The unit ``d`` steps along (-1: previous) of the same part and of the same block."""
        run, part, T, block = unit
        out = []
        ts = self._by_part[(run, part)]
        i = bisect_left(ts, T) + d
        if 0 <= i < len(ts):
            out.append((run, part, ts[i], self._part_block[(run, part, ts[i])]))
        tb = self._by_block[(run, block)]
        j = bisect_left(tb, T) + d
        if 0 <= j < len(tb):
            u = (run, self._block_part[(run, block, tb[j])], tb[j], block)
            if u not in out:
                out.append(u)
        return out

    def ready(self, unit) -> bool:
        """True when every predecessor of ``unit`` is done."""
        return all(p in self._done for p in self.predecessors(unit))

    def done(self, unit) -> bool:
        return tuple(unit) in self._done

    def hold(self, unit) -> None:
        """Remember that ``unit`` is being held until it is :meth:`ready`."""
        self._held.add(tuple(unit))

    @property
    def held(self) -> set:
        return set(self._held)

    def finish(self, unit) -> list[tuple]:
        """Mark ``unit`` done; return the held units this makes ready (and un-hold them)."""
        unit = tuple(unit)
        if unit in self._done:
            return []
        self._done.add(unit)
        freed = []
        for cand in self._adjacent(unit, +1):
            if cand in self._held and self.ready(cand):
                self._held.discard(cand)
                freed.append(cand)
        return freed

    def forget(self, run) -> None:
        """Drop everything known about ``run``."""
        for store in (self._units, self._done, self._held):
            for u in [u for u in store if u[0] == run]:
                store.discard(u)
        for d in (self._by_part, self._by_block, self._block_part, self._part_block):
            for k in [k for k in d if k[0] == run]:
                del d[k]


def check_timeline(records) -> list[str]:
    """Violations of the two order rules in a timeline (empty list: none).

    Parameters
    ----------
    records : iterable of dict
        With ``run``, ``part``, ``T``, ``block`` and a span: ``sent``/``done`` (the
        scheduler's clock, used when present) or ``start``/``stop``. The records of one
        unit (one per task of its group) are merged: from its first start to the end of its
        first finished task (the sweep).

    Examples
    --------
    >>> check_timeline([dict(run="r", part=0, T=0, block=0, start=0.0, stop=1.0),
    ...                 dict(run="r", part=1, T=1, block=0, start=0.5, stop=2.0)])
    ['block 0 of r: T=1 (part 1) started at 0.5 before T=0 (part 0) finished at 1.0']
    """
    units: dict[tuple, list[float]] = {}
    for r in records:
        key = (r["run"], r["part"], r["T"], r["block"])
        a, b = (r["sent"], r["done"]) if r.get("sent") is not None else (r["start"], r["stop"])
        span = units.setdefault(key, [a, b])
        span[0], span[1] = min(span[0], a), min(span[1], b)
    out = []
    for axis, label in ((3, "block"), (1, "part")):
        groups: dict[tuple, list] = defaultdict(list)
        for u, span in units.items():
            groups[(u[0], u[axis])].append((u[2], u[1], span))
        for (run, which), seq in groups.items():
            seq.sort()
            for (t0, p0, s0), (t1, p1, s1) in zip(seq, seq[1:]):
                if s1[0] < s0[1]:
                    out.append(f"{label} {which} of {run}: T={t1} (part {p1}) started at "
                               f"{s1[0]} before T={t0} (part {p0}) finished at {s0[1]}")
    return out
