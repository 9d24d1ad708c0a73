"""Plans that several workflows share: expand and fold over connectivity sets."""

from __future__ import annotations

import numba
import numpy as np

from ._plan import Plan


def _pairs(owner, lam_ptr, lam_parts, nparts: int):
    """(row, needing part) pairs whose part is not the row's owner."""
    owner, lam_ptr, lam_parts = (np.asarray(a, dtype=np.int64)
                                 for a in (owner, lam_ptr, lam_parts))
    n = owner.size
    if lam_ptr.shape != (n + 1,) or lam_ptr[-1] != lam_parts.size:
        raise ValueError(f"connectivity sets (CSR with {lam_ptr.size} pointers) do not "
                         f"match {n} owned rows")
    if n and (owner.min() < 0 or owner.max() >= nparts):
        raise ValueError(f"row owners must lie in [0, {nparts})")
    if lam_parts.size and (lam_parts.min() < 0 or lam_parts.max() >= nparts):
        raise ValueError(f"connectivity-set parts must lie in [0, {nparts})")
    row = np.repeat(np.arange(n, dtype=np.int64), np.diff(lam_ptr))
    keep = lam_parts != owner[row]
    return row[keep], lam_parts[keep], owner[row[keep]]


def _grouped(nparts, src, dst, rows, phase, **kw) -> Plan:
    """One message per (src, dst) pair, its rows ascending."""
    # one composite key instead of a three-key lexsort (several times faster at K = 1024)
    n = int(rows.max()) + 1 if rows.size else 1
    pair = src * np.int64(nparts) + dst
    if nparts * nparts <= max(4 * rows.size, 1 << 20) and np.all(rows[1:] >= rows[:-1]):
        # rows ascending already (expand and fold): a stable counting sort by pair, linear
        order = _counting_order(pair, nparts * nparts)
    elif nparts * nparts * n < 2**62:
        order = np.argsort(pair * np.int64(n) + rows, kind="stable")
    else:
        order = np.lexsort((rows, dst, src))
    src, dst, rows = src[order], dst[order], rows[order]
    new = np.ones(src.size, dtype=bool)
    new[1:] = (src[1:] != src[:-1]) | (dst[1:] != dst[:-1])
    first = np.flatnonzero(new)
    ptr = np.concatenate([first, [src.size]]).astype(np.int64)
    return Plan(nparts, np.full(first.size, phase, np.int64), src[first], dst[first], ptr,
                rows, nphases=phase + 1, **kw)


@numba.njit(cache=True, nogil=True)
def _counting_order(key, nkeys):  # pragma: no cover - numba
    # argsort(key, kind="stable") of keys in [0, nkeys)
    at = np.zeros(nkeys + 1, np.int64)
    for i in range(key.size):
        at[key[i] + 1] += 1
    for k in range(nkeys):
        at[k + 1] += at[k]
    order = np.empty(key.size, np.int64)
    for i in range(key.size):
        order[at[key[i]]] = i
        at[key[i]] += 1
    return order


def expand_plan(owner, lam_ptr, lam_parts, nparts: int, *, phase: int = 0,
                **plan_options) -> Plan:
    """Owners send their rows to the other parts that need them.

    Hypertensor paper, Algorithm 4 lines 5-6; GCN paper, eqs. 8-9. Row ``i`` costs
    ``|Lambda_i U {owner(i)}| - 1`` units; all rows between two parts travel as one message.

    Parameters
    ----------
    owner : int array (n)
        Part owning each row.
    lam_ptr, lam_parts : int arrays
        Connectivity sets as CSR: the parts needing row i are
        ``lam_parts[lam_ptr[i]:lam_ptr[i+1]]`` (the owner may or may not be among them;
        :func:`daskhpc.hypergraph.connectivity_sets` gives them for a net per row).
    nparts, phase : int
        K, and the phase of every message (the plan has ``phase + 1`` phases).
    **plan_options
        ``unit``, ``words_per_unit``, ``word_bytes``, ``name`` of the :class:`Plan`.

    Returns
    -------
    Plan
        One message per communicating (owner, part) pair; its indices are the rows.

    Examples
    --------
    >>> import numpy as np
    >>> ptr, parts = np.array([0, 2, 3, 5]), np.array([0, 1, 2, 0, 2])
    >>> p = expand_plan([0, 0, 1], ptr, parts, 3)          # row 1 lives on 0, needed by 2
    >>> [(s, d, i.tolist()) for _, s, d, i in p.messages()]
    [(0, 1, [0]), (0, 2, [1]), (1, 0, [2]), (1, 2, [2])]
    """
    rows, need, own = _pairs(owner, lam_ptr, lam_parts, nparts)
    plan_options.setdefault("name", "expand")
    return _grouped(nparts, own, need, rows, phase, **plan_options)


def fold_plan(owner, lam_ptr, lam_parts, nparts: int, *, phase: int = 0,
              **plan_options) -> Plan:
    """Parts send their partial rows to the rows' owners: expand reversed (hypertensor
    paper, Algorithm 4 lines 2-3)."""
    rows, need, own = _pairs(owner, lam_ptr, lam_parts, nparts)
    plan_options.setdefault("name", "fold")
    return _grouped(nparts, need, own, rows, phase, **plan_options)


def row_volume(owner, lam_ptr, lam_parts) -> np.ndarray:
    """``|Lambda_i U {owner(i)}| - 1`` for every row (its units in one expand or fold)."""
    owner = np.asarray(owner, dtype=np.int64)
    lam_ptr = np.asarray(lam_ptr, dtype=np.int64)
    row = np.repeat(np.arange(owner.size), np.diff(lam_ptr))
    others = np.bincount(row[np.asarray(lam_parts) != owner[row]], minlength=owner.size)
    return others.astype(np.int64)
