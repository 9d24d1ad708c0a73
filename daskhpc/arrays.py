"""Array helpers every layer shares (numpy only): distinct values of an integer array by
sorting, instead of ``np.unique``.

numpy 2.4's ``np.unique`` takes a hash-table path for integer arrays that is far slower
than sorting when the values are many and mostly distinct, which is exactly our case:
(net, part) and (net, vertex) keys of millions of pins. Measured on this machine:
4.4 s against 0.03 s for 4 million int64 keys. Sorting and masking the first element of
every run of equal values gives the same arrays.

Examples
--------
>>> import numpy as np
>>> u, inv, n = unique_sorted(np.array([5, 1, 5, 3]), return_inverse=True, return_counts=True)
>>> u.tolist(), inv.tolist(), n.tolist()
([1, 3, 5], [2, 0, 2, 1], [1, 1, 2])
"""

from __future__ import annotations

import numpy as np

__all__ = ["unique_sorted"]


def unique_sorted(a, return_inverse: bool = False, return_counts: bool = False):
    """Sorted distinct values of a 1-D integer array, like ``np.unique`` but by sorting.

    Parameters
    ----------
    a : array_like of int
        Flattened if it is not 1-D. Meant for integers (NaNs would not be merged).
    return_inverse : bool
        Also return ``inv`` with ``u[inv] == a`` (the index of each value in ``u``).
    return_counts : bool
        Also return how many times each distinct value occurs.

    Returns
    -------
    u : numpy.ndarray
        The distinct values, ascending.
    inv : numpy.ndarray of intp, optional
    counts : numpy.ndarray of intp, optional
        In ``np.unique``'s order: ``u``, then ``inv``, then ``counts``.
    """
    a = np.asarray(a).ravel()
    if return_inverse:
        # The permutation scatters the run ids back to input order. Equal values get the
        # same id whatever their order, so the faster unstable sort is enough.
        order = np.argsort(a)
        s = a[order]
    else:
        s = np.sort(a)
    first = np.empty(s.size, dtype=bool)  # True at the first element of every run
    first[:1] = True
    np.not_equal(s[1:], s[:-1], out=first[1:])
    u = s[first]
    if not (return_inverse or return_counts):
        return u
    out = [u]
    if return_inverse:
        inv = np.empty(a.size, dtype=np.intp)
        inv[order] = np.cumsum(first, dtype=np.intp) - 1
        out.append(inv)
    if return_counts:
        starts = np.flatnonzero(first)
        out.append(np.diff(np.append(starts, s.size)).astype(np.intp))
    return tuple(out)
