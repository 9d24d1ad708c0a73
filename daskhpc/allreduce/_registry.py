"""The algorithm registry and the fold for P not a power of two (Renggli 2017, 3.1.4)."""

from __future__ import annotations

from ._algorithms import Algorithm, HalvingDoubling, RecDbl, Ring, SplitAllGather, _log2
from ._stream import Format, merge


class Folded(Algorithm):
    """An algorithm over Q = 2^floor(log2 P) ranks, folded when P is not a power of two.

    Rank Q + j sends its vector to rank j in a stage in front and gets the result in one
    at the end (section 3.1.4)."""

    def __init__(self, inner: Algorithm, nparts: int):
        super().__init__(nparts, inner.N, inner.fmt)
        self.inner, self.name = inner, inner.name
        self.Q = inner.nparts
        self.r = self.nparts - self.Q
        self.off = 1 if self.r else 0
        self.nstages = inner.nstages + 2 * self.off

    def _outer(self, s):
        if self.r and s == 0:
            return "fold"
        if self.r and s == self.nstages - 1:
            return "unfold"
        return None

    def kind(self, s):
        return self._outer(s) or self.inner.kind(s - self.off)

    def sends(self, s):
        k = self._outer(s)
        if k == "fold":
            return sorted((self.Q + j, j) for j in range(self.r))
        if k == "unfold":
            return sorted((j, self.Q + j) for j in range(self.r))
        return self.inner.sends(s - self.off)

    def msg_range(self, s, src, dst):
        if self._outer(s):
            return 0, self.N
        return self.inner.msg_range(s - self.off, src, dst)

    def begin(self, rank, stream):
        return {"own": stream} if self.r else {"in": self.inner.begin(rank, stream)}

    def send(self, s, rank, st):
        k = self._outer(s)
        if k == "fold":
            return {rank - self.Q: st.pop("own")} if rank >= self.Q else {}
        if k == "unfold":
            return {self.Q + rank: self.inner.result(rank, st["in"])} if rank < self.r else {}
        return self.inner.send(s - self.off, rank, st["in"]) if rank < self.Q else {}

    def recv(self, s, rank, st, msgs):
        k = self._outer(s)
        if k == "fold":
            if rank < self.Q:
                own = st.pop("own")
                if msgs:                           # rank j adds rank Q + j's vector
                    (_, got), = msgs.items()
                    own = merge(own, got, self.fmt)
                st["in"] = self.inner.begin(rank, own)
        elif k == "unfold":
            if rank >= self.Q:
                (_, got), = msgs.items()
                st["res"] = got
        elif rank < self.Q:
            self.inner.recv(s - self.off, rank, st["in"], msgs)

    def result(self, rank, st):
        return st["res"] if rank >= self.Q else self.inner.result(rank, st["in"])

    def __reduce__(self):
        return (make, (self.name, self.nparts, self.N, self.fmt,
                       getattr(self.inner, "group", None)))


#: name -> (inner class, its options); Ring is not folded
ALGORITHMS = {
    "ssar_rec_dbl": (RecDbl, {}),
    "ssar_split_allgather": (SplitAllGather, {}),
    "dsar_split_allgather": (SplitAllGather, {"dense_blocks": True}),
    "dsar_early_switch": (HalvingDoubling, None),     # sparse_stages from the group size
    "dense_rabenseifner": (HalvingDoubling, {"sparse_stages": 0}),
    "dense_ring": (Ring, {}),
    "dense_rec_dbl": (RecDbl, {"dense": True}),
}
SPARSE = ("ssar_rec_dbl", "ssar_split_allgather", "dsar_split_allgather", "dsar_early_switch")
DENSE = ("dense_rabenseifner", "dense_ring", "dense_rec_dbl")
DEFAULT_GROUP = 8


def make(name: str, nparts: int, N: int, fmt: Format, group: int | None = None) -> Algorithm:
    """The algorithm ``name`` over ``nparts`` ranks for length-``N`` vectors.

    ``group`` (dsar_early_switch only): ranks per sparse group, a power of two (default 8,
    the thesis's section 5.2.3; capped at the folded rank count).

    Examples
    --------
    >>> import numpy as np
    >>> a = make("ssar_rec_dbl", 5, 10, Format(np.float64))
    >>> [a.kind(s) for s in range(a.nstages)], a.sends(0)
    (['fold', 'exchange', 'exchange', 'unfold'], [(4, 0)])
    """
    if name not in ALGORITHMS:
        raise ValueError(f"unknown allreduce algorithm {name!r}; choose one of "
                         f"{sorted(ALGORITHMS)}")
    cls, opts = ALGORITHMS[name]
    P = int(nparts)
    if cls is Ring:
        algo = Ring(P, N, fmt)
        algo.name = name
        return algo
    Q = 1 << (P.bit_length() - 1)
    g = int(group or DEFAULT_GROUP)
    if opts is None:
        if g < 1 or g & (g - 1):
            raise ValueError(f"the early-switch group must be a power of two, got {g}")
        opts = {"sparse_stages": _log2(min(g, Q))}
    inner = cls(Q, N, fmt, **opts)
    inner.name = name
    inner.group = g if ALGORITHMS[name][1] is None else None
    algo = Folded(inner, P)
    algo.group = inner.group
    return algo
