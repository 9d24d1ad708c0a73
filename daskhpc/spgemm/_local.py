"""Local steps of one grid cell on :class:`CscBlock` operands (section IV-D, no dask).

Multiply and merge are one pass and pick their accumulator by
:func:`choose_accumulator`: ``dense`` (Gustavson's) for blocks of at most
:data:`DENSE_ROWS` rows with ``nrows <= DENSE_WORK_FACTOR * flops``, else ``hash``
(measurements: docs/spgemm.md). Both leave rows unsorted within a column.
"""

from __future__ import annotations

import os

import numpy as np

from daskhpc.spgemm import _kernels as K
from daskhpc.spgemm._block import CscBlock


#: The dense accumulator's largest block: 2**19 int32 rows = 2 MiB, about one core's L2.
DENSE_ROWS = 1 << 19

#: ... and only while ``nrows <= DENSE_WORK_FACTOR * flops`` (else allocating costs more).
DENSE_WORK_FACTOR = 4


def _reserve_bytes() -> int:
    """Address space an output may reserve beyond what it fills (0 under strict overcommit)."""
    try:
        with open("/proc/sys/vm/overcommit_memory") as f:
            if f.read().strip() == "2":
                return 0
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 1 << 30


#: An output whose upper bound (12 bytes a nonzero) exceeds this is counted exactly first.
RESERVE_BYTES = _reserve_bytes()


def choose_accumulator(nrows: int, flops: int) -> str:
    """The accumulator for an output of ``nrows`` rows formed from ``flops`` products."""
    if nrows <= DENSE_ROWS and nrows <= DENSE_WORK_FACTOR * max(int(flops), 1):
        return "dense"
    return "hash"


def local_symbolic(a: CscBlock, b: CscBlock, *, accumulator: str = "auto", mask=None,
                   complement: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """LocalSymbolic (Algorithm 3 line 8): nonzeros and flops of every column of ``a @ b``.

    With ``mask`` only the entries in its pattern (not in it, with ``complement``) count."""
    _check(a, b)
    sa, sb = _stack([a], values=False), _stack([b], values=False)
    flops = K.column_flops(sa[0], sa[1], *sb, b.shape[1])
    if mask is not None:
        _check_mask(mask, (a.shape[0], b.shape[1]))
        return K.symbolic_masked(*sa, *sb, a.shape[0], b.shape[1], mask.ptr, mask.idx,
                                 2 if complement else 1), flops
    acc = _pick(accumulator, a.shape[0], flops)
    return _symbolic(sa, sb, a.shape[0], flops, acc), flops


def local_multiply(a: CscBlock, b: CscBlock, *, sort: bool = False,
                   accumulator: str = "auto", semiring=0, mask=None,
                   complement: bool = False) -> CscBlock:
    """Local-Multiply (Algorithm 1 line 7): ``a @ b`` in one pass, rows unsorted unless ``sort``.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> a = CscBlock.from_scipy(sp.random(50, 50, density=0.1, random_state=0))
    >>> c = local_multiply(a, a)
    >>> bool(abs(c.to_scipy() - a.to_scipy() @ a.to_scipy()).max() < 1e-12)
    True
    """
    return fused_multiply([a], [b], sort=sort, accumulator=accumulator, semiring=semiring,
                          mask=mask, complement=complement)


def semiring_code(semiring) -> int:
    """The kernels' code of a semiring name (or code) of :data:`SEMIRINGS`."""
    if isinstance(semiring, (int, np.integer)) and 0 <= int(semiring) < len(K.SEMIRINGS):
        return int(semiring)
    if semiring in K.SEMIRINGS:
        return K.SEMIRINGS.index(semiring)
    raise ValueError(f"semiring must be one of {', '.join(K.SEMIRINGS)}, not {semiring!r}")


def fused_multiply(a_blocks, b_blocks, *, add=(), sort: bool = False,
                   accumulator: str = "auto", semiring=0, mask=None,
                   complement: bool = False) -> CscBlock:
    """``sum(add) + sum_s a_blocks[s] @ b_blocks[s]`` in one accumulator.

    Local-Multiply per stage and Merge-Layer (Algorithm 1 lines 4-8) fused, no partial
    products; ``add``: pieces summed in (Merge-Fiber); ``mask`` restricts the output."""
    a_blocks, b_blocks = list(a_blocks), list(b_blocks)
    if not a_blocks or len(a_blocks) != len(b_blocks):
        raise ValueError(f"need as many A as B blocks (>= 1), got {len(a_blocks)} and "
                         f"{len(b_blocks)}")
    for a, b in zip(a_blocks, b_blocks):
        _check(a, b)
    m, n = a_blocks[0].shape[0], b_blocks[0].shape[1]
    add = list(add)
    if any(a.shape[0] != m for a in a_blocks) or any(b.shape[1] != n for b in b_blocks):
        raise ValueError("the stages' products have different shapes")
    if any(p.shape != (m, n) for p in add):
        raise ValueError(f"blocks to add must be {m} x {n}, got {[p.shape for p in add]}")
    sa, sb, sp_ = _stack(a_blocks), _stack(b_blocks), _stack(add)
    sr = semiring_code(semiring)
    flops = K.column_flops(sa[0], sa[1], sb[0], sb[1], sb[2], n)
    added = sum((np.diff(p.ptr) for p in add), np.zeros(n, np.int64))
    bound, cap = K.column_bounds(flops + added, m)
    acc = _pick(accumulator, m, flops + added)
    if mask is None:
        mmode, m_ptr, m_idx, allow = 0, _NO_PTR, _NO_IDX, _NO_PTR
    else:
        _check_mask(mask, (m, n))
        mmode, m_ptr, m_idx = (2 if complement else 1), mask.ptr, mask.idx
        allow = np.full(m, -1, np.int64)
    if cap * 12 > RESERVE_BYTES:       # not worth reserving: count exactly first
        if mask is None:
            exact = _symbolic(sa, sb, m, flops, acc)
        else:
            exact = K.symbolic_masked(*sa[:3], *sb[:3], m, n, m_ptr, m_idx, mmode)
        cap = int(exact.sum()) + int(added.sum())
    ptr, idx, val = _outputs(n, cap)
    if sr == K.PLUS_TIMES and mmode == 0:      # the plain kernels: no branch inside
        if acc == "dense":
            K.spa_multiply(*sa, *sb, *sp_, _where(m, cap), ptr, idx, val)
        else:
            K.hash_multiply(*sa, *sb, *sp_, bound, ptr, idx, val)
    elif acc == "dense":
        K.spa_semiring(sr, mmode, *sa, *sb, *sp_, m_ptr, m_idx, allow, _where(m, cap), ptr,
                       idx, val)
    else:
        K.hash_semiring(sr, mmode, *sa, *sb, *sp_, m_ptr, m_idx, allow, bound, ptr, idx, val)
    return _finish(ptr, idx, val, (m, n), sort)


def merge(blocks, *, sort: bool = False, accumulator: str = "auto", semiring=0) -> CscBlock:
    """Semiring sum of same-shape blocks in one pass (Merge-Layer / Merge-Fiber)."""
    blocks = list(blocks)
    if not blocks:
        raise ValueError("nothing to merge")
    shape = blocks[0].shape
    if any(b.shape != shape for b in blocks):
        raise ValueError(f"cannot merge blocks of shapes {[b.shape for b in blocks]}")
    if len(blocks) == 1:
        return sort_block(blocks[0]) if sort else blocks[0]
    m, n = shape
    sr = semiring_code(semiring)
    parts = _stack(blocks)
    bound, cap = K.merge_bounds(parts[0], parts[1], n, m)
    acc = accumulator if accumulator != "auto" else choose_accumulator(m, cap)
    _valid(acc)
    ptr, idx, val = _outputs(n, cap)
    if acc == "dense":
        if sr == K.PLUS_TIMES:
            K.spa_merge(*parts, _where(m, cap), ptr, idx, val)
        else:
            K.spa_merge_semiring(sr, *parts, _where(m, cap), ptr, idx, val)
    elif sr == K.PLUS_TIMES:
        K.hash_merge(*parts, bound, ptr, idx, val)
    else:
        K.hash_merge_semiring(sr, *parts, bound, ptr, idx, val)
    return _finish(ptr, idx, val, shape, sort)


def sort_block(block: CscBlock) -> CscBlock:
    """Sort rows within every column (in place) and mark the block sorted."""
    if not block.sorted:
        K.sort_columns(block.ptr, block.idx, block.val)
        block.sorted = True
    return block


sort = sort_block


def select_columns(block: CscBlock, cols: np.ndarray) -> CscBlock:
    """The columns ``cols`` of ``block``, in that order."""
    cols = np.ascontiguousarray(cols, dtype=np.int64)
    ptr, idx, val = K.select_columns(block.ptr, block.idx, block.val, cols)
    return CscBlock(ptr, idx, val, (block.shape[0], cols.size), block.sorted)


def topk(block: CscBlock, k: int) -> CscBlock:
    """Keep the ``k`` largest values of every column."""
    ptr, idx, val = K.topk_columns(block.ptr, block.idx, block.val, int(k))
    return CscBlock(ptr, idx, val, block.shape, False)


def _check(a: CscBlock, b: CscBlock) -> None:
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"inner dimensions differ: {a.shape} @ {b.shape}")


_NO_PTR = np.zeros(1, np.int64)
_NO_IDX = np.zeros(0, np.int32)
_NO_VAL = np.zeros(0, np.float64)


def _check_mask(mask: CscBlock, shape) -> None:
    if tuple(mask.shape) != tuple(shape):
        raise ValueError(f"the mask is {mask.shape[0]} x {mask.shape[1]}, the product "
                         f"{shape[0]} x {shape[1]}")


def _valid(acc: str) -> None:
    if acc not in ("dense", "hash"):
        raise ValueError(f"accumulator must be 'auto', 'dense' or 'hash', not {acc!r}")


def _pick(accumulator: str, nrows: int, flops: np.ndarray) -> str:
    acc = choose_accumulator(nrows, int(flops.sum())) if accumulator == "auto" else accumulator
    _valid(acc)
    return acc


def _stack(blocks, values: bool = True) -> tuple:
    """The kernels' stacked form ``ptr, off, idx[, val]`` of a list of blocks."""
    if len(blocks) == 1:
        b = blocks[0]
        ptr = np.ascontiguousarray(b.ptr, dtype=np.int64)
        out = (ptr, np.array([0, ptr.size], np.int64), np.ascontiguousarray(b.idx, np.int32))
        return out + (np.ascontiguousarray(b.val, np.float64),) if values else out
    base = np.concatenate(([0], np.cumsum([b.idx.size for b in blocks], dtype=np.int64)))
    ptr = np.concatenate([np.asarray(b.ptr, np.int64) + base[s] for s, b in enumerate(blocks)]
                         + [_NO_PTR[:0]])
    off = np.concatenate(([0], np.cumsum([b.ptr.size for b in blocks], dtype=np.int64)))
    idx = np.concatenate([b.idx for b in blocks] + [_NO_IDX], dtype=np.int32)
    if not values:
        return ptr, off, idx
    return ptr, off, idx, np.concatenate([b.val for b in blocks] + [_NO_VAL], dtype=np.float64)


def _symbolic(sa, sb, nrows: int, flops: np.ndarray, acc: str) -> np.ndarray:
    """Nonzeros per column of the stacks' product."""
    if acc == "dense" and flops.size < 2**31:
        return K.symbolic_dense(*sa[:3], *sb[:3], nrows, flops.size)
    bound, _ = K.column_bounds(flops, nrows)
    return K.symbolic_hash(*sa[:3], *sb[:3], bound)


def _where(nrows: int, cap: int) -> np.ndarray:
    """The dense accumulator's row -> output position array (int32 while it fits)."""
    return np.full(nrows, -1, np.int32 if cap < 2**31 else np.int64)


def _outputs(ncols: int, cap: int):
    """Output arrays for up to ``cap`` nonzeros, by numpy (huge pages: a cheaper first touch)."""
    return np.empty(ncols + 1, np.int64), np.empty(cap, np.int32), np.empty(cap, np.float64)


def _finish(ptr, idx, val, shape, sort: bool) -> CscBlock:
    nnz = int(ptr[-1])
    # views of the first nnz entries: the reserved tail was never touched
    out = CscBlock(ptr, idx[:nnz], val[:nnz], shape, False)
    return sort_block(out) if sort else out
