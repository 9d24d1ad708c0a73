"""A Dask Array of scipy.sparse row chunks as ``fit``'s X: the values stay on the workers.

The client reads the pins and the labels and makes from the pattern what the in-memory
path makes from the matrix (parts, batches, plans); each entry goes to its part's
worker (:func:`daskhpc.io.route`), where the part's CSR block is built exactly as
``d.X[rows]`` slices it: the run is the in-memory run, bit for bit.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import scipy.sparse as sp

from daskhpc._workflows import checked_options
from daskhpc.errors import InputError
from daskhpc.io import (check_array, is_collection, join_rows, labels_route, read_nonzeros,
                        rereading, route)

from ._data import load
from ._program import statics
from ._setup import Options, prepare, setup_of
from ._update import power_iteration


def _labels(client, y, M: int, what: str = "y", of: str = "X"):
    """The labels on the client: a Dask Array checked from its metadata, then computed."""
    if y is None:
        raise InputError(f"{what}: give the labels (a Dask Array or an array, one per row of "
                         f"{of})")
    if not is_collection(y):
        return y
    if not hasattr(y, "chunks") or y.ndim != 1:
        raise InputError(f"{what}: a {type(y).__name__} of {getattr(y, 'ndim', '?')} "
                         "dimensions; give a 1-D Dask Array of labels")
    if any(np.isnan(c) for c in y.chunks[0]):
        raise InputError(f"{what}: the Dask Array's chunk sizes are unknown (nan); call "
                         ".compute_chunk_sizes() first")
    if y.shape[0] != M:
        raise InputError(f"{what}: {y.shape[0]} labels for {M} rows of {of}")
    if getattr(y.dtype, "kind", "O") not in "biuf":
        raise InputError(f"{what}: labels of dtype {y.dtype}; labels must be numbers")
    out = client.compute(y).result()
    if out.dtype.kind == "f" and not np.all(np.isfinite(out)):
        bad = int(np.flatnonzero(~np.isfinite(out))[0])
        raise InputError(f"{what}: NaN or infinite label at row {bad}")
    return out


def test_collection(test) -> bool:
    """Whether ``test`` is ``(X_test, y_test)`` with X_test (or y_test) a Dask collection."""
    return isinstance(test, tuple) and len(test) == 2 and any(map(is_collection, test))


class TestSet:
    """A test set whose X stays on the workers: its nonzeros, labels and pattern."""

    def __init__(self, nz, y):
        self.nz, self.y = nz, y

    def pattern(self):
        nz = self.nz
        return sp.csr_array((np.ones(nz.nnz), (nz.pins[0], nz.pins[1])), shape=nz.shape)

    def release(self):
        self.nz.release()


def _read_test(client, test):
    """``TestSet`` of ``(X_test, y_test)`` whose X_test is a Dask Array of row chunks."""
    Xt, yt = test
    if not (is_collection(Xt) and hasattr(Xt, "chunks")):
        raise InputError(f"test: X_test is a {type(Xt).__name__}; with a Dask collection in "
                         "the test set give X_test as a Dask Array of scipy.sparse row "
                         "chunks")
    if Xt.ndim != 2:
        raise InputError(f"test: X_test is a {Xt.ndim}-D Dask Array; need rows x features")
    nz = read_nonzeros(Xt, client, order=2, name="test X")
    try:
        y = _labels(client, yt, nz.shape[0], "test labels", "the test X")
    except BaseException:
        nz.release()
        raise
    return TestSet(nz, y)


def prepare_collection(client, X, y, nparts, test, options):
    """``(setup, nonzeros, y)``: the run's Setup from X's pattern and the labels."""
    opts = checked_options(Options, options, "linear")
    if not (is_collection(X) and hasattr(X, "chunks")):
        raise InputError(f"X: a {type(X).__name__}; give X as a Dask Array of "
                         "scipy.sparse row chunks (rows x features)")
    if X.ndim != 2:
        raise InputError(f"X: a {X.ndim}-D Dask Array; need a 2-D matrix (rows x features)")
    check_array(X, "X", ("scipy.sparse", "sparse", "numpy"), "scipy.sparse, sparse.COO or numpy")
    M, F = (int(n) for n in X.shape)
    if is_collection(y) and getattr(y, "ndim", 1) == 1 and hasattr(y, "chunks") \
            and not any(np.isnan(c) for c in y.chunks[0]) and y.shape[0] != M:
        raise InputError(f"y: {y.shape[0]} labels for {M} rows of X")
    t0 = time.perf_counter()
    nz = read_nonzeros(X, client, order=2, name="X")
    tset = None
    try:
        labels = _labels(client, y, M)
        if test_collection(test):      # its X's values stay on the workers too
            tset = _read_test(client, test)
            test = (tset.pattern(), tset.y)
        pattern = sp.csr_array((np.ones(nz.nnz), (nz.pins[0], nz.pins[1])), shape=(M, F))
        data = load(pattern, labels, test, fit_intercept=opts.fit_intercept,
                    n_features=opts.n_features)
        del pattern
        data.source["collection"] = nz.token
        if tset is not None:
            data.source["test"] = "dask.array"
            data.source["test_collection"] = tset.nz.token
        if opts.curvature is None:         # of X's values, which stay on the workers
            opts = replace(opts, curvature=_curvature(client, nz, opts.fit_intercept))
        s = setup_of(opts, data, nparts, t0)
        s.test_set = tset
    except BaseException:
        nz.release()
        if tset is not None:
            tset.release()
        raise
    return s, nz, labels


def part_statics(client, s, nz, placement, parts=None) -> dict:
    """``{part: Future}`` of every part's static data, its CSR rows built on its worker."""
    P = s.nparts
    owner = np.empty(s.data.X.shape[0], np.int64)
    for p, rows in enumerate(s.rows):
        owner[rows] = p
    labels = owner[nz.pins[0]]
    shells = statics(s, rows=False)
    width = s.data.n_features
    where = {p: placement.worker(p) for p in range(P)}
    tests = _test_parts(client, s, where, parts)
    for p, f in tests.items():          # the test rows are built on the part's worker
        shells[p] = {k: v for k, v in shells[p].items() if k != "Xt"}
    args = {p: (s.rows[p], width, s.data.fit_intercept, shells[p], tests.get(p))
            for p in range(P)}
    futs = route(client, nz, labels_route(labels, nz.offsets, P), where, _part_static, args,
                 with_ids=True, name="linear", parts=parts)
    if parts is None:
        from distributed import wait

        wait(list(futs.values()))
    return futs


def _test_parts(client, s, where: dict, parts=None) -> dict:
    """``{part: Future}`` of every part's test rows built on its worker (``{}`` without)."""
    tset = getattr(s, "test_set", None)
    if tset is None:
        return {}
    nz = tset.nz
    owner = np.empty(nz.shape[0], np.int64)
    for p, rows in enumerate(s.test_rows):
        owner[rows] = p
    args = {p: (rows, s.data.n_features, s.data.fit_intercept)
            for p, rows in enumerate(s.test_rows)}
    return route(client, nz, labels_route(owner[nz.pins[0]], nz.offsets, s.nparts), where,
                 _test_rows, args, with_ids=True, name="linear-test", parts=parts)


def rebuilder(client, s, nz):
    """``rebuild(parts, placement)`` for the part store: X read again, the parts rebuilt."""
    tset = getattr(s, "test_set", None)
    return rereading(client, [nz] if tset is None else [nz, tset.nz],
                     lambda parts, placement: part_statics(client, s, nz, placement, parts))


def _csr_rows(rows, width, intercept, segments):
    """``X[rows]`` of the entries routed here, as the client slices it (intercept last)."""
    ids, vals = join_rows(segments, order=2)
    X = sp.csr_array((vals, (np.searchsorted(rows, ids[0]), ids[1])),
                     shape=(rows.size, width))
    X.sum_duplicates()
    if intercept:
        X = sp.csr_array(sp.hstack([X, sp.csr_array(np.ones((rows.size, 1)))], format="csr"))
    return X.indptr, X.indices, X.data


def _test_rows(arg, *segments):
    """On the part's worker: its test rows as ``d.X_test[test_rows]`` would be."""
    rows, width, intercept = arg
    return _csr_rows(rows, width, intercept, segments)


def _part_static(arg, *segments):
    """On the part's worker: its rows as ``d.X[rows]`` would be, in the client's shell."""
    rows, width, intercept, shell, test = arg
    out = {**shell, "X": _csr_rows(rows, width, intercept, segments)}
    if test is not None:
        out["Xt"] = test
    return out


def _curvature(client, nz, intercept: bool) -> float:
    """``_update.curvature`` of X from its pieces: ``X v`` and ``X^T m`` summed on the client."""
    M, F = nz.shape

    def sums(fn, x, n):
        x = client.scatter(x, broadcast=True)
        return np.sum([r for r in client.gather([client.submit(fn, p, x, n, pure=False)
                                                 for p in nz.pieces])], axis=0) \
            if nz.pieces else np.zeros(n)

    def gram(v):
        m = sums(_summary_matvec, v[:F], M)
        if intercept:
            m = m + v[F]
        g = sums(_summary_rmatvec, m, F)
        return np.concatenate([g, [m.sum()]]) if intercept else g

    return power_iteration(gram, M, F + int(intercept))


def _summary_matvec(piece, v, M):
    """A piece's share of ``X v``."""
    ids, vals = piece[0], piece[1]
    return np.bincount(ids[0], weights=vals * v[ids[1]], minlength=M)


def _summary_rmatvec(piece, m, F):
    """A piece's share of ``X^T m``."""
    ids, vals = piece[0], piece[1]
    return np.bincount(ids[1], weights=vals * m[ids[0]], minlength=F)


def full_setup(client, s, nz, labels, test, options):
    """The run's Setup with X's values on the client (``check_serial`` only)."""
    r, c = nz.pins[0].astype(np.int64), nz.pins[1].astype(np.int64)
    X = sp.csr_array((nz.gather_values(client), (r, c)), shape=nz.shape)
    tset = getattr(s, "test_set", None)
    if tset is not None:
        t = tset.nz
        test = (sp.csr_array((t.gather_values(client), (t.pins[0].astype(np.int64),
                                                         t.pins[1].astype(np.int64))),
                             shape=t.shape), tset.y)
    return prepare(X, labels, s.nparts, test=test,
                   **{**options, "curvature": s.options.curvature})
