"""Brute-force SSGD message counts, written from the definitions (test reference only).

Plain Python over columns and their updaters, deliberately unlike the vectorised plans:

* ring strata: worker x updates column block b in sub-epoch i_x(b) = (b - (x + seed)) mod K,
  so a block travels x -> x-1 -> x-2 ...;
* P2P (SSGD paper, Algorithm 1 and eq. (7)): a row h_j that two or more workers update is
  sent once per epoch by each updater x, in the sub-epoch it updated it, to the next
  updater y of h_j along x's ring order x-1, x-2, ...; rows sent together from x to y in
  one sub-epoch form one message;
* Hold-and-Combine (Algorithm 3): with d = (x - y) mod K, rows that x updates in
  sub-epoch i are held and sent in sub-epoch (floor(i/d) d + d - 1) mod K, the last one
  before y needs the window's first block, so one message per window of d sub-epochs;
* DSGD: every worker sends its whole H block to the next worker after every sub-epoch.

``counts`` returns (max-max msgs, sum-max msgs, tot msgs, max-max vol, sum-max vol, tot
vol) in rows, where "max" is over workers within one sub-epoch, "sum" over sub-epochs;
``words`` the total volume of an epoch in 8-byte words: each moved row is its F factors
and, for the biased model, the item's bias b_j, which travels with it.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

DSGD, P2P, HC = 0, 1, 3


def _summarise(sends: dict, K: int):
    """sends[(x, phase, y)] = rows -> the six metrics."""
    msgs = np.zeros((K, K), dtype=int)  # [phase, sender]
    vol = np.zeros((K, K), dtype=int)
    for (x, phase, _y), rows in sends.items():
        msgs[phase, x] += 1
        vol[phase, x] += len(rows)
    return (int(msgs.max()), int(msgs.max(axis=1).sum()), int(msgs.sum()),
            int(vol.max()), int(vol.max(axis=1).sum()), int(vol.sum()))


def counts(rows, cols, rpvec, colpvec, K, comm_type, seed=0, ngcols=None):
    """Per-epoch counts for ratings (rows, cols), row parts rpvec and column blocks colpvec."""
    ngcols = len(colpvec) if ngcols is None else ngcols
    if comm_type == DSGD:
        block = np.bincount(np.asarray(colpvec), minlength=K).max()
        # every worker, every sub-epoch, one message holding a whole block
        return 1, K, K * K, int(block), int(block) * K, ngcols * K
    updaters = defaultdict(set)  # column -> workers that hold a rating in it
    for r, c in zip(rows, cols):
        updaters[int(c)].add(int(rpvec[r]))
    sends = defaultdict(set)
    for j, who in updaters.items():
        if len(who) < 2:
            continue  # a row only one worker updates never moves
        b = int(colpvec[j])
        for x in who:
            i = (b - (x + seed)) % K
            y = next((x - s) % K for s in range(1, K) if (x - s) % K in who)
            if comm_type == P2P:
                phase = i
            else:
                d = (x - y) % K
                phase = ((i // d) * d + d - 1) % K
            sends[(x, phase, y)].add(j)
    return _summarise(sends, K)


def words(rows, cols, rpvec, colpvec, K, comm_type, F, biased=False, seed=0, ngcols=None):
    """Words one epoch sends: rows sent (per message, counted again here) times the
    words of a row, F factors plus one bias word when ``biased``."""
    per_row = F + (1 if biased else 0)
    if comm_type == DSGD:
        ngcols = len(colpvec) if ngcols is None else ngcols
        return ngcols * K * per_row
    updaters = defaultdict(set)
    for r, c in zip(rows, cols):
        updaters[int(c)].add(int(rpvec[r]))
    total = 0
    for who in updaters.values():
        if len(who) > 1:
            total += len(who) * per_row     # every updater sends the row once per epoch
    return total
