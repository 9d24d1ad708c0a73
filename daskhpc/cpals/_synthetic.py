"""A seeded power-law sparse tensor for plans and benchmarks at scale, and a .tns writer."""

from __future__ import annotations

import numba
import numpy as np

from daskhpc.arrays import unique_sorted

from ._data import Tensor


def power_law_tensor(nnz: int = 10_000_000, shape=None, alphas=None, rank: int = 8,
                     noise: float = 0.5, seed: int = 0) -> Tensor:
    """Draw a power-law tensor with exactly ``nnz`` distinct nonzeros.

    Each mode's indices follow Zipf-like weights ``(i + 1) ** -alpha``, ids shuffled off
    the index order; values are ratings 1..5 from a non-negative rank-``rank`` model plus
    noise.

    Parameters
    ----------
    nnz : int
    shape : tuple of int, optional
        Default: user x item x day, ``(nnz / 200, nnz / 1000, 365)`` (at least 10 a mode).
    alphas : tuple of float, optional
        Zipf exponent per mode (default 0.6, 0.9, 0.3; 0.5 for more modes).
    rank, noise : int, float
        The non-negative model behind the values and the noise added to it.
    seed : int

    Returns
    -------
    Tensor
        Canonical (lexicographic) order.

    Examples
    --------
    >>> X = power_law_tensor(20_000, seed=1)
    >>> X.nnz, X.order, bool(X.vals.min() >= 1 and X.vals.max() <= 5)
    (20000, 3, True)
    """
    nnz = int(nnz)
    if shape is None:
        shape = (max(nnz // 200, 10), max(nnz // 1000, 10), 365)
    shape = tuple(int(s) for s in shape)
    N = len(shape)
    alphas = tuple(alphas) if alphas is not None else ((0.6, 0.9, 0.3) + (0.5,) * N)[:N]
    if float(np.prod(np.array(shape, dtype=float))) > 2.0**62:
        raise ValueError(f"shape {shape} is too large to draw distinct coordinates")
    if nnz > np.prod(np.array(shape, dtype=float)) / 2:
        raise ValueError(f"{nnz} nonzeros do not fit a sparse tensor of shape {shape}")
    rng = np.random.default_rng([int(seed), 0x7E45])
    strides = np.cumprod((1,) + shape[:0:-1])[::-1].astype(np.int64)   # C order
    # shuffled ids (popularity off the index order), applied before the key is formed:
    # sorted keys are then the final coordinates in lexicographic order
    perms = [rng.permutation(n) for n in shape]
    keys = np.zeros(0, np.int64)
    while keys.size < nnz:
        want = int((nnz - keys.size) * 1.3) + 1000
        k = np.zeros(want, np.int64)
        for m in range(N):
            k += perms[m][_zipf_like(rng, shape[m], alphas[m], want)] * strides[m]
        keys = unique_sorted(np.concatenate([keys, k]))
    drop = rng.choice(keys.size, size=keys.size - nnz, replace=False)
    keep = np.ones(keys.size, dtype=bool)
    keep[drop] = False
    keys = keys[keep]
    coords = np.empty((N, nnz), np.int64)
    rest = keys
    for m in range(N):
        coords[m], rest = np.divmod(rest, strides[m])
    F = tuple(rng.random((n, rank)) for n in shape)
    v = _model_values(coords, F)
    v = 1.0 + 4.0 * v / np.quantile(v, 0.99) + rng.normal(0.0, noise, nnz)
    vals = np.clip(np.rint(v), 1.0, 5.0)
    return Tensor(coords, vals, shape,
                  {"path": f"power-law(nnz={nnz}, seed={seed})", "shape": list(shape),
                   "nnz": nnz})


def _zipf_like(rng, n: int, alpha: float, size: int) -> np.ndarray:
    """Indices in [0, n) with density ~ (x + 1) ** -alpha, by the continuous inverse CDF."""
    u = rng.random(size)
    if abs(alpha - 1.0) < 1e-9:
        x = np.exp(u * np.log(n + 1.0)) - 1.0
    else:
        b = 1.0 - alpha
        x = (1.0 + u * ((n + 1.0) ** b - 1.0)) ** (1.0 / b) - 1.0
    return np.minimum(x.astype(np.int64), n - 1)


@numba.njit(cache=True, nogil=True)
def _model_values(coords, F):  # pragma: no cover - numba
    # sum_r prod_m F[m][coords[m, e], r]: the non-negative model behind the values
    N, nnz = coords.shape
    R = F[0].shape[1]
    out = np.empty(nnz)
    for e in range(nnz):
        s = 0.0
        for r in range(R):
            p = 1.0
            for m in range(N):
                p *= F[m][coords[m, e], r]
            s += p
        out[e] = s
    return out


@numba.njit(cache=True, nogil=True)
def _format_int_lines(coords, vals, buf):  # pragma: no cover - numba
    # "i1 i2 ... iN v\n" with 1-based indices and integer values, into buf; returns length
    N, n = coords.shape
    pos = 0
    digits = np.empty(24, np.uint8)
    for e in range(n):
        for m in range(N + 1):
            x = coords[m, e] + 1 if m < N else vals[e]
            if x < 0:
                buf[pos] = 45            # '-'
                pos += 1
                x = -x
            k = 0
            while True:
                digits[k] = 48 + x % 10
                x //= 10
                k += 1
                if x == 0:
                    break
            for t in range(k - 1, -1, -1):
                buf[pos] = digits[t]
                pos += 1
            buf[pos] = 32 if m < N else 10
            pos += 1
    return pos


def write_tns(path, X: Tensor, chunk: int = 1_000_000) -> None:
    """Write ``X`` as FROSTT ``.tns`` (1-based indices, then the value); integer values take
    a fast path, others ``repr`` precision."""
    integral = bool(np.all(X.vals == np.rint(X.vals)) and np.all(np.abs(X.vals) < 2.0**53))
    with open(path, "wb") as f:
        for a in range(0, X.nnz, chunk):
            b = min(a + chunk, X.nnz)
            c = np.ascontiguousarray(X.coords[:, a:b])
            if integral:
                buf = np.empty((b - a) * (X.order + 1) * 21, np.uint8)
                n = _format_int_lines(c, X.vals[a:b].astype(np.int64), buf)
                f.write(buf[:n].tobytes())
            else:
                lines = [" ".join(map(str, (c[:, e] + 1).tolist())) + " " + repr(float(v))
                         for e, v in enumerate(X.vals[a:b])]
                f.write(("\n".join(lines) + "\n").encode())
