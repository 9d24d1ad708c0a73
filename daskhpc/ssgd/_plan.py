"""One epoch of communication for DSGD, P2P and Hold-and-Combine, as messages and Plans.

A *piece* is one H row (DSGD: one whole block) that part ``src`` updated at sub-epoch
``tx`` and part ``dst`` uses next at ``ty`` (``ty >= K``: the next epoch). The strategy
picks its send time ``ts``: DSGD (section III-B) and P2P (Algorithm 1) send at once,
ts = tx; H&C (Algorithm 3) holds rows for ring distance d and sends once per window,
ts = floor(tx / d) * d + d - 1 (``smart_schedule_msg_send``). A *message* is all pieces
with the same (ts, src, dst); its phase is ``ts mod K``, so :meth:`daskhpc.comm.Plan.report`
gives the section VI metrics per sub-epoch, as the public code's ``print_stat``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from daskhpc.errors import InputError
from daskhpc.comm import Plan

from ._dgap import dgap_successors, pins_of, successors_by_connectivity
from ._strata import RingStrata

STRATEGIES = ("dsgd", "p2p", "hc")


@dataclass(eq=False)
class Layout:
    """The static structure every plan and the driver share.

    ``(pins_col[t], pins_part[t])``: the connectivity sets, sorted by column then part;
    ``block_cols[block_ptr[b]:block_ptr[b+1]]``: the columns of block b, ascending."""

    nparts: int
    shape: tuple[int, int]
    row_parts: np.ndarray
    col_blocks: np.ndarray
    pins_col: np.ndarray
    pins_part: np.ndarray
    block_ptr: np.ndarray
    block_cols: np.ndarray

    @classmethod
    def build(cls, rows, cols, *, row_parts, col_blocks, nparts, shape=None, pins=None):
        """``pins``: the (column, part) keys when made on the workers."""
        row_parts = np.asarray(row_parts, np.int64)
        col_blocks = np.asarray(col_blocks, np.int64)
        if shape is None:
            shape = (row_parts.size, col_blocks.size)
        pc, pp = pins_of(rows, cols, row_parts, col_blocks.size, nparts) if pins is None \
            else divmod(np.asarray(pins, np.int64), int(nparts))
        order = np.argsort(col_blocks, kind="stable")
        ptr = np.concatenate([[0], np.cumsum(np.bincount(col_blocks, minlength=nparts))])
        return cls(int(nparts), tuple(shape), row_parts, col_blocks, pc, pp,
                   ptr.astype(np.int64), order.astype(np.int64))


def row_pieces(lay: Layout, strata: RingStrata, epoch: int = 0, method: str = "bitwise"):
    """The H rows that move in ``epoch``: (src, dst, col, tx, ty) arrays (random strata: an
    epoch's last update links to the next epoch's first)."""
    K = lay.nparts
    blk = lay.col_blocks
    if strata.fixed:
        if method == "bitwise":
            x, y, j = dgap_successors(lay.pins_col, lay.pins_part, blk, K)
        else:
            x, y, j = successors_by_connectivity(lay.pins_col, lay.pins_part, K)
        tx = strata.subepoch(x, blk[j], epoch)
        ty = tx + strata.distance(x, y)          # fixed distance (Definition 2)
        return x, y, j, tx, ty
    # Random strata: order the updates of each column by sub-epoch, link neighbours,
    # then link each column's last update to its first one in the next epoch.
    c, p = lay.pins_col, lay.pins_part
    t = strata.subepoch(p, blk[c], epoch)
    o = np.lexsort((t, c))
    c, p, t = c[o], p[o], t[o]
    same = c[1:] == c[:-1]
    x, y, j, tx, ty = p[:-1][same], p[1:][same], c[1:][same], t[:-1][same], t[1:][same]
    last = np.concatenate([~same, [True]])
    t1 = strata.subepoch(p, blk[c], epoch + 1)
    o1 = np.lexsort((t1, c))
    first1 = np.concatenate([[True], c[o1][1:] != c[o1][:-1]])
    wx, wj, wt = p[last], c[last], t[last]
    wy, wt1 = p[o1][first1], t1[o1][first1]
    keep = wx != wy
    return (np.concatenate([x, wx[keep]]), np.concatenate([y, wy[keep]]),
            np.concatenate([j, wj[keep]]), np.concatenate([tx, wt[keep]]),
            np.concatenate([ty, K + wt1[keep]]))


def block_moves(lay: Layout, strata: RingStrata, epoch: int = 0):
    """DSGD: every block goes from its updater to the next one: (src, dst, block, tx, ty)."""
    K = lay.nparts
    b = np.repeat(np.arange(K), K)
    k = np.tile(np.arange(K), K)
    src = strata.updater(b, k, epoch)
    nxt = np.where(k < K - 1, strata.updater(b, k + 1, epoch),
                   strata.updater(b, 0, epoch + 1))
    keep = src != nxt
    return src[keep], nxt[keep], b[keep], k[keep], (k + 1)[keep]


def send_times(strategy: str, tx: np.ndarray, ty: np.ndarray, K: int) -> np.ndarray:
    """ts of every piece: right after the update, or Algorithm 3's combined window."""
    if strategy in ("dsgd", "p2p"):
        return tx.copy()
    d = ty - tx
    # Algorithm 3 lines 3-8: message id floor(tx / d) covers the d sub-epochs of its window
    # and leaves before the receiver needs its first block, i.e. after sub-epoch
    # id * d + d - 1. A hop longer than an epoch (random strata) is sent at once.
    window = (tx // np.maximum(d, 1)) * d + d - 1
    return np.where(d < K, window, tx)


@dataclass(eq=False)
class Pattern:
    """The messages of one epoch, grouped (ts, src, dst): message m's segments
    ``seg_ptr[m]:seg_ptr[m+1]``, segment s block ``seg_block[s]``'s rows for ``seg_ty[s]``."""

    nparts: int
    strategy: str
    whole: bool
    src: np.ndarray
    dst: np.ndarray
    ts: np.ndarray
    seg_ptr: np.ndarray
    seg_ty: np.ndarray
    seg_block: np.ndarray
    col_ptr: np.ndarray
    cols: np.ndarray | None
    seg_volume: np.ndarray
    epoch: int | None = None

    @property
    def num_messages(self) -> int:
        return int(self.src.size)

    def volume(self) -> np.ndarray:
        """Rows per message."""
        return np.add.reduceat(self.seg_volume, self.seg_ptr[:-1]) if self.src.size \
            else np.zeros(0, np.int64)

    def plan(self, rank: int = 1, name: str | None = None) -> Plan:
        """This epoch as a :class:`daskhpc.comm.Plan` (phase = ts mod K, unit = H rows)."""
        kw = dict(nphases=self.nparts, unit="rows", words_per_unit=int(rank),
                  name=name or self.strategy)
        if self.whole:
            return Plan(self.nparts, self.ts % self.nparts, self.src, self.dst,
                        volume=self.volume(), **kw)
        ptr = self.col_ptr[self.seg_ptr]
        return Plan(self.nparts, self.ts % self.nparts, self.src, self.dst, ptr, self.cols, **kw)


def ranges(starts, lengths) -> np.ndarray:
    """Concatenated ``arange(starts[i], starts[i] + lengths[i])``, vectorised."""
    starts = np.asarray(starts, np.int64)
    lengths = np.asarray(lengths, np.int64)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    offs = np.cumsum(lengths) - lengths
    return np.repeat(starts - offs, lengths) + np.arange(total, dtype=np.int64)


def run_starts(*keys) -> np.ndarray:
    """Index of the first element of every run of equal ``keys`` tuples (sorted arrays)."""
    new = np.ones(keys[0].size, dtype=bool)
    if keys[0].size:
        new[1:] = np.logical_or.reduce([k[1:] != k[:-1] for k in keys])
    return np.flatnonzero(new)


def _group(K, strategy, whole, src, dst, ts, ty, block, col_ptr, cols, seg_volume, epoch):
    """Sort segments by (ts, src, dst, ty) and cut them into messages."""
    o = np.lexsort((ty, dst, src, ts))
    src, dst, ts, ty, block = src[o], dst[o], ts[o], ty[o], block[o]
    seg_volume = seg_volume[o]
    if cols is not None and np.any(o != np.arange(o.size)):  # re-pack in the new order
        cols = cols[ranges(col_ptr[:-1][o], seg_volume)]
    col_ptr = np.concatenate([[0], np.cumsum(seg_volume)]).astype(np.int64)
    first = run_starts(ts, src, dst)
    seg_ptr = np.concatenate([first, [o.size]]).astype(np.int64)
    return Pattern(K, strategy, whole, src[first], dst[first], ts[first], seg_ptr, ty,
                   block, col_ptr, cols, seg_volume, epoch)


def epoch_pattern(lay: Layout, strata: RingStrata, strategy: str, epoch: int = 0,
                  method: str = "bitwise") -> Pattern:
    """All messages of one epoch for ``strategy`` ("dsgd", "p2p" or "hc")."""
    if strategy not in STRATEGIES:
        raise InputError(f"unknown --strategy {strategy!r}; choose one of {list(STRATEGIES)}")
    K = lay.nparts
    ep = None if strata.fixed else epoch
    if strategy == "dsgd":
        src, dst, block, tx, ty = block_moves(lay, strata, epoch)
        vol = np.diff(lay.block_ptr)[block]
        ptr = np.concatenate([[0], np.cumsum(vol)]).astype(np.int64)
        # K * M rows in all: list them only while that stays small (volumes suffice).
        cols = lay.block_cols[ranges(lay.block_ptr[block], vol)] \
            if vol.sum() <= 20_000_000 else None
        return _group(K, strategy, True, src, dst, send_times(strategy, tx, ty, K), ty,
                      block, ptr, cols, vol, ep)
    x, y, j, tx, ty = row_pieces(lay, strata, epoch, method)
    ts = send_times(strategy, tx, ty, K)
    # One segment per (ts, src, dst, ty): the rows of one block for one receiving
    # sub-epoch; rows ascending inside it.
    o = np.lexsort((j, ty, y, x, ts))
    x, y, j, tx, ty, ts = x[o], y[o], j[o], tx[o], ty[o], ts[o]
    first = run_starts(ts, x, y, ty)
    vol = np.diff(np.concatenate([first, [o.size]]))
    ptr = np.concatenate([[0], np.cumsum(vol)]).astype(np.int64)
    return _group(K, strategy, False, x[first], y[first], ts[first], ty[first],
                  lay.col_blocks[j[first]], ptr, j, vol, ep)
