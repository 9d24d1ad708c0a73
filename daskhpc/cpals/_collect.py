"""A Dask DataFrame (or Array) of nonzeros as ``fit``'s tensor: the values stay on the
workers.

The client reads only the pins (:func:`daskhpc.io.read_nonzeros`): from them it makes the
canonical coordinates (lexicographic, duplicates merged), partitions and plans exactly as
for an in-memory tensor, and builds every part's static data without its values. Each
nonzero then goes from its piece's worker to the worker of every part that holds it
(:func:`daskhpc.io.route`), where the part's values are put in canonical order and
duplicates summed in the order the in-memory path sums them: every part holds the very
arrays it would hold from the in-memory COO, and the factors come out bit for bit the
same. ``||X||^2`` (for the fit) is summed part by part instead of over the whole value
vector at once, so the fit agrees to rounding (about 1e-16), not bit for bit.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from daskhpc.errors import InputError
from daskhpc.io import read_nonzeros, rereading, route, rows_route

from ._parts import part_members, statics
from ._data import Tensor, as_tensor

__all__ = ["read_tensor", "part_statics", "rebuilder"]


class Canonical:
    """The pins of a collection in canonical order: ``coords`` (N x nnz, unique, sorted)
    and ``canon`` (per nonzero of the collection, its canonical index)."""

    def __init__(self, pins: np.ndarray):
        coords = np.asarray(pins, np.int64)
        order = np.lexsort(coords[::-1])                  # stable: ties in input order
        c = coords[:, order]
        new = np.ones(c.shape[1], dtype=bool)
        if c.shape[1] > 1:
            new[1:] = np.any(c[:, 1:] != c[:, :-1], axis=0)
        self.canon = np.empty(order.size, np.int64)
        self.canon[order] = np.cumsum(new) - 1
        self.coords = np.ascontiguousarray(c[:, new])
        self.duplicates = bool(not new.all())


def read_tensor(client, X, *, columns=None, shape=None) -> tuple[Tensor, object, Canonical]:
    """``(tensor, nonzeros, canonical)``: the tensor's pattern (its ``vals`` a read-only
    placeholder of ones, which never reaches a worker), the collection on the workers,
    and the canonical order of its nonzeros."""
    nz = read_nonzeros(X, client, columns=columns, shape=shape, name="tensor", min_order=3)
    for m, n in enumerate(nz.shape):
        if n < 2:
            nz.release()
            raise InputError(f"tensor: mode {m + 1} has a single slice (size {n}); drop that "
                             "mode and factor the lower-order tensor")
    if nz.nonzero_values == 0:
        nz.release()
        raise InputError("tensor: the tensor is all zeros; there is nothing to factor")
    can = Canonical(nz.pins)
    n = can.coords.shape[1]
    placeholder = np.broadcast_to(np.float64(1.0), (n,))
    X = Tensor(can.coords, placeholder, tuple(nz.shape),
               {"shape": list(nz.shape), "nnz": n, "dask_token": nz.token})
    return X, nz, can


def full_tensor(client, nz, can: Canonical, X: Tensor) -> Tensor:
    """The tensor with its values on the client (for ``check_serial`` only)."""
    return as_tensor((nz.pins, nz.gather_values(client), X.shape))


def part_statics(client, s, nz, can: Canonical, placement, only=None,
                 normx2: float | None = None) -> dict:
    """``({part: Future}, normx2)``: every part's :class:`PartStatic` (or ``only``'s),
    built on its worker; ``normx2`` (``||X||^2``) summed over the parts unless given
    (a rebuild of some parts: the run's own)."""
    from distributed import wait

    K = s.K
    members, _ = part_members(s)
    shells = statics(s)                       # values: the placeholder's ones (dropped)
    canon = can.canon
    # per part: the collection's nonzeros it needs, in collection order
    wanted = []
    inverse = None
    for p in range(K):
        if s.dist.grain == "fine":
            if inverse is None:
                inverse = s.dist.nnz_parts[canon]
            wanted.append(np.flatnonzero(inverse == p))
        else:
            mask = np.zeros(s.tensor.nnz, dtype=bool)
            mask[members[p]] = True
            wanted.append(np.flatnonzero(mask[canon]))
    takes = rows_route(wanted, nz.offsets)
    args = {}
    for p in range(K):
        cp = canon[wanted[p]]
        perm = np.argsort(cp, kind="stable")
        starts = None
        if can.duplicates:
            cs = cp[perm]
            first = np.ones(cs.size, dtype=bool)
            first[1:] = cs[1:] != cs[:-1]
            starts = np.flatnonzero(first)
            if starts.size == cs.size:
                starts = None
        # every nonzero counted once in ||X||^2: by the part that works on it in mode 1
        mine = shells[p].work[0]                  # None: all of them
        args[p] = (replace(shells[p], vals=None), perm, starts, mine)
    where = {p: placement.worker(p) for p in range(K)}
    futs = route(client, nz, takes, where, _part_static, args, name="cpals", parts=only)
    if normx2 is None:
        wait(list(futs.values()))
        partial = client.gather([client.submit(_partial_norm, futs[p], workers=[where[p]],
                                               allow_other_workers=False, pure=False)
                                 for p in range(K)])
        normx2 = float(sum(partial))
    out = {p: client.submit(_with_norm, f, normx2, workers=[where[p]],
                            allow_other_workers=False, pure=False) for p, f in futs.items()}
    if only is None:
        wait(list(out.values()))
    for f in futs.values():
        f.release()
    return out, normx2


def rebuilder(client, s, nz, can: Canonical):
    """``rebuild(parts, placement)`` for the part store: the collection read again and
    the ``parts``' statics built on their workers in ``placement`` (a lost worker's)."""
    return rereading(client, [nz], lambda parts, placement: part_statics(
        client, s, nz, can, placement, parts, s.tensor.normx2)[0])


def _part_static(arg, *segments):
    """On the part's worker: its values in canonical order, duplicates summed."""
    shell, perm, starts, mine = arg
    v = np.concatenate(segments) if segments else np.zeros(0)
    v = v[perm]
    if starts is not None:
        v = np.add.reduceat(v, starts) if v.size else v
    v = np.ascontiguousarray(v, dtype=np.float64)
    own = v if mine is None else v[mine]
    st = replace(shell, vals=v)
    st._partial_norm2 = float(np.dot(own, own))
    return st


def _partial_norm(static) -> float:
    return static._partial_norm2


def _with_norm(static, normx2: float):
    return replace(static, normx2=normx2)
