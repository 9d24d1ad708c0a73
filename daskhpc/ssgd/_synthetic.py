"""A seeded power-law ratings matrix, for plans and benchmarks at scale."""

from __future__ import annotations

import numpy as np

from daskhpc.arrays import unique_sorted
from daskhpc.errors import InputError

from ._data import Ratings


def power_law_ratings(nnz: int = 10_000_000, n_users: int | None = None,
                      n_items: int | None = None, alpha_users: float = 0.6,
                      alpha_items: float = 0.9, rank: int = 8, noise: float = 0.5,
                      seed: int = 0, path=None, format: str = "csv") -> Ratings:
    """Draw a power-law ratings matrix with exactly ``nnz`` ratings.

    Users and items are drawn with Zipf-like weights ``(i + 1) ** -alpha`` until ``nnz``
    distinct pairs exist (unused ones dropped); values are a low-rank model plus noise,
    rounded to half stars in [0.5, 5].

    Parameters
    ----------
    nnz : int
        Number of distinct ratings.
    n_users, n_items : int, optional
        Candidate users and items (default nnz / 50 and nnz / 200).
    alpha_users, alpha_items : float
        Zipf exponents of user activity and item popularity.
    rank, noise : int, float
        The low-rank model behind the values and the noise added to it.
    seed : int
    path, format : path, {"csv", "parquet"}, optional
        Also write the ratings there (:func:`write_ratings_csv`, or a directory of
        :func:`write_ratings_parquet` files).

    Returns
    -------
    Ratings
        Triplets sorted by user then item.

    Examples
    --------
    >>> r = power_law_ratings(20_000, seed=1)
    >>> r.nnz, bool(r.vals.min() >= 0.5), bool(r.vals.max() <= 5.0)
    (20000, True, True)
    """
    if format not in ("csv", "parquet"):
        raise ValueError(f"format must be 'csv' or 'parquet', not {format!r}")
    rng = np.random.default_rng([int(seed), 0x9A7])
    N = int(n_users or max(nnz // 50, 10))
    M = int(n_items or max(nnz // 200, 10))
    if nnz > N * M // 2:
        raise ValueError(f"{nnz} ratings do not fit a sparse {N} x {M} matrix")
    pu = (np.arange(N) + 1.0) ** -alpha_users
    pi = (np.arange(M) + 1.0) ** -alpha_items
    cu, ci = np.cumsum(pu / pu.sum()), np.cumsum(pi / pi.sum())
    keys = np.zeros(0, np.int64)
    while keys.size < nnz:
        want = int((nnz - keys.size) * 1.3) + 1000
        u = np.minimum(np.searchsorted(cu, rng.random(want)), N - 1)
        i = np.minimum(np.searchsorted(ci, rng.random(want)), M - 1)
        keys = unique_sorted(np.concatenate([keys, u * M + i]))
    keys = rng.choice(keys, size=nnz, replace=False)
    keys.sort()
    users, items = keys // M, keys % M
    # Shuffle ids so popularity is not sorted by index, then drop unused ids.
    users = rng.permutation(N)[users]
    items = rng.permutation(M)[items]
    uid, rows = unique_sorted(users, return_inverse=True)
    iid, cols = unique_sorted(items, return_inverse=True)
    U = rng.normal(0.0, 1.0 / np.sqrt(rank), (uid.size, rank))
    V = rng.normal(0.0, 1.0, (iid.size, rank))
    vals = 3.5 + np.einsum("ir,ir->i", U[rows], V[cols]) + rng.normal(0.0, noise, nnz)
    vals = np.clip(np.round(vals * 2.0) / 2.0, 0.5, 5.0)
    o = np.lexsort((cols, rows))
    r = Ratings(rows[o], cols[o], vals[o], (uid.size, iid.size),
                {"path": f"power-law(nnz={nnz}, seed={seed})",
                 "shape": [int(uid.size), int(iid.size)], "nnz": int(nnz)})
    if path is not None:
        (write_ratings_csv if format == "csv" else write_ratings_parquet)(path, r)
    return r


def write_ratings_csv(path, r: Ratings, chunk: int = 1_000_000) -> None:
    """Write ``user,item,rating`` lines with a header (what ``daskhpc.io`` reads back)."""
    with open(path, "w", encoding="ascii") as f:
        f.write("userId,movieId,rating\n")
        for a in range(0, r.nnz, chunk):
            b = min(a + chunk, r.nnz)
            lines = np.char.add(np.char.add(np.char.add(r.rows[a:b].astype(str), ","),
                                            np.char.add(r.cols[a:b].astype(str), ",")),
                                np.char.mod("%.1f", r.vals[a:b]))
            f.write("\n".join(lines.tolist()))
            f.write("\n")


def write_ratings_parquet(path, r: Ratings, files: int = 8,
                          row_group: int = 1_000_000) -> list:
    """Write ``userId, movieId, rating`` as a directory of Parquet files ``part-000.parquet``,
    ... in row order (needs pandas and pyarrow); returns the paths."""
    import os

    try:
        import pandas as pd
    except ImportError:
        raise InputError('writing Parquet needs pandas and pyarrow: pip install '
                         '"daskhpc[dataframe]"') from None
    os.makedirs(path, exist_ok=True)
    files = max(1, min(int(files), r.nnz))
    cuts = np.linspace(0, r.nnz, files + 1).astype(np.int64)
    out = []
    for k, (a, b) in enumerate(zip(cuts[:-1], cuts[1:])):
        f = os.path.join(os.fspath(path), f"part-{k:03d}.parquet")
        pd.DataFrame({"userId": r.rows[a:b], "movieId": r.cols[a:b],
                      "rating": r.vals[a:b]}).to_parquet(f, index=False,
                                                         row_group_size=row_group)
        out.append(f)
    return out
