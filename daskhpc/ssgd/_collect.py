"""Ratings from a Dask collection: the ids on the client, the ratings on the workers.

A ``dask.dataframe`` (original ids) is mapped as the ratings reader maps a file, its ids
staying on the workers too: the client gets O(rows + columns) summaries merged from the
pieces. A ``dask.array`` of sparse chunks holds 0-based indices (row-major, empty rows
and columns dropped). The *keeper*, one worker, holds the training and test ratings in
file-path order (mean, clip range, digest and objective come out the same bits); every
part's ratings are routed to its worker (:func:`daskhpc.io.route`, ``with_values``)."""

from __future__ import annotations

from dataclasses import replace
from operator import itemgetter

import numpy as np

from daskhpc._narrow import index_dtype, narrow_values
from daskhpc.errors import InputError

from ._input import Input
from ._data import (Ratings, holdout_mask, mean_of, placeholder,
                    wide_digest)


def read_input(client, data, *, columns=None, keep_empty: bool = False) -> Input:
    """The :class:`Input` of a collection, its ``values`` a :class:`Values`."""
    from daskhpc.io import read_nonzeros, read_ratings_frame

    if hasattr(data, "columns"):
        nz, maps = read_ratings_frame(data, client, columns=columns, name="ratings")
        source = {"collection": "dask.dataframe", "columns": list(nz.columns),
                  "partitions": len(nz.pieces), "shape": list(nz.shape), "nnz": nz.nnz}
        n = nz.nnz
        r = Ratings(placeholder(n, np.int64), placeholder(n, np.int64), placeholder(n),
                    nz.shape, source)
        return Input(r, maps, (None, None), nz.shape, 0, "ratings",
                     values=Values(client, nz, None, None, maps))
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
    """The ratings of a collection on the workers; ``order``: each rating's collection position
    (None: a DataFrame's), ``remap``: new ids of the kept rows and columns."""

    def __init__(self, client, nz, order, remap, maps=(None, None)):
        self.client, self.nz, self.order, self.remap = client, nz, order, remap
        self.maps = maps
        self.keeper = self.mask = None
        self.stats: dict = {}
        self.is_test = None

    @property
    def spread(self) -> bool:
        """The ids are on the workers only (a DataFrame)."""
        return self.order is None

    def hold_out(self, test_fraction: float, seed: int) -> dict:
        """Split as ``_data.split`` does and route the ratings to the keeper; returns its stats
        (a DataFrame's repeated (user, item) pair is refused here)."""
        n = self.nz.nnz
        who = self._first_worker()
        ntrain = shape = None               # a DataFrame's: counted and checked there
        if self.spread:
            self._release_mask()
            self.mask = self.client.submit(holdout_mask, n, test_fraction, seed,
                                           workers=[who], pure=False)
            shape = self.nz.shape
        else:
            self.is_test = holdout_mask(n, test_fraction, seed)
            ntrain = n if self.is_test is None else int(n - self.is_test.sum())
        self._route_keeper(who)
        stats = self.client.submit(_keeper_stats, self.keeper, ntrain, self.mask, shape,
                                   workers=[who], pure=False).result()
        if stats.get("repeat") is not None:
            from daskhpc.io import repeat_error

            err = repeat_error("ratings", self.maps, self.nz.offsets, *stats["repeat"])
            self.release()
            raise err
        self.stats = stats
        return self.stats

    def split(self, ratings: Ratings, test_fraction: float, seed: int):
        """``(train, test)`` placeholders of a DataFrame's ``ratings`` and the keeper's stats."""
        stats = self.hold_out(test_fraction, seed)
        return (*(Ratings(placeholder(k, np.int64), placeholder(k, np.int64),
                          placeholder(k), ratings.shape, dict(ratings.source))
                  for k in (stats["ntrain"], ratings.nnz - stats["ntrain"])), stats)

    def seen(self, shape):
        """The training ratings' pattern (``SSGDResult.seen``), made on the keeper."""
        return self.client.submit(_keeper_seen, self._kept(), self.stats["ntrain"], shape,
                                  pure=False).result()

    def _each(self, fn, *args) -> list:
        """``fn(piece, lo, mask, *args)`` on every piece's worker."""
        return [self.client.submit(fn, piece, int(lo), self.mask, *args, pure=False)
                for piece, lo in zip(self.nz.pieces, self.nz.offsets[:-1])]

    def _merged(self, fn, *args):
        """:meth:`_each`'s results summed (arrays) on a worker, then gathered."""
        return self.client.submit(_summed, *self._each(fn, *args), pure=False).result()

    def train_rows(self) -> np.ndarray:
        """Training ratings per row (a DataFrame's, counted on the workers)."""
        return self._merged(_train_rows, self.nz.shape[0])

    def train_ids(self) -> tuple[np.ndarray, np.ndarray]:
        """(rows, cols) of the training ratings on the client, for a hypergraph partition."""
        ids = self.client.submit(_keeper_ids, self._kept(), self.stats["ntrain"],
                                 pure=False).result()
        return ids[0], ids[1]

    def pins(self, row_parts: np.ndarray, col_blocks: np.ndarray, K: int) -> dict:
        """A DataFrame's ``train``/``test`` (column, part) keys and K x K training ``blocks``."""
        rp, cb = self.client.scatter([row_parts, col_blocks], broadcast=True, hash=False)
        got = self.client.submit(_merged_pins, *self._each(_piece_pins, rp, cb, K),
                                 pure=False).result()
        return dict(zip(("train", "test", "blocks"), got))

    def _first_worker(self) -> str:
        """The keeper's worker: the first (part 0's in a ring placement)."""
        from daskhpc.runtime import worker_addresses

        workers = worker_addresses(self.client)
        if not workers:
            raise RuntimeError("the cluster has no workers to keep the ratings")
        return workers[0]

    def _route_keeper(self, who) -> None:
        """Route the training and test ratings to the keeper (worker ``who``)."""
        if self.spread:
            labels = (_test_label,)
        else:
            labels = np.zeros(self.nz.nnz, np.int32) if self.is_test is None else \
                self.is_test.astype(np.int32)
        self.keeper = self._route(labels, 2, 1, {0: who}, with_ids=True)[0]

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
            self._route_keeper(self._first_worker())
            wait([self.keeper])
        finally:
            self.nz.release()
        if k is not None:
            k.release()
        return self.keeper

    def rebuilder(self, s):
        """``rebuild(parts, placement)``: the lost parts' ratings read and routed again."""
        from daskhpc.io import rereading

        return rereading(self.client, [self.nz], lambda parts, placement: self.part_values(
            s, placement, parts))

    def part_values(self, s, placement, parts=None) -> dict:
        """``{part: Future}`` of each part's ratings (or of ``parts``') on its worker."""
        K = s.K
        a = s.assignment
        where = {p: placement.worker(p) for p in range(K)}
        if self.spread:     # labelled on the pieces' workers; with ids, for the local ones
            rp, cb = self.client.scatter([a.row_parts, a.col_blocks], broadcast=True,
                                         hash=False)
            return self._route((_part_label, rp, cb, K), K + 1, K, where, parts=parts,
                               with_ids=True, join=_part_ids_join)
        label_r = np.empty(self.nz.nnz, np.int32)     # in Ratings order: part * (K + 1) + group
        tr, te = s.train, s.test
        lab_train = a.row_parts[tr.rows] * (K + 1) + a.col_blocks[tr.cols]
        lab_test = a.row_parts[te.rows] * (K + 1) + K
        if self.is_test is None:
            label_r[:] = lab_train
        else:
            label_r[~self.is_test] = lab_train
            label_r[self.is_test] = lab_test
        del lab_train, lab_test
        return self._route(label_r, K + 1, K, where, parts=parts)

    def _route(self, labels, groups: int, nparts: int, where: dict, *, with_ids=False,
               parts=None, join=None):
        """``labels``: per rating in Ratings order, or ``(fn, *args)`` labelling each piece."""
        from daskhpc.io import route

        nz = self.nz
        G = groups * nparts
        takes, counts, perms = [], [], {}
        if isinstance(labels, tuple):
            made = self._each(_labelled, G, *labels)
            bounds = self.client.gather([self.client.submit(itemgetter(1), f, pure=False)
                                         for f in made])
            takes = [(self.client.submit(itemgetter(0), f, pure=False), b[::groups])
                     for f, b in zip(made, bounds)]
            del made
            counts = [np.diff(b).reshape(nparts, groups) for b in bounds]
        else:
            label = labels
            if self.order is not None:
                label = np.empty_like(labels)
                label[self.order] = labels
            for lo, hi in zip(nz.offsets[:-1], nz.offsets[1:]):
                take, b = _take(label[lo:hi], G)
                takes.append((take, b[::groups]))
                counts.append(np.diff(b).reshape(nparts, groups))
            if self.order is not None:
                perms = self._perms(label, groups, nparts)
        args = {p: (np.array([c[p] for c in counts if c[p].sum()], np.int64).reshape(-1, groups),
                    perms.get(p)) for p in range(nparts)}
        return route(self.client, nz, takes, where, join or _part_join, args,
                     with_ids=with_ids, name="ssgd", parts=parts)

    def _perms(self, label, groups, nparts) -> dict:
        """Per part: permutation from (label, collection position) to (label, Ratings position)."""
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

    def gather(self) -> tuple:
        """(train values, test values, a DataFrame's ids or None) for ``check_serial``."""
        from daskhpc.io import gathered

        gathered("ratings", self.nz.nnz, 8 * self.nz.nnz)
        return self.client.submit(_keeper_values, self._kept(), self.stats["ntrain"],
                                  self.spread, pure=False).result()

    def release(self) -> None:
        self.nz.release()
        if self.keeper is not None:
            self.keeper.release()
            self.keeper = None
        self._release_mask()

    def _release_mask(self) -> None:
        if self.mask is not None:
            self.mask.release()
            self.mask = None


def full_setup(s):
    """``s`` with the ratings' values on the client (the serial reference needs them)."""
    tv, sv, ids = s.values.gather()
    tr, te = s.train, s.test
    n = tv.size
    rows, cols = ((tr.rows, tr.cols), (te.rows, te.cols)) if ids is None else \
        ((ids[0, :n], ids[1, :n]), (ids[0, n:], ids[1, n:]))   # (train, test) ids
    train = Ratings(*rows, tv, tr.shape, tr.source)
    test = Ratings(*cols, sv, te.shape, te.source)
    return replace(s, train=train, test=test, values=None, _blocks=None)


def with_values(d, vals):
    """On the part's worker: ``d`` with its ratings; a DataFrame's ``vals`` is ``(ids, values,
    sizes)``, whose ids become local rows and columns here."""
    if isinstance(vals, tuple):
        return _with_ids(d, *vals)
    ends = np.cumsum([b.size for b in d.bli])
    vals = narrow_values(vals)
    d = replace(d, bval=np.split(vals[:ends[-1]] if len(ends) else vals[:0], ends[:-1]))
    if d.test_li is not None:
        d.test_val = vals[ends[-1] if len(ends) else 0:]
    return d


def _part_join(arg, *segments):
    """Group the segments' values by label in collection order, then into Ratings order."""
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


def _with_ids(d, ids, vals, sizes):
    """:func:`with_values` of a DataFrame, numbering as ``_parts.part_data`` does."""
    K = d.K
    it = index_dtype(max(d.rows.size, *(c.size for c in d.cols)))
    ends = np.cumsum(sizes)[:-1]
    li = np.split(np.searchsorted(d.rows, ids[0]).astype(it), ends)
    cj = np.split(ids[1], ends)
    val = np.split(narrow_values(vals), ends)
    d = replace(d, bli=li[:K], bval=val[:K],
                blj=[np.searchsorted(d.cols[b], cj[b]).astype(it) for b in range(K)])
    if d.test_cols is not None:
        d.test_li, d.test_val = li[K], val[K]
        d.test_lj = np.searchsorted(d.test_cols, cj[K]).astype(it)
    return d


def _take(lab, G):
    """``(take, bounds)``: positions by label (stable), where each of ``G`` labels starts."""
    take = np.argsort(lab, kind="stable")
    b = np.searchsorted(lab[take], np.arange(G + 1)).astype(np.int64)
    return take.astype(index_dtype(lab.size)), b


def _labelled(piece, lo, mask, G, fn, *args):
    return _take(fn(piece, lo, mask, *args), G)


def _piece_mask(mask, lo, n):
    """The piece's part of the hold-out mask (None: no test ratings)."""
    return None if mask is None else mask[lo:lo + n]


def _test_label(piece, lo, mask):
    n = piece[1].size
    m = _piece_mask(mask, lo, n)
    return np.zeros(n, np.int32) if m is None else m.astype(np.int32)


def _part_label(piece, lo, mask, row_parts, col_blocks, K):
    """part * (K + 1) + column block (training) or K (test): the join's groups."""
    ids = piece[0]
    lab = (row_parts[ids[0]] * (K + 1)).astype(np.int32)
    m = _piece_mask(mask, lo, ids.shape[1])
    blk = col_blocks[ids[1]]
    lab += blk if m is None else np.where(m, K, blk)
    return lab


def _part_ids_join(arg, *segments):
    """:func:`_part_join` with ids, and the size of each group."""
    out = _part_join(arg, *segments)
    ids, v = out if isinstance(out, tuple) else (np.zeros((2, 0), np.int64), out)
    return ids, v, arg[0].sum(axis=0)


def _train_rows(piece, lo, mask, N):
    rows = piece[0][0]
    m = _piece_mask(mask, lo, rows.size)
    return np.bincount(rows if m is None else rows[~m], minlength=N)


def _piece_pins(piece, lo, mask, row_parts, col_blocks, K):
    """A piece's distinct training and test (column, part) keys, its block counts."""
    ids = piece[0]
    part = row_parts[ids[0]]
    key = ids[1] * K + part
    blk = part * K + col_blocks[ids[1]]
    m = _piece_mask(mask, lo, ids.shape[1])
    if m is not None:
        key, test, blk = key[~m], key[m], blk[~m]
    else:
        test = key[:0]
    return np.unique(key), np.unique(test), np.bincount(blk, minlength=K * K)


def _merged_pins(*got):
    return (np.unique(np.concatenate([g[0] for g in got])),
            np.unique(np.concatenate([g[1] for g in got])), _summed(*[g[2] for g in got]))


def _summed(*arrays):
    out = np.array(arrays[0], copy=True)
    for a in arrays[1:]:
        out += a            # in place: one array however many pieces, its dtype kept
    return out


def _keeper_stats(keeper, ntrain, mask, shape) -> dict:
    """Mean, clip range and digests; for a DataFrame (``shape``) also the training count and
    the first repeated pair (collection positions) or None."""
    from daskhpc.io import repeated_pair

    ids, v = keeper
    out = {}
    if shape is not None:
        ntrain = v.size - (0 if mask is None else int(np.count_nonzero(mask)))
        found = repeated_pair(ids, shape)
        if found is not None and mask is not None:   # keeper order -> collection order
            order = np.concatenate([np.flatnonzero(~mask), np.flatnonzero(mask)])
            first, second = sorted(int(order[k]) for k in found[:2])
            found = (first, second, *found[2:])
        # widened: the digests 64-bit ids and ratings had (checkpoints made before)
        out = {"repeat": found, "ids_digest": wide_digest(ids)}
    tv = v[:ntrain]
    # Ratings.mean's expression on the training ratings in training order: the same bits
    out.update(mean=mean_of(tv),
               clip=(float(tv.min()), float(tv.max())), digest=wide_digest(v),
               ntrain=int(ntrain))
    return out


def _keeper_quality(keeper, ntrain, remap, value_quality, W, H, o, mu, clip) -> dict:
    ids, v = keeper
    rows, cols = ids[0, :ntrain], ids[1, :ntrain]
    if remap is not None:
        rows, cols = remap[0][rows], remap[1][cols]
    return value_quality(rows, cols, v[:ntrain], v[ntrain:], W, H, o, mu, clip)


def _keeper_values(keeper, ntrain, with_ids=False):
    ids, v = keeper
    return v[:ntrain].copy(), v[ntrain:].copy(), (ids.copy() if with_ids else None)


def _keeper_seen(keeper, ntrain, shape):
    import scipy.sparse as sp

    ids = keeper[0][:, :ntrain]
    seen = sp.csr_array((np.ones(ntrain, np.int8), (ids[0], ids[1])), shape=shape)
    seen.sum_duplicates()
    return seen


def _keeper_ids(keeper, ntrain):
    return keeper[0][:, :ntrain].copy()
