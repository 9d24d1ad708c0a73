"""Local steps of one grid cell on :class:`CscBlock` operands (section IV-D).

* :func:`local_symbolic` - LocalSymbolic of Algorithm 3 (line 8): nonzeros per
  output column and flops, without forming the product.
* :func:`local_multiply` - Local-Multiply of Algorithm 1 (line 7), unsorted hash.
* :func:`merge` - Merge-Layer (Algorithm 1 line 8) and Merge-Fiber (Algorithm 2
  line 6), unsorted hash merge; ``sort=True`` only where the final output needs it.

No dask here.

Examples
--------
>>> import scipy.sparse as sp
>>> a = CscBlock.from_scipy(sp.random(50, 50, density=0.1, random_state=0))
>>> c = local_multiply(a, a)
>>> bool(abs(c.to_scipy() - a.to_scipy() @ a.to_scipy()).max() < 1e-12)
True
"""

from __future__ import annotations

import numpy as np
from numba.typed import List

from daskhpc.spgemm import _kernels as K
from daskhpc.spgemm._block import CscBlock

__all__ = ["local_symbolic", "local_multiply", "fused_multiply", "merge", "sort", "select_columns", "topk"]


#: Up to this many rows LocalSymbolic marks rows in a dense int32 array (measured
#: 1.3-1.5x faster than the hash table on email-Enron and soc-Slashdot0902);
#: above it, a hash table per column keeps the working set small.
DENSE_SYMBOLIC_ROWS = 1 << 22


def local_symbolic(a: CscBlock, b: CscBlock) -> tuple[np.ndarray, np.ndarray]:
    """Nonzeros and flops of every column of ``a @ b`` (int64 arrays)."""
    _check(a, b)
    flops = K.column_flops(a.ptr, b.ptr, b.idx)
    if a.shape[0] <= DENSE_SYMBOLIC_ROWS and b.shape[1] < 2**31:
        return K.symbolic_dense(a.ptr, a.idx, b.ptr, b.idx, a.shape[0]), flops
    return K.symbolic(a.ptr, a.idx, b.ptr, b.idx, flops), flops


def local_multiply(a: CscBlock, b: CscBlock, *, sort: bool = False) -> CscBlock:
    """``a @ b`` with a hash accumulator per column; rows unsorted unless ``sort``."""
    counts, _ = local_symbolic(a, b)
    ptr = np.zeros(b.shape[1] + 1, np.int64)
    np.cumsum(counts, out=ptr[1:])
    idx, val = K.multiply(a.ptr, a.idx, a.val, b.ptr, b.idx, b.val, ptr)
    out = CscBlock(ptr, idx, val, (a.shape[0], b.shape[1]), False)
    return sort_block(out) if sort else out


def fused_multiply(a_blocks, b_blocks, *, sort: bool = False) -> CscBlock:
    """``sum_s a_blocks[s] @ b_blocks[s]`` in one hash pass (no partial products).

    The fused form of Local-Multiply per stage followed by Merge-Layer
    (Algorithm 1 lines 4-8) for when a cell holds every stage's operands anyway,
    as a Dask worker does once the stage inputs have been fetched.
    """
    a_blocks, b_blocks = list(a_blocks), list(b_blocks)
    for a, b in zip(a_blocks, b_blocks):
        _check(a, b)
    if len(a_blocks) == 1:
        return local_multiply(a_blocks[0], b_blocks[0], sort=sort)
    m, n = a_blocks[0].shape[0], b_blocks[0].shape[1]
    lists = [List() for _ in range(6)]
    for a, b in zip(a_blocks, b_blocks):
        for lst, arr in zip(lists, (a.ptr, a.idx, a.val, b.ptr, b.idx, b.val)):
            lst.append(arr)
    counts = K.stages_symbolic(lists[0], lists[1], lists[3], lists[4], m, n)
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=ptr[1:])
    idx, val = K.stages_multiply(*lists, ptr)
    out = CscBlock(ptr, idx, val, (m, n), False)
    return sort_block(out) if sort else out


def merge(blocks, *, sort: bool = False) -> CscBlock:
    """Sum of same-shape blocks by hash merge (Merge-Layer / Merge-Fiber)."""
    blocks = list(blocks)
    if not blocks:
        raise ValueError("nothing to merge")
    shape = blocks[0].shape
    if any(b.shape != shape for b in blocks):
        raise ValueError(f"cannot merge blocks of shapes {[b.shape for b in blocks]}")
    if len(blocks) == 1:
        out = blocks[0]
        return sort_block(out) if sort and not out.sorted else out
    ptrs, idxs, vals = List(), List(), List()
    for b in blocks:
        ptrs.append(b.ptr)
        idxs.append(b.idx)
        vals.append(b.val)
    counts = K.merge_symbolic(ptrs, idxs, shape[1])
    ptr = np.zeros(shape[1] + 1, np.int64)
    np.cumsum(counts, out=ptr[1:])
    idx, val = K.merge_numeric(ptrs, idxs, vals, ptr)
    out = CscBlock(ptr, idx, val, shape, False)
    return sort_block(out) if sort else out


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
