"""A Dask DataFrame (or Array) of nonzeros as ``fit``'s tensor: the values stay on the
workers, routed to the parts holding them and summed there in canonical order as in
memory (the same factors, bit for bit; ``||X||^2`` is summed part by part, to 1e-16)."""

from __future__ import annotations

from dataclasses import replace
from operator import attrgetter

import numpy as np

from daskhpc._narrow import index_dtype, narrow_values
from daskhpc.errors import InputError
from daskhpc.io import labels_route, read_nonzeros, rereading, route, rows_route

from ._parts import iter_statics, part_members
from ._data import Tensor, _order_state, as_tensor


class Canonical:
    """The pins in canonical order: ``coords`` (unique, sorted) and ``canon`` (each
    collection nonzero's canonical index; None when already canonical, no copy)."""

    def __init__(self, pins: np.ndarray):
        self.duplicates = False
        if _order_state(pins) == 0:
            self.canon, self.coords = None, pins
            return
        order = np.lexsort(pins[::-1])                    # stable: ties in input order
        c = pins[:, order]
        new = np.ones(c.shape[1], dtype=bool)
        if c.shape[1] > 1:
            new[1:] = np.any(c[:, 1:] != c[:, :-1], axis=0)
        self.canon = np.empty(order.size, index_dtype(order.size))
        self.canon[order] = np.cumsum(new, dtype=self.canon.dtype) - 1
        del order
        self.duplicates = bool(not new.all())
        self.coords = np.ascontiguousarray(c[:, new]) if self.duplicates else c


def read_tensor(client, X, *, columns=None, shape=None,
                keep_pins: bool = False) -> tuple[Tensor, object, Canonical]:
    """``(tensor, nonzeros, canonical)``: the pattern (``vals`` a placeholder of ones), the
    collection on the workers and its canonical order; the pins dropped unless
    ``keep_pins`` (``check_serial``)."""
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
    if not keep_pins:
        nz.pins = None
    n = can.coords.shape[1]
    placeholder = np.broadcast_to(np.float32(1.0), (n,))
    # normx2: the placeholder's (n), until the parts sum the true one (no float64 copy)
    X = Tensor(can.coords, placeholder, tuple(nz.shape),
               {"shape": list(nz.shape), "nnz": n, "dask_token": nz.token}, float(n))
    return X, nz, can


def full_tensor(client, nz, can: Canonical, X: Tensor) -> Tensor:
    """The tensor with its values on the client (for ``check_serial`` only)."""
    return as_tensor((nz.pins, nz.gather_values(client), X.shape))


def part_statics(client, s, nz, can: Canonical, placement, only=None,
                 normx2: float | None = None) -> dict:
    """``({part: Future}, normx2)``: each part's statics built on its worker."""
    from distributed import wait

    K = s.K
    where = {p: placement.worker(p) for p in range(K)}
    # per part: the collection's nonzeros it needs, in collection order
    if s.dist.grain == "fine":        # one part each: a label per collection nonzero
        labels = s.dist.nnz_parts if can.canon is None else s.dist.nnz_parts[can.canon]
        # positions in a piece: int32 (half the bytes of what the client holds meanwhile)
        takes = [(t.astype(np.int32), b) for t, b in labels_route(labels, nz.offsets, K)]
        wanted = lambda p: np.flatnonzero(labels == p)        # noqa: E731
    else:                             # a nonzero in up to N parts
        members, _ = part_members(s)
        marked = []
        for p in range(K):
            mask = np.zeros(s.tensor.nnz, dtype=bool)
            mask[members[p]] = True
            marked.append(np.flatnonzero(mask if can.canon is None else mask[can.canon]))
        del members
        takes = rows_route(marked, nz.offsets)
        wanted = marked.__getitem__
    # every part's shell (no values) and how to order its values, made and sent to its
    # worker one at a time: the client holds one part's at once
    args = {}
    for p, shell in iter_statics(s, range(K) if only is None else sorted(only)):
        perm = starts = None             # in canonical order already: nothing to do
        if can.canon is not None:
            cp = can.canon[wanted(p)]
            perm = np.argsort(cp, kind="stable")
        if can.duplicates:
            cs = cp[perm]
            first = np.ones(cs.size, dtype=bool)
            first[1:] = cs[1:] != cs[:-1]
            starts = np.flatnonzero(first)
            if starts.size == cs.size:
                starts = None
        cp = None
        # every nonzero counted once in ||X||^2: by the part that works on it in mode 1
        mine = shell.work[0]                      # None: all of them
        args[p] = client.scatter((replace(shell, vals=None), perm, starts, mine),
                                 workers=[where[p]], broadcast=False, hash=False)
        del shell, perm, starts
    futs = route(client, nz, takes, where, _part_static, args, name="cpals", parts=only)
    if normx2 is None:
        wait(list(futs.values()))
        partial = client.gather([client.submit(attrgetter("_partial_norm2"), futs[p],
                                               workers=[where[p]], allow_other_workers=False,
                                               pure=False) for p in range(K)])
        normx2 = float(sum(partial))
    out = {p: client.submit(_with_norm, f, normx2, workers=[where[p]],
                            allow_other_workers=False, pure=False) for p, f in futs.items()}
    if only is None:
        wait(list(out.values()))
    for f in futs.values():
        f.release()
    return out, normx2


def rebuilder(client, s, nz, can: Canonical):
    """``rebuild(parts, placement)``: the lost parts' nonzeros read and routed again."""
    return rereading(client, [nz], lambda parts, placement: part_statics(
        client, s, nz, can, placement, parts, s.tensor.normx2)[0])


def _part_static(arg, *segments):
    """On the part's worker: its values in canonical order, duplicates summed."""
    shell, perm, starts, mine = arg
    v = np.concatenate(segments) if segments else np.zeros(0)
    if perm is not None:
        v = v[perm]
    if starts is not None:
        v = np.add.reduceat(v, starts) if v.size else v
    v = np.ascontiguousarray(v, dtype=np.float64)
    own = v if mine is None else v[mine]
    norm2 = float(np.dot(own, own))
    del own
    st = replace(shell, vals=narrow_values(v))     # float32 when exact, as in memory
    st._partial_norm2 = norm2
    return st


def _with_norm(static, normx2: float):
    return replace(static, normx2=normx2)
