"""Post-pass of the fine-grain tensor model: place factor rows given a partition of nonzeros."""

from __future__ import annotations

import numba
import numpy as np

from ._hypergraph import Hypergraph
from ._metrics import connectivity_sets, max_part_weight


@numba.njit(cache=True, nogil=True)
def _place_rows(order, lam_ptr, lam_parts, nparts, cap):  # pragma: no cover - numba
    owner = np.empty(order.size, np.int64)
    load = np.zeros(nparts, np.int64)
    for r in order:
        best = -1
        for t in range(lam_ptr[r], lam_ptr[r + 1]):
            p = lam_parts[t]
            if best < 0 or load[p] < load[best]:
                best = p
        if best < 0 or load[best] >= cap:
            best = int(np.argmin(load))
        owner[r] = best
        load[best] += 1
    return owner


def assign_factor_rows(h: Hypergraph, nnz_parts, nparts: int, epsilon: float = 0.03):
    """Owner part of every factor row, mode by mode, for a fine-grain nonzero partition.

    Hypertensor paper, section 3.2: rows visited in decreasing connectivity go to the
    least-loaded part of their connectivity set unless it is overloaded, else to the
    least-loaded part overall (one more unit of volume).

    Parameters
    ----------
    h : Hypergraph
        Built by :func:`tensor_fine` (nets are the factor rows, ``meta["offsets"]``).
    nnz_parts : array of int
        Part of every nonzero.
    nparts : int
    epsilon : float
        A part holding more than ``(1 + eps) * ceil(I_m / K)`` rows of mode m is overloaded.

    Returns
    -------
    list of int64 arrays, one per mode: mu_m(i).

    Examples
    --------
    Column 0 is touched by parts {0, 1} (visited first; the lower id wins a tie):

    >>> from daskhpc.hypergraph import tensor_fine
    >>> h = tensor_fine(([[0, 1, 1], [0, 0, 1]], (2, 2)))
    >>> [m.tolist() for m in assign_factor_rows(h, [0, 1, 1], 2)]
    [[0, 1], [0, 1]]
    """
    offsets = np.asarray(h.meta["offsets"], dtype=np.int64)
    lam_ptr, lam_parts = connectivity_sets(h, nnz_parts, nparts)
    lam = np.diff(lam_ptr)
    owners = []
    for m in range(offsets.size - 1):
        lo, hi = offsets[m], offsets[m + 1]
        # Decreasing key = connectivity; stable so ties keep index order (deterministic).
        order = np.argsort(-lam[lo:hi], kind="stable").astype(np.int64)
        cap = int(max_part_weight(np.array([hi - lo]), nparts, epsilon)[0])
        ptr = lam_ptr[lo : hi + 1] - lam_ptr[lo]
        owners.append(_place_rows(order, ptr, lam_parts[lam_ptr[lo] : lam_ptr[hi]], nparts, cap))
    return owners


def fine_grain_volume(h: Hypergraph, nnz_parts, row_owners, nparts: int) -> int:
    """Words of one expand (or fold) phase over all modes:
    ``sum_n c[n](|Lambda(n) + owner| - 1)``."""
    lam_ptr, lam_parts = connectivity_sets(h, nnz_parts, nparts)
    owner = np.concatenate(row_owners)
    net_of = np.repeat(np.arange(h.num_nets), np.diff(lam_ptr))
    owner_in = np.zeros(h.num_nets, dtype=bool)
    owner_in[net_of[lam_parts == owner[net_of]]] = True
    lam_plus = np.diff(lam_ptr) + (~owner_in & (np.diff(lam_ptr) > 0))
    return int((h.net_costs * np.maximum(lam_plus - 1, 0)).sum())
