"""Who does what: the four partitions of the hypertensor paper's experiments.

* **coarse-hp** (section 3.1): the coarse-grain hypergraph for km1 (exactly the rows an
  iteration sends); the per-mode balance is reported, not guaranteed.
* **coarse-block** (DFacTo-like): each mode's slices cut into ranges of equal nonzeros.
* **fine-hp** (section 3.2): the nonzeros on the fine-grain hypergraph, factor rows
  placed by the paper's post-pass (:func:`hypergraph.assign_factor_rows`).
* **fine-random**: nonzeros and every mode's rows dealt at random.

``owners[m][i]`` (mu_m) owns row i of U_m; nonzero e is processed by ``nnz_parts[e]``
(fine) or by ``owners[n][i_n]`` in mode n (coarse: replicated on its N slices' owners)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numba
import numpy as np

from daskhpc import hypergraph as hg
from daskhpc._narrow import counts as part_counts, index_dtype
from daskhpc.errors import InputError

from ._kernels import counting_order
from ._data import Tensor

GRAINS = ("fine", "coarse")
#: Items dealt at once (their int64 temporaries' size) by :func:`random_parts`
BLOCK = 1 << 20
PARTITIONS = {"fine": ("hp", "random"), "coarse": ("hp", "block")}


@dataclass(eq=False)
class Distribution:
    """A partition of the work and the factor rows of a tensor over K parts."""

    grain: str
    method: str
    nparts: int
    owners: list
    nnz_parts: np.ndarray | None = None
    partitioner: str | None = None
    time_s: float = 0.0
    choice: dict | None = None
    km1: int | None = None            # of the hypergraph the method partitioned (rows)
    meta: dict = field(default_factory=dict)

    def loads(self, X: Tensor, mode: int) -> np.ndarray:
        """Nonzeros each part processes in ``mode`` (the paper's computational load)."""
        if self.grain == "fine":
            return part_counts(self.nnz_parts, self.nparts)
        # coarse: the owners' slice sizes summed (exact in float64 below 2**53 nonzeros)
        per_slice = np.bincount(X.coords[mode], minlength=X.shape[mode])
        return np.bincount(self.owners[mode], weights=per_slice,
                           minlength=self.nparts).astype(np.int64)

    def connectivity(self, X: Tensor, mode: int) -> tuple[np.ndarray, np.ndarray]:
        """Lambda_i of every row of mode ``mode`` as CSR: the parts holding a nonzero of slice i
        (fine), or computing one in another mode (coarse)."""
        K, N = self.nparts, X.order
        if self.grain == "fine":
            return pairs_csr(X.coords[mode], self.nnz_parts, X.shape[mode], K)
        rows = X.coords[mode]
        others = [self.owners[m][X.coords[m]] for m in range(N) if m != mode]
        if _bits_fit(X.shape[mode], K, rows.size):
            return _pairs_by_bits(rows, others, X.shape[mode], K)
        return pairs_csr(np.tile(rows, len(others)), np.concatenate(others), X.shape[mode], K)


def _bits_fit(nrows: int, nparts: int, entries: int) -> bool:
    """A bit per (row, part) takes less memory than sorting ``2 * entries`` pairs."""
    return nrows * ((nparts + 63) // 64) <= 2 * entries


@numba.njit(cache=True, nogil=True)
def _mark(bits, rows, parts):  # pragma: no cover - numba
    for e in range(rows.size):
        p = parts[e]
        bits[rows[e], p >> 6] |= np.uint64(1) << np.uint64(p & 63)


@numba.njit(cache=True, nogil=True)
def _bits_csr(bits, nparts):  # pragma: no cover - numba
    nrows, W = bits.shape
    ptr = np.zeros(nrows + 1, np.int64)
    for i in range(nrows):
        c = 0
        for w in range(W):
            x = bits[i, w]
            while x:
                x &= x - np.uint64(1)          # clears the lowest set bit
                c += 1
        ptr[i + 1] = ptr[i] + c
    out = np.empty(ptr[nrows], np.int64)
    for i in range(nrows):
        k = ptr[i]
        for w in range(W):
            x = bits[i, w]
            b = 0
            while x:
                if x & np.uint64(1):
                    out[k] = 64 * w + b
                    k += 1
                x >>= np.uint64(1)
                b += 1
    return ptr, out


def _pairs_by_bits(rows, parts_list, nrows: int, nparts: int):
    """:func:`pairs_csr` of ``rows`` against each of ``parts_list``, with a bit per (row,
    part): no sort, no copy of the rows."""
    bits = np.zeros((int(nrows), (int(nparts) + 63) // 64), np.uint64)
    r = np.ascontiguousarray(rows)          # any integer dtype: no int64 copy of the pins
    for parts in parts_list:
        _mark(bits, r, np.ascontiguousarray(parts))
    return _bits_csr(bits, int(nparts))


def pairs_csr(rows, parts, nrows: int, nparts: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (row, part) pairs as CSR over rows, parts ascending."""
    if _bits_fit(nrows, nparts, np.size(rows)):
        return _pairs_by_bits(rows, [parts], nrows, nparts)
    # bucket the entries by row (counting sort), then each row's distinct parts as a net's:
    # O(entries + K), no global sort of the (row, part) keys
    ptr, order = counting_order(np.ascontiguousarray(rows), int(nrows))
    return hg.net_parts(ptr, order, np.ascontiguousarray(parts), int(nparts))


def block_slices(slice_nnz, nparts: int) -> np.ndarray:
    """Consecutive slices with about equal nonzeros per part (by each slice's midpoint)."""
    w = np.asarray(slice_nnz, dtype=np.float64)
    total = w.sum()
    mid = np.cumsum(w) - w / 2.0
    return np.clip(np.floor(mid * nparts / total), 0, nparts - 1).astype(np.int64)


def random_parts(n: int, nparts: int, seed: int, stream: int, dtype=np.int64) -> np.ndarray:
    """A seeded permutation of ``n`` items dealt round robin, a block at a time."""
    perm = np.arange(n, dtype=index_dtype(n))
    np.random.default_rng([int(seed), 0xC9A15, int(stream)]).shuffle(perm)
    out = np.empty(n, dtype=dtype)
    for lo in range(0, n, BLOCK):
        hi = min(n, lo + BLOCK)
        out[perm[lo:hi]] = np.arange(lo, hi, dtype=np.int64) % nparts
    return out


def coarse_block(X: Tensor, nparts: int) -> np.ndarray:
    """coarse-block as parts of the coarse model's vertices (mode 1's indices first)."""
    return np.concatenate([block_slices(np.bincount(X.coords[m], minlength=X.shape[m]),
                                        nparts) for m in range(X.order)])


def fine_start(X: Tensor, nparts: int) -> np.ndarray:
    """Nonzeros in equal contiguous blocks ordered by the mode a random partition spreads
    most: a far better start for label propagation than random parts."""
    K = nparts
    spread = [int((np.minimum(np.bincount(X.coords[m]), K) - 1).sum()) for m in range(X.order)]
    m = int(np.argmax(spread))
    order = np.argsort(X.coords[m], kind="stable")
    parts = np.empty(X.nnz, np.int64)
    parts[order] = (np.arange(X.nnz, dtype=np.int64) * K) // X.nnz
    return parts


def _hp(d: Distribution, h, K: int, partitioner: str, epsilon: float, seed: int, start,
        **kw) -> np.ndarray:
    """``hg.partition`` for km1; where ``auto`` falls back to label propagation, it starts from
    ``start()`` (the grain's block partition), so hp is never worse than that baseline."""
    if partitioner == "auto":
        choice = hg.choose_partitioner(h, K)
        if choice["backend"] == "lp" and K > 1:
            d.partitioner, d.choice = "lp", {**choice, "rule": choice["rule"] +
                                             ", from the block partition"}
            return hg.refine(h, start(), K, objective="km1", epsilon=epsilon, seed=seed,
                          **choice["options"])
    p = hg.partition(h, K, partitioner, objective="km1", epsilon=epsilon, seed=seed, **kw)
    d.partitioner, d.choice = p.partitioner, p.meta.get("auto")
    return p.parts


def distribute(X: Tensor, nparts: int, *, grain: str = "fine", partition: str = "hp",
               partitioner: str = "auto", epsilon: float = 0.03, seed: int = 0,
               partition_file=None) -> Distribution:
    """Partition ``X``'s work and factor rows over ``nparts`` parts; ``partition_file``: a part
    id per nonzero (fine) or per coarse-model vertex (mode 1's indices first)."""
    if grain not in GRAINS:
        raise InputError(f"unknown --grain {grain!r}; choose one of {list(GRAINS)}")
    if partition_file is None and partition not in PARTITIONS[grain]:
        other = "coarse" if grain == "fine" else "fine"
        hint = (f" ({partition!r} is a {other}-grain partition; add --grain {other})"
                if partition in PARTITIONS[other] else "")
        raise InputError(f"--partition {partition!r} does not apply to the {grain} grain; "
                         f"choose one of {list(PARTITIONS[grain])}{hint}")
    K, N = int(nparts), X.order
    t0 = time.perf_counter()
    d = Distribution(grain, "file" if partition_file is not None else partition, K, [])
    offsets = np.concatenate([[0], np.cumsum(X.shape)]).astype(np.int64)
    if grain == "coarse":
        if partition_file is not None:
            parts = hg.read_part_file(partition_file, num_vertices=int(offsets[-1]), nparts=K)
        elif partition == "block":
            parts = coarse_block(X, K)
        else:
            h = hg.tensor_coarse((X.coords, X.shape))
            parts = _hp(d, h, K, partitioner, epsilon, seed, lambda: coarse_block(X, K),
                        allow_empty=True)
            d.km1 = int(hg.metrics(h, parts, K)["km1"])
        d.owners = [np.ascontiguousarray(parts[offsets[m]:offsets[m + 1]]) for m in range(N)]
    else:
        h = None
        if partition_file is not None:
            d.nnz_parts = hg.read_part_file(partition_file, num_vertices=X.nnz, nparts=K)
        elif partition == "random":
            d.nnz_parts = random_parts(X.nnz, K, seed, N, np.int16 if K <= 2**15 else np.int32)
            d.owners = [random_parts(X.shape[m], K, seed, m) for m in range(N)]
        else:
            h = hg.tensor_fine((X.coords, X.shape))
            d.nnz_parts = _hp(d, h, K, partitioner, epsilon, seed, lambda: fine_start(X, K))
        if not d.owners:
            # the paper's post-pass: decreasing connectivity, least-loaded part of Lambda_i
            h = h if h is not None else hg.tensor_fine((X.coords, X.shape))
            d.owners = hg.assign_factor_rows(h, d.nnz_parts, K, epsilon)
    d.time_s = time.perf_counter() - t0
    return d
