"""Ratings from a Dask collection: the ids on the client, the ratings on the workers.

A ``dask.dataframe`` of (user, item, rating) with original ids is mapped as the ratings
file reader maps a file (:func:`daskhpc.io.read_ratings_frame`); a ``dask.array`` of
sparse chunks holds 0-based indices, as the in-memory API takes them (its nonzeros in
row-major order, as for a scipy matrix; empty rows and columns dropped alike). The client
keeps the pins (what the split, the partition and the plans need) and never a rating:

* the *keeper*, one worker, holds the training ratings in training order and the test
  ratings in test order (routed there worker to worker): the mean, the clip range, the
  checkpoint digest and the final objective are computed there, on the very arrays the
  file path computes them on, so every number is the same bit for bit;
* every part's ratings, block by block and then its test ratings, in the order
  :func:`~daskhpc.ssgd._parts.part_data` puts them, are routed to the part's worker
  (:func:`daskhpc.io.route`) and put into its ``PartData`` there (``with_values``).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from daskhpc.errors import InputError

from ._input import Input
from ._data import Ratings, holdout_mask, placeholder

__all__ = ["read_input", "Values", "with_values", "full_setup"]


def read_input(client, data, *, columns=None, keep_empty: bool = False) -> Input:
    """The :class:`Input` of a collection, its ``values`` a :class:`Values`."""
    from daskhpc.io import read_nonzeros, read_ratings_frame

    if hasattr(data, "columns"):
        nz, maps = read_ratings_frame(data, client, columns=columns, name="ratings")
        rows, cols = nz.pins
        source = {"collection": "dask.dataframe", "columns": list(nz.columns),
                  "partitions": len(nz.pieces), "shape": list(nz.shape), "nnz": nz.nnz}
        r = Ratings(rows, cols, placeholder(nz.nnz), nz.shape, source)
        nz.pins = None                    # the Ratings hold the ids now (int64)
        return Input(r, maps, (None, None), nz.shape, 0, "ratings",
                     values=Values(client, nz, None, None))
    if columns is not None:
        raise InputError("columns= is for a Dask DataFrame of ratings, not a Dask Array")
    nz = read_nonzeros(data, client, order=2, name="ratings")
    pins = nz.pins.astype(np.int64)
    order = np.lexsort((pins[1], pins[0]))          # row-major, as for a scipy matrix
    rows, cols = pins[0][order], pins[1][order]
    del pins
    keep = [np.bincount(ix, minlength=n) > 0 for ix, n in ((rows, nz.shape[0]),
                                                          (cols, nz.shape[1]))]
    source = {"collection": "dask.array", "chunks": len(nz.pieces), "nnz": nz.nnz,
              "shape": list(nz.shape)}
    kept, remap = (None, None), None
    if not all(k.all() for k in keep):
        empty = [int((~k).sum()) for k in keep]
        if keep_empty:
            axis = 0 if empty[0] else 1
            first = int(np.flatnonzero(~keep[axis])[0])
            nz.release()
            raise InputError(f"ratings: {('row', 'column')[axis]} {first} has no ratings "
                             f"({empty[axis]} of {nz.shape[axis]} are empty); run without "
                             "keep_empty to drop them")
        remap = [np.cumsum(k) - 1 for k in keep]
        rows, cols = remap[0][rows], remap[1][cols]
        kept = tuple(np.flatnonzero(k) for k in keep)
        source.update(shape_in_file=list(nz.shape), dropped_empty={
            "rows": empty[0], "columns": empty[1]})
        source.setdefault("notes", []).append(
            f"ratings: dropped {empty[0]} empty rows and {empty[1]} empty columns of the "
            f"{nz.shape[0]} x {nz.shape[1]} array: SSGD needs a rating per row and column")
    shape = (int(keep[0].sum()), int(keep[1].sum()))
    source["shape"] = list(shape)
    r = Ratings(rows, cols, placeholder(nz.nnz), shape, source)
    nz.pins = None
    return Input(r, kept, kept, nz.shape, 0, None, values=Values(client, nz, order, remap))


class Values:
    """The ratings of a collection on the workers (module docstring).

    Parameters
    ----------
    client : distributed.Client
    nz : daskhpc.io.Nonzeros
    order : int array or None
        Collection position of every rating in :class:`Ratings` order (None: the same).
    remap : (array, array) or None
        New row and column of every row and column of the collection (empty ones
        dropped), for the ids the keeper reads from the pieces.
    """

    def __init__(self, client, nz, order, remap):
        self.client, self.nz, self.order, self.remap = client, nz, order, remap
        self.keeper = None
        self.stats: dict = {}
        self.is_test = None

    def hold_out(self, test_fraction: float, seed: int) -> dict:
        """Split as :func:`~daskhpc.ssgd._data.split` does; route the training and
        test ratings to the keeper; returns its ``mean``, ``clip`` and ``digest``."""
        n = self.nz.nnz
        self.is_test = is_test = holdout_mask(n, test_fraction, seed)
        who = self._route_keeper()
        ntrain = n if is_test is None else int(n - is_test.sum())
        self.stats = self.client.submit(_keeper_stats, self.keeper, ntrain, workers=[who],
                                        pure=False).result()
        self.stats["ntrain"] = ntrain
        return self.stats

    def _route_keeper(self) -> str:
        """Route the training and test ratings to the keeper (the first worker); its
        address."""
        n = self.nz.nnz
        label = np.zeros(n, np.int32) if self.is_test is None else \
            self.is_test.astype(np.int32)
        who = sorted(self.client.scheduler_info(n_workers=-1)["workers"])[0]
        self.keeper = self._route(label, 2, 1, {0: who}, with_ids=True)[0]
        return who

    def _kept(self):
        """The keeper, routed again from the collection if its worker was lost."""
        k = self.keeper
        # a lost keeper's future is cancelled (its routing inputs are forgotten) or lost
        try:
            if k is not None and k.status == "finished" and \
                    self.client.who_has([k]).get(k.key):
                return k
        except Exception:  # noqa: BLE001 - cancelled meanwhile: route it again
            pass
        from distributed import wait

        self.nz.reread(self.client)
        try:
            self._route_keeper()
            wait([self.keeper])
        finally:
            self.nz.release()
        if k is not None:
            k.release()
        return self.keeper

    def rebuilder(self, s):
        """``rebuild(parts, placement)`` for the part store: the collection read again
        and the ``parts``' ratings routed to their workers in ``placement`` (a lost
        worker's parts; the others stay where they are)."""
        from daskhpc.io import rereading

        return rereading(self.client, [self.nz], lambda parts, placement: self.part_values(
            s, placement, parts))

    def part_values(self, s, placement, parts=None) -> dict:
        """``{part: Future}`` of each part's ratings (or of ``parts``') on its worker
        (module docstring)."""
        K = s.K
        n = self.nz.nnz
        a = s.assignment
        label_r = np.empty(n, np.int32)        # in Ratings order: part * (K + 1) + group
        tr, te = s.train, s.test
        lab_train = a.row_parts[tr.rows] * (K + 1) + a.col_blocks[tr.cols]
        lab_test = a.row_parts[te.rows] * (K + 1) + K
        if self.is_test is None:
            label_r[:] = lab_train
        else:
            label_r[~self.is_test] = lab_train
            label_r[self.is_test] = lab_test
        del lab_train, lab_test
        where = {p: placement.worker(p) for p in range(K)}
        return self._route(label_r, K + 1, K, where, parts=parts)

    def _route(self, label_r, groups: int, nparts: int, where: dict, *, with_ids=False,
               parts=None):
        from daskhpc.io import route

        nz = self.nz
        if self.order is None:
            label = label_r
        else:
            label = np.empty_like(label_r)
            label[self.order] = label_r
        G = groups * nparts
        takes, counts = [], []
        for lo, hi in zip(nz.offsets[:-1], nz.offsets[1:]):
            lab = label[lo:hi]
            take = np.argsort(lab, kind="stable")
            b = np.searchsorted(lab[take], np.arange(G + 1))
            itype = np.int32 if hi - lo < 2**31 else np.int64
            takes.append((take.astype(itype), b[::groups].astype(np.int64)))
            counts.append(np.diff(b).reshape(nparts, groups))
        perms = self._perms(label, groups, nparts) if self.order is not None else {}
        args = {p: (np.array([c[p] for c in counts if c[p].sum()], np.int64).reshape(-1, groups),
                    perms.get(p)) for p in range(nparts)}
        return route(self.client, nz, takes, where, _part_join, args, with_ids=with_ids,
                     name="ssgd", parts=parts)

    def _perms(self, label, groups, nparts) -> dict:
        """Per part: the permutation from the join's order (label, collection position)
        to (label, Ratings position)."""
        inv = np.empty_like(self.order)
        inv[self.order] = np.arange(self.order.size)
        g = np.argsort(label, kind="stable")
        lab = label[g]
        b = np.searchsorted(lab, np.arange(groups * nparts + 1))
        out = {}
        for p in range(nparts):
            lo, hi = b[p * groups], b[(p + 1) * groups]
            perm = np.empty(hi - lo, np.int64)
            for q in range(p * groups, (p + 1) * groups):
                r = inv[g[b[q]:b[q + 1]]]
                perm[b[q] - lo:b[q + 1] - lo] = np.argsort(r, kind="stable") + (b[q] - lo)
            out[p] = perm
        return out

    def quality(self, W, H, s) -> dict:
        """The value-dependent quality numbers, computed on the keeper."""
        from ._serial import value_quality

        o = s.options
        keeper = self._kept()
        who = list(self.client.who_has([keeper]).get(keeper.key) or [])
        Wf, Hf = self.client.scatter([W, H], workers=who[:1] or None, hash=False)
        return self.client.submit(_keeper_quality, keeper, self.stats["ntrain"],
                                  self.remap, value_quality, Wf, Hf, o, s.mu, s.clip,
                                  workers=who[:1] or None, pure=False).result()

    def gather(self) -> tuple[np.ndarray, np.ndarray]:
        """(train values, test values) on the client (``check_serial`` only)."""
        from daskhpc.io import gathered

        gathered("ratings", self.nz.nnz, 8 * self.nz.nnz)
        return self.client.submit(_keeper_values, self._kept(), self.stats["ntrain"],
                                  pure=False).result()

    def release(self) -> None:
        self.nz.release()
        if self.keeper is not None:
            self.keeper.release()
            self.keeper = None


def full_setup(s):
    """``s`` with the ratings' values on the client (the serial reference needs them)."""
    tv, sv = s.values.gather()
    train = Ratings(s.train.rows, s.train.cols, tv, s.train.shape, s.train.source)
    test = Ratings(s.test.rows, s.test.cols, sv, s.test.shape, s.test.source)
    return replace(s, train=train, test=test, values=None, _blocks=None)


def with_values(d, vals):
    """On the part's worker: ``d`` (a PartData without ratings) with its ratings."""
    ends = np.cumsum([b.size for b in d.bli])
    d = replace(d, bval=np.split(vals[:ends[-1]] if len(ends) else vals[:0], ends[:-1]))
    if d.test_li is not None:
        d.test_val = vals[ends[-1] if len(ends) else 0:]
    return d


# -- on the workers ------------------------------------------------------------------------

def _part_join(arg, *segments):
    """Group the segments' values by label (part's block, then test), in collection
    order within a label; then into Ratings order (``perm``, for a Dask Array)."""
    counts, perm = arg
    ids = None
    if segments and isinstance(segments[0], tuple):
        ids = [s[0] for s in segments]
        segments = [s[1] for s in segments]
    starts = [np.concatenate([[0], np.cumsum(c)]) for c in counts]
    out, out_ids = [], []
    for q in range(counts.shape[1] if counts.size else 0):
        for k, seg in enumerate(segments):
            out.append(seg[starts[k][q]:starts[k][q + 1]])
            if ids is not None:
                out_ids.append(ids[k][:, starts[k][q]:starts[k][q + 1]])
    v = np.concatenate(out) if out else np.zeros(0)
    if perm is not None:
        v = v[perm]
    if ids is None:
        return v
    i = np.concatenate(out_ids, axis=1) if out_ids else np.zeros((2, 0), np.int64)
    return (i if perm is None else i[:, perm]), v


def _keeper_stats(keeper, ntrain) -> dict:
    from daskhpc.runtime import array_digest

    _, v = keeper
    tv = v[:ntrain]
    # Ratings.mean's expression on the training ratings in training order: the same bits
    return {"mean": float(tv.mean()) if tv.size else 0.0,
            "clip": (float(tv.min()), float(tv.max())),
            "digest": array_digest(v)}


def _keeper_quality(keeper, ntrain, remap, value_quality, W, H, o, mu, clip) -> dict:
    ids, v = keeper
    rows, cols = ids[0, :ntrain], ids[1, :ntrain]
    if remap is not None:
        rows, cols = remap[0][rows], remap[1][cols]
    return value_quality(rows, cols, v[:ntrain], v[ntrain:], W, H, o, mu, clip)


def _keeper_values(keeper, ntrain):
    _, v = keeper
    return v[:ntrain].copy(), v[ntrain:].copy()
