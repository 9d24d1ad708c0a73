"""The allreduce algorithms as per-rank stage functions over streams (Renggli 2017, ch. 3).

In stage ``s`` each rank sends to ranks fixed in advance (:meth:`Algorithm.sends`), then
merges what it received; a message's range follows from the stage and the two ranks
(:meth:`Algorithm.msg_range`). The plan's simulation and the Program use the same
methods. P other than 2^L is folded (section 3.1.4, ``_registry``).
"""

from __future__ import annotations

from functools import reduce

import numpy as np

from ._stream import Format, Stream, concat, densify, merge, take


def blocks(nblocks: int, N: int) -> np.ndarray:
    """Block bounds: ``floor(N / nblocks)`` items each, the last block the rest."""
    b = np.arange(nblocks + 1, dtype=np.int64) * (N // nblocks)
    b[-1] = N
    return b


def _log2(q: int) -> int:
    return q.bit_length() - 1


class Algorithm:
    """Interface of a stage algorithm over ``nparts`` ranks."""

    name = "algorithm"
    nstages = 0

    def __init__(self, nparts: int, N: int, fmt: Format):
        self.nparts, self.N, self.fmt = int(nparts), int(N), fmt

    def kind(self, s: int) -> str:
        raise NotImplementedError

    def sends(self, s: int) -> list[tuple[int, int]]:
        """Sorted (src, dst) pairs of stage ``s``: independent of the data."""
        raise NotImplementedError

    def msg_range(self, s: int, src: int, dst: int) -> tuple[int, int]:
        raise NotImplementedError

    def begin(self, rank: int, stream: Stream) -> dict:
        raise NotImplementedError

    def send(self, s: int, rank: int, st: dict) -> dict:
        raise NotImplementedError

    def recv(self, s: int, rank: int, st: dict, msgs: dict) -> None:
        raise NotImplementedError

    def result(self, rank: int, st: dict) -> Stream:
        raise NotImplementedError

    def __repr__(self):
        return f"{self.name}(P={self.nparts}, N={self.N}, {self.fmt.dtype.name})"


class RecDbl(Algorithm):
    """SSAR_Rec_Dbl (Figure 3.9): stage t exchanges the partial with rank XOR 2^t."""

    def __init__(self, nparts, N, fmt, dense=False):
        super().__init__(nparts, N, fmt)
        self.dense, self.nstages = dense, _log2(self.nparts)

    def kind(self, s):
        return "exchange"

    def sends(self, s):
        return [(p, p ^ (1 << s)) for p in range(self.nparts)]

    def msg_range(self, s, src, dst):
        return 0, self.N

    def begin(self, rank, stream):
        return {"cur": densify(stream, self.fmt) if self.dense else stream}

    def send(self, s, rank, st):
        return {rank ^ (1 << s): st["cur"]}

    def recv(self, s, rank, st, msgs):
        (src, got), = msgs.items()
        a, b = (st["cur"], got) if rank < src else (got, st["cur"])   # lower rank first
        st["cur"] = merge(a, b, self.fmt)

    def result(self, rank, st):
        return st["cur"]


class SplitAllGather(Algorithm):
    """SSAR_Split_AllGather (Figures 3.10-3.11, 3.6); DSAR_Split_AllGather if ``dense_blocks``."""

    def __init__(self, nparts, N, fmt, dense_blocks=False):
        super().__init__(nparts, N, fmt)
        self.dense_blocks = dense_blocks
        self.bounds = blocks(self.nparts, self.N)
        self.nstages = 0 if self.nparts == 1 else 1 + _log2(self.nparts)

    def kind(self, s):
        return "split" if s == 0 else "allgather"

    def sends(self, s):
        Q = self.nparts
        if s == 0:
            return [(p, q) for p in range(Q) for q in range(Q) if q != p]
        return [(p, p ^ (1 << (s - 1))) for p in range(Q)]

    def _range(self, first_block, nblocks):
        return int(self.bounds[first_block]), int(self.bounds[first_block + nblocks])

    def msg_range(self, s, src, dst):
        if s == 0:
            return self._range(dst, 1)
        t = s - 1
        return self._range((src >> t) << t, 1 << t)     # src's gathered group of 2^t blocks

    def begin(self, rank, stream):
        if self.nparts == 1:
            return {"g": densify(stream, self.fmt) if self.dense_blocks else stream}
        return {"cur": stream}

    def send(self, s, rank, st):
        if s == 0:
            cur = st.pop("cur")
            out = {q: take(cur, *self._range(q, 1), self.fmt)
                   for q in range(self.nparts) if q != rank}
            st["own"] = take(cur, *self._range(rank, 1), self.fmt)
            return out
        return {rank ^ (1 << (s - 1)): st["g"]}

    def recv(self, s, rank, st, msgs):
        if s == 0:
            parts = dict(msgs)
            parts[rank] = st.pop("own")
            acc = reduce(lambda a, b: merge(a, b, self.fmt),     # the owner sums in rank order
                         [parts[q] for q in range(self.nparts)])
            st["g"] = densify(acc, self.fmt) if self.dense_blocks else acc
            return
        (src, got), = msgs.items()
        st["g"] = concat(st["g"], got, self.fmt) if src > rank else concat(got, st["g"], self.fmt)

    def result(self, rank, st):
        return st["g"]


class HalvingDoubling(Algorithm):
    """Recursive-halving reduce-scatter + recursive-doubling allgather (Figure 3.8).

    Stage t pairs rank p with p XOR 2^t, which keeps the upper half if bit t of p is set;
    the first ``sparse_stages`` stages are sparse (Figures 3.12-3.13), then dense. The
    allgather reverses the halving."""

    def __init__(self, nparts, N, fmt, sparse_stages=0):
        super().__init__(nparts, N, fmt)
        self.L = _log2(self.nparts)
        self.m = min(int(sparse_stages), self.L)
        self.bounds = blocks(self.nparts, self.N)
        self.nstages = 2 * self.L

    def kind(self, s):
        if s < self.L:
            return "reduce-scatter" + (" sparse" if s < self.m else "")
        return "allgather"

    def _partner(self, s, p):
        return p ^ (1 << s) if s < self.L else p ^ (1 << (2 * self.L - 1 - s))

    def sends(self, s):
        return [(p, self._partner(s, p)) for p in range(self.nparts)]

    def _blocks_before(self, p, t):
        """(first block, number of blocks) rank p holds before halving stage t."""
        start, n = 0, self.nparts
        for u in range(t):
            n //= 2
            if (p >> u) & 1:
                start += n
        return start, n

    def _range(self, p, t):
        start, n = self._blocks_before(p, t)
        return int(self.bounds[start]), int(self.bounds[start + n])

    def msg_range(self, s, src, dst):
        if s < self.L:
            return self._range(dst, s + 1)       # the half the receiver keeps
        return self._range(src, 2 * self.L - s)  # the sender's gathered range

    def begin(self, rank, stream):
        return {"cur": densify(stream, self.fmt) if self.m == 0 or self.L == 0 else stream}

    def send(self, s, rank, st):
        partner = self._partner(s, rank)
        if s < self.L:
            cur = st.pop("cur")
            if s == self.m:                       # the early switch: dense from here on
                cur = densify(cur, self.fmt)
            st["keep"] = take(cur, *self._range(rank, s + 1), self.fmt)
            return {partner: take(cur, *self._range(partner, s + 1), self.fmt)}
        if s == self.L:                           # a reduced block: dense for the allgather
            st["cur"] = densify(st["cur"], self.fmt)
        return {partner: st["cur"]}

    def recv(self, s, rank, st, msgs):
        (src, got), = msgs.items()
        if s < self.L:
            keep = st.pop("keep")
            a, b = (keep, got) if rank < src else (got, keep)
            st["cur"] = merge(a, b, self.fmt)
            return
        cur = st["cur"]
        st["cur"] = concat(cur, got, self.fmt) if got.lo >= cur.hi else concat(got, cur, self.fmt)

    def result(self, rank, st):
        return st["cur"]


class Ring(Algorithm):
    """Dense ring allreduce (Figure 3.7): P - 1 reduce-scatter and P - 1 allgather steps, any P."""

    def __init__(self, nparts, N, fmt):
        super().__init__(nparts, N, fmt)
        self.bounds = blocks(self.nparts, self.N)
        self.nstages = 2 * (self.nparts - 1)

    def kind(self, s):
        return "reduce-scatter" if s < self.nparts - 1 else "allgather"

    def sends(self, s):
        P = self.nparts
        return [(p, (p + 1) % P) for p in range(P)]

    def _block(self, s, src):
        P = self.nparts
        if s < P - 1:
            return (src - s) % P                  # the partial of block src - s
        return (src + 1 - (s - (P - 1))) % P      # a reduced block travels on

    def msg_range(self, s, src, dst):
        b = self._block(s, src)
        return int(self.bounds[b]), int(self.bounds[b + 1])

    def begin(self, rank, stream):
        return {"full": densify(stream, self.fmt), "blocks": {}}

    def _own(self, st, lo, hi):
        v = st["full"].val
        return Stream(lo, hi, None, None if v is None else v[lo:hi])

    def send(self, s, rank, st):
        P = self.nparts
        b = self._block(s, rank)
        lo, hi = self.msg_range(s, rank, 0)
        out = st["blocks"][b] if (s > 0) else self._own(st, lo, hi)
        return {(rank + 1) % P: out}

    def recv(self, s, rank, st, msgs):
        (src, got), = msgs.items()
        b = self._block(s, src)
        if s < self.nparts - 1:
            st["blocks"][b] = merge(got, self._own(st, got.lo, got.hi), self.fmt)
        else:
            st["blocks"][b] = got

    def result(self, rank, st):
        if self.nparts == 1:
            return st["full"]
        return reduce(lambda a, b: concat(a, b, self.fmt),
                      [st["blocks"][b] for b in range(self.nparts)])
