"""Functions the BatchedSumma3D graph runs on the workers (one per task kind).

Importing it registers a ``dask.sizeof`` for :class:`CscBlock` (the scheduler's memory
accounting and the transfer ledger).
"""

from __future__ import annotations

import numpy as np
from dask.sizeof import sizeof

from daskhpc.runtime import load_arrays, save_arrays, send_report

from . import _local
from ._block import CscBlock


@sizeof.register(CscBlock)
def _sizeof_block(block: CscBlock) -> int:
    return block.nbytes + 64


def send(block: CscBlock) -> CscBlock:
    """A fresh key for a block broadcast in one batch (no copy): replicas are released after it."""
    return block


def b_piece(block: CscBlock, cols: np.ndarray) -> CscBlock:
    """B~[batch] (Algorithm 4 line 4): the batch's columns of the cell's B block."""
    if cols.size == block.shape[1] and (cols.size == 0 or (
            cols[0] == 0 and cols[-1] == cols.size - 1)):
        return block      # b = 1: the whole block, no copy (columns are ascending)
    return _local.select_columns(block, cols)


def stage_symbolic(a: CscBlock, b: CscBlock, mask: CscBlock | None = None,
                   complement: bool = False) -> int:
    """LocalSymbolic (Algorithm 3 line 8): nonzeros of one stage's (masked) product."""
    counts, _ = _local.local_symbolic(a, b, mask=mask, complement=complement)
    return int(counts.sum())


def cell_total(*counts: int) -> int:
    """nnz[i,j,k] of Algorithm 3: the sum over the stages."""
    return int(sum(counts))


def stage_multiply(a: CscBlock, b: CscBlock, spec=(0, False), mask=None) -> CscBlock:
    """Local-Multiply (Algorithm 1 line 7); ``spec``: (semiring code, complement)."""
    return _local.local_multiply(a, b, semiring=spec[0], mask=mask, complement=spec[1])


def fused_layer(sort: bool, nstages: int, spec, mask, *blocks: CscBlock) -> CscBlock:
    """Local-Multiply of every stage and Merge-Layer in one hash pass (``fused``)."""
    return _local.fused_multiply(blocks[:nstages], blocks[nstages:], sort=sort,
                                 semiring=spec[0], mask=mask, complement=spec[1])


def mask_piece(mask: CscBlock, lo: int, hi: int) -> CscBlock | None:
    """Columns ``lo:hi`` of a batch's mask piece (None without a mask)."""
    return None if mask is None else fiber_part(mask, lo, hi)


def fused_part(nstages: int, lo: int, hi: int, after, spec, mask,
               *blocks: CscBlock) -> CscBlock:
    """Columns ``lo:hi`` of the fused layer product, its own task (``after``: keeps the order)."""
    b_cols = [fiber_part(b, lo, hi) for b in blocks[nstages:]]
    return _local.fused_multiply(blocks[:nstages], b_cols, semiring=spec[0],
                                 mask=mask_piece(mask, lo, hi), complement=spec[1])


def fused_own(sort: bool, nstages: int, lo: int, hi: int, nrecv: int, spec, mask,
              *blocks) -> CscBlock:
    """Merge-Fiber fused with the multiply of the layer product's piece that stays."""
    received = blocks[:nrecv]
    a_blocks = blocks[nrecv:nrecv + nstages]
    b_cols = [fiber_part(b, lo, hi) for b in blocks[nrecv + nstages:]]
    return _local.fused_multiply(a_blocks, b_cols, add=received, sort=sort, semiring=spec[0],
                                 mask=mask_piece(mask, lo, hi), complement=spec[1])


def merge_layer(semiring: int, *partials: CscBlock) -> CscBlock:
    """Merge-Layer (Algorithm 1 line 8): hash merge of the stage products, unsorted."""
    return _local.merge(partials, semiring=semiring)


def fiber_part(d: CscBlock, lo: int, hi: int) -> CscBlock:
    """ColSplit (Algorithm 2 line 4): columns ``lo:hi`` of D~ as views (no copy)."""
    ptr = d.ptr[lo:hi + 1] - d.ptr[lo]
    a, z = int(d.ptr[lo]), int(d.ptr[hi])
    return CscBlock(ptr, d.idx[a:z], d.val[a:z], (d.shape[0], hi - lo), d.sorted)


def merge_fiber(sort: bool, semiring: int, *parts: CscBlock) -> CscBlock:
    """Merge-Fiber (Algorithm 2 line 6); sorted only if the consumer needs it."""
    return _local.merge(parts, sort=sort, semiring=semiring)


def consume(consumer, block: CscBlock, info: dict, operand=None, prev=None, rows=None):
    """Hand one cell's C block of one batch to the consumer (``rows`` from the part store)."""
    if rows is not None:
        info = {**info, "rows": rows}
    if operand is not None:
        lo, hi = info["operand_cols"]
        operand = fiber_part(operand, lo, hi)
    return consumer.cell(block, info, operand)


def batch_done(consumer, t: int, *results):
    """The batch's last task: a small summary; its completion admits the next batch."""
    return consumer.batch(t, list(results))


def batch_done_reported(topic: str, consumer, t: int, saved: bool, *results):
    """:func:`batch_done` that also reports the summary to the client (reporter ``"done"``).

    The report reaches the client before batch t + w is admitted and before news of this
    worker's death, so a finished batch need not run again."""
    out = consumer.batch(t, list(results))
    try:
        send_report(topic, t, {"done": {"summary": out}}, saved=saved)
    except (ValueError, TypeError):
        pass    # not msgpack-able: the client reads the result instead
    return out


def summary(kept) -> tuple:
    """What the batch's done task needs of a kept block: its size only."""
    return (_Nnz(kept[0].nnz),)


class _Nnz:
    def __init__(self, nnz):
        self.nnz = int(nnz)


def save_kept(path: str, kept):
    """Write a kept ``(block, row ids, column ids)`` to the checkpoint atomically, on its worker."""
    block, rows, cols = kept
    arrays = {"ptr": block.ptr, "idx": block.idx, "val": block.val,
              "shape": np.asarray(block.shape, np.int64),
              "sorted": np.asarray(bool(block.sorted)), "cols": np.asarray(cols)}
    if isinstance(rows, np.ndarray):     # else the rows are already original ids
        arrays["rows"] = rows
    save_arrays(path, **arrays)
    return summary(kept)


def load_kept(path: str) -> tuple:
    """The ``(block, row ids, column ids)`` that :func:`save_kept` wrote."""
    from daskhpc.spgemm._consumers import _IDENTITY

    z = load_arrays(path)
    block = CscBlock(z["ptr"], z["idx"], z["val"], tuple(int(x) for x in z["shape"]),
                     bool(z["sorted"]))
    return block, z.get("rows", _IDENTITY), z["cols"]


def piece_matrix(kept, shape):
    """A kept block as a ``coo_array`` of C's whole ``shape`` (original ids, no exact zeros)."""
    import scipy.sparse as sp

    block, rows, cols = kept
    keep = block.val != 0.0
    r = block.idx if not isinstance(rows, np.ndarray) else np.asarray(rows)[block.idx]
    c = np.repeat(np.asarray(cols), np.diff(block.ptr))
    return sp.coo_array((block.val[keep], (r[keep], c[keep])), shape=tuple(shape))


def save_piece(kept, directory: str, name: str, shape) -> dict:
    """Write one piece of C as a ``save_npz`` file on its worker; returns its manifest entry."""
    import os

    from daskhpc._saved import write_npz

    return {"file": name, **write_npz(os.path.join(directory, name),
                                      piece_matrix(kept, shape))}


def save_piece_from(path: str, directory: str, name: str, shape) -> dict:
    """:func:`save_piece` of a block the checkpoint holds, read and written on a worker."""
    return save_piece(load_kept(path), directory, name, shape)
