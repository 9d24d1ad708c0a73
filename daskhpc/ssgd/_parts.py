"""Cut a prepared run (:class:`~daskhpc.ssgd._setup.Setup`) into per-part static data:
W rows, held H rows per block (DSGD: whole blocks), block ratings in local indices (the
serial order), and where each message's rows come from or go to."""

from __future__ import annotations

import numpy as np

from daskhpc._narrow import index_dtype
from daskhpc.arrays import unique_sorted
from ._kernels import learning_rate
from ._runplan import holders
from ._setup import Setup
from ._tasks import PartData


def _held_columns(s: Setup, p: int) -> list[np.ndarray]:
    lay = s.layout
    if s.options.strategy == "dsgd":
        return [lay.block_cols[lay.block_ptr[b]:lay.block_ptr[b + 1]] for b in range(s.K)]
    mine = lay.pins_col[lay.pins_part == p]           # ascending
    blk = lay.col_blocks[mine]
    return [mine[blk == b] for b in range(s.K)]


def part_data(s: Setup, p: int, owner=None, checkpoint_epochs=()) -> PartData:
    """The :class:`~daskhpc.ssgd._tasks.PartData` of part ``p`` without its ratings' values
    (:func:`part_values`, put in on its worker by ``_collect.with_values``); a sender with
    the same ``owner`` (worker) is read from its state."""
    K, o, lay, tr = s.K, s.options, s.layout, s.train
    rows, cols = np.flatnonzero(lay.row_parts == p), _held_columns(s, p)
    # a DataFrame's blocks are made on the part's worker (_collect.with_values)
    bli, blj, local_row = [None] * K, [None] * K, None
    if not tr.on_workers:
        # local W and H rows in 32 bits where they fit: 8 bytes a rating, not 16; local H
        # rows by a lookup table, not a search (docs/benchmarks.md)
        it = index_dtype(max(tr.shape))
        local_row = np.full(tr.shape[0], -1, it)
        local_row[rows] = np.arange(rows.size)
        local_col = np.empty(tr.shape[1], it)
        for b in range(K):
            local_col[cols[b]] = np.arange(cols[b].size)
        bli, blj = s.block_ratings(p, (local_row, local_col), "rc")
    E, e0 = s.E, s.epoch0
    blocks = np.array([[int(s.strata.block(p, k, e)) for k in range(K)] for e in range(E)],
                      np.int64)
    whole = o.strategy == "dsgd"
    d = PartData(part=p, K=K, F=o.rank, whole=whole, seed=o.seed, init_scale=s.init_scale,
                 lr=np.array([learning_rate(o.lr, e0 + e) for e in range(E)]), reg=o.reg,
                 epoch0=e0, blocks=blocks, rows=rows, cols=cols,
                 init_blocks=(int(blocks[0, 0]),) if whole else tuple(range(K)),
                 bli=bli, blj=blj, bval=[None] * K, clip=s.clip,
                 eval_epochs=frozenset(s.runplan.eval_epochs.tolist()), bias=s.bias,
                 shuffle=bool(o.shuffle))
    if s.start is not None:          # resuming: start from the checkpointed values
        d.W0 = s.start[0][rows]
        d.H0 = {b: s.start[1][cols[b]] for b in d.init_blocks}
    _messages(s, p, d, owner)
    if s.runplan.eval_patterns:
        _evaluation(s, p, d, local_row)
    d.final_held = _newest_held(s, p, cols, E - 1)
    if checkpoint_epochs:
        d.ckpt_epochs = frozenset(int(e) for e in checkpoint_epochs)
        # a fixed ring leaves the same holders after every epoch: one entry, key -1
        d.ckpt_held = {-1: _newest_held(s, p, cols, 0)} if s.strata.fixed else \
            {e: _newest_held(s, p, cols, e) for e in d.ckpt_epochs}
    return d


def part_values(s: Setup, p: int) -> np.ndarray:
    """Part p's ratings' values: its blocks' in order, then its test ratings'."""
    return np.concatenate([*s.block_ratings(p, kinds="v")[0], s.test.vals[s.test_of(p)]])


def _newest_held(s: Setup, p: int, cols, epoch: int) -> list:
    """``[(block, local positions)]`` of the H rows whose newest copy p holds after ``epoch``."""
    fh = holders(s.layout, s.strata, s.options.strategy, epoch)
    held = [(b, np.flatnonzero(fh[cols[b]] == p)) for b in range(s.K)]
    return [(b, pos) for b, pos in held if pos.size]


def _send_spec(rp, q: int, m: int, cols) -> list:
    pat = rp.patterns[q]
    return [(int(pat.seg_block[sg]), np.searchsorted(cols[pat.seg_block[sg]],
                                                     rp.segment_rows(q, sg)))
            for sg in range(pat.seg_ptr[m], pat.seg_ptr[m + 1])]


def _messages(s: Setup, p: int, d: PartData, owner=None) -> None:
    """Send and receive specs of every message pattern p takes part in."""
    rp = s.runplan
    held = {}
    for q, pat in enumerate(rp.patterns):
        for m in np.flatnonzero((pat.src == p) | (pat.dst == p)):
            lo0 = pat.col_ptr[pat.seg_ptr[m]] if not pat.whole else 0
            segs = range(pat.seg_ptr[m], pat.seg_ptr[m + 1])
            if pat.src[m] == p:
                d.send[(q, int(m))] = _send_spec(rp, q, m, d.cols)
            if pat.dst[m] == p:
                src = int(pat.src[m])
                if owner is not None and owner[src] == owner[p]:
                    if src not in held:
                        held[src] = _held_columns(s, src)
                    d.local[(q, int(m))] = _send_spec(rp, q, m, held[src])
                # per segment: its sub-epoch, block, rows lo:hi of the message, places in d.cols
                los = [0 if pat.whole else int(pat.col_ptr[sg] - lo0) for sg in segs]
                d.recv[(q, int(m))] = [(int(pat.seg_ty[sg]), b, lo, lo + pos.size, pos)
                                       for sg, (b, pos), lo in
                                       zip(segs, _send_spec(rp, q, m, d.cols), los)]


def _evaluation(s: Setup, p: int, d: PartData, local_row: np.ndarray) -> None:
    """Test ratings of p and where the newest copy of each of their H rows is."""
    rp, lay = s.runplan, s.layout
    t = s.test
    if t.on_workers:             # the rest is made on the part's worker (with_values)
        col, part = divmod(rp.test_pins, s.K)
        d.test_cols = col[part == p]
    else:
        sel = s.test_of(p)
        d.test_cols = unique_sorted(t.cols[sel])
        d.test_li = local_row[t.rows[sel]]
        d.test_lj = np.searchsorted(d.test_cols, t.cols[sel])
    for q, ev in enumerate(rp.eval_patterns):
        epoch = 0 if ev["epoch"] is None else ev["epoch"]
        hold = holders(lay, s.strata, s.options.strategy, epoch)[d.test_cols]
        d.ev_init[q] = np.flatnonzero(hold < 0)
        local = []
        for b in range(s.K):
            pos = np.flatnonzero((hold == p) & (lay.col_blocks[d.test_cols] == b))
            if pos.size:
                local.append((b, np.searchsorted(d.cols[b], d.test_cols[pos]), pos))
        d.ev_local[q] = local
        for m in np.flatnonzero((ev["src"] == p) | (ev["dst"] == p)):
            c = ev["cols"][ev["ptr"][m]:ev["ptr"][m + 1]]
            if ev["src"][m] == p:
                blk = lay.col_blocks[c]
                d.ev_send[(q, int(m))] = [(int(b), np.searchsorted(d.cols[b], c[blk == b]))
                                          for b in unique_sorted(blk)]
            if ev["dst"][m] == p:
                d.ev_recv[(q, int(m))] = np.searchsorted(d.test_cols, c)
