"""A Dask Array of vectors as ``allreduce``'s input: one row per rank, run where it is.

Row chunks are computed on the workers (chunk k on worker k mod W) and every row becomes
a rank's vector future there; the call then runs as for futures.
"""

from __future__ import annotations

import numpy as np

from daskhpc.errors import InputError
from daskhpc.io import check_array


def rank_futures(client, X) -> tuple[list, int, dict]:
    """``(futures, N, source)``: a Future per row of ``X`` on its chunk's worker (X checked)."""
    from daskhpc.runtime import worker_addresses

    from ._setup import MAX_N

    if not hasattr(X, "chunks") or X.ndim != 2:
        raise InputError(f"vectors: a {getattr(X, 'ndim', '?')}-D Dask collection; give a "
                         "2-D Dask Array, one row per rank")
    check_array(X, "vectors", ("numpy", "scipy.sparse", "sparse"),
                "numpy, scipy.sparse or sparse.COO", kinds="iuf", values="integers or floats")
    P, N = (int(n) for n in X.shape)
    if P < 1:
        raise InputError("vectors: an allreduce needs at least one vector (row)")
    if not 1 <= N <= MAX_N:
        raise InputError(f"vectors: vector length N must lie in [1, 2^32] (uint32 "
                         f"indices), got {N}")
    from dask.base import tokenize

    source = {"collection": tokenize(X), "vectors": P}
    if X.numblocks[1] > 1:
        X = X.rechunk({1: -1})              # on the workers: a rank's row is whole
    workers = worker_addresses(client)
    blocks = list(X.to_delayed().reshape(-1))
    chunks = [client.compute(b, workers=[workers[k % len(workers)]],
                             allow_other_workers=False) for k, b in enumerate(blocks)]
    bad = client.gather([client.submit(_first_bad_row, f, pure=False) for f in chunks])
    starts = np.concatenate([[0], np.cumsum(X.chunks[0])])
    for k, b in enumerate(bad):
        if b >= 0:
            for f in chunks:
                f.release()
            raise InputError(f"vectors: row {int(starts[k]) + b} (chunk {k}) holds NaN or "
                             "infinite values")
    out = []
    for k, (f, n) in enumerate(zip(chunks, X.chunks[0])):
        w = workers[k % len(workers)]
        out += [client.submit(_row, f, r, key=f"allreduce-row-{f.key}-{r}", workers=[w],
                              allow_other_workers=False) for r in range(int(n))]
    for f in chunks:
        f.release()                         # the rows keep what they need
    return out, N, source


def _row(block, r: int):
    """Row ``r`` of a chunk as a rank's vector: a 1 x N scipy matrix, or a dense 1-D row."""
    import scipy.sparse as sp

    if sp.issparse(block):
        return sp.csr_array(block)[[r]]
    if hasattr(block, "coords") and hasattr(block, "to_scipy_sparse"):    # sparse.COO
        return sp.csr_array(block[r:r + 1].to_scipy_sparse())
    return np.asarray(block)[r]


def _first_bad_row(block) -> int:
    """The chunk's first row with a NaN or infinite value, or -1."""
    import scipy.sparse as sp

    if sp.issparse(block):
        c = sp.coo_array(block)
        rows, vals = c.coords[0], c.data
    elif hasattr(block, "coords"):                                       # sparse.COO
        rows, vals = np.asarray(block.coords[0]), np.asarray(block.data)
    else:
        a = np.asarray(block)
        return int(np.flatnonzero(~np.isfinite(a).all(axis=1))[0]) if a.dtype.kind == "f" \
            and not np.isfinite(a).all() else -1
    if vals.dtype.kind != "f" or np.isfinite(vals).all():
        return -1
    return int(rows[~np.isfinite(vals)].min())
