"""What happens to each batch of C: keep it, write it, reduce it, or prune it.

A consumer is a small picklable object with three hooks:

``cell(block, info, operand)``
    On the worker of a grid cell, with that cell's C block of one batch
    (``info``: ``batch``, ``cell``, ``rows`` and ``cols`` = original row and
    column ids of the block). Its return value stays on that worker if
    ``keeps`` is true, else it is small (a count, a sum, a path).
``batch(t, results)``
    Once per batch, with every cell's ``cell`` result (or the kept blocks'
    summaries); its completion is what lets the next batch in.
``finalize(summaries, kept)``
    On the client, after the last batch: the value of the run.

``columnwise`` consumers (top-k per column) need whole columns of C, which are
split over the q row blocks of the grid: their ``cell`` returns a candidate
block and ``combine`` merges the q candidates of a column block (as HipMCL does
when it prunes a batch, section V-C).

No dask here.

Examples
--------
>>> parse_consumer("count")
Count()
>>> parse_consumer("prune:10")
Prune(k=10, threshold=None)
"""

from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numba import njit

from daskhpc._errors import InputError
from daskhpc.spgemm import _local
from daskhpc.spgemm._block import CscBlock

__all__ = ["Consumer", "Keep", "Write", "Count", "Prune", "MaskedSum", "parse_consumer",
           "load_batch", "assemble"]


class Consumer:
    """Base class: subclasses override what they need."""

    keeps = False        # cell results stay on the workers (futures kept)
    columnwise = False   # cell results of one column block are combined over i
    sort = False         # Merge-Fiber output must be sorted
    chained = False      # cell tasks of a batch run one after another

    def operand(self, mask, rows: np.ndarray, cols: np.ndarray):
        """The cell's piece of ``multiply(..., mask=)`` (permuted like C), or None."""
        return None

    def cell(self, block: CscBlock, info: dict, operand):
        return block

    def combine(self, parts: list, info: dict):
        raise NotImplementedError

    def batch(self, t: int, results: list):
        return None

    def finalize(self, summaries: list, kept: list):
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


@dataclass(repr=False)
class Keep(Consumer):
    """Keep C: cell blocks stay on their workers; the client assembles C at the end
    (Algorithm 4 line 7, ColConcat, then a gather)."""

    keeps = True

    def cell(self, block, info, operand):
        return (block, info["rows"], info["cols"])

    def batch(self, t, results):
        return {"nnz": sum(int(r[0].nnz) for r in results)}


@dataclass
class Count(Consumer):
    """Reduce each batch to its number of nonzeros and the sum of its values.

    Entries whose sum cancelled to exactly 0 are not counted (as scipy drops them).
    """

    def cell(self, block, info, operand):
        return int(np.count_nonzero(block.val)), float(block.val.sum())

    def batch(self, t, results):
        return {"nnz": sum(r[0] for r in results), "sum": sum(r[1] for r in results)}

    def finalize(self, summaries, kept):
        return {"nnz": sum(s["nnz"] for s in summaries),
                "sum": float(sum(s["sum"] for s in summaries))}

    def __repr__(self) -> str:
        return "Count()"


@dataclass
class Write(Consumer):
    """Write one ``batch-00000.npz`` per batch into ``directory`` (read with
    :func:`load_batch`). The cells of a batch append to the file in turn."""

    directory: str
    chained = True
    sort = True

    def cell(self, block, info, operand):
        path = os.path.join(self.directory, f"batch-{info['batch']:05d}.npz")
        c = "c{}_{}_{}".format(*info["cell"])
        arrays = {f"{c}_indptr": block.ptr, f"{c}_rows": info["rows"][block.idx],
                  f"{c}_data": block.val, f"{c}_cols": info["cols"],
                  "shape": np.asarray(info["shape"], np.int64)}
        with zipfile.ZipFile(path, mode="a", compression=zipfile.ZIP_STORED,
                             allowZip64=True) as zf:
            names = set(zf.namelist())
            for name, arr in arrays.items():
                if name + ".npy" in names:
                    continue
                with zf.open(name + ".npy", "w", force_zip64=True) as f:
                    np.lib.format.write_array(f, np.ascontiguousarray(arr))
        return path, int(block.nnz)

    def batch(self, t, results):
        return {"path": results[0][0] if results else None,
                "nnz": sum(r[1] for r in results)}

    def finalize(self, summaries, kept):
        return [s["path"] for s in summaries]


@dataclass
class Prune(Consumer):
    """Keep the ``k`` largest entries of every column and/or those >= ``threshold``
    (the pruning of Markov clustering, section V-C). The pruned C is kept."""

    k: int | None = None
    threshold: float | None = None
    keeps = True

    @property
    def columnwise(self):
        return self.k is not None

    def cell(self, block, info, operand):
        if self.threshold is not None:
            block = _threshold(block, self.threshold)
        # original row ids, so that ties are broken the same way on every grid
        block = CscBlock(block.ptr, info["rows"][block.idx].astype(np.int32), block.val,
                         (info["shape"][0], block.shape[1]))
        if self.k is not None:
            block = _local.topk(block, self.k)
        return (block, _IDENTITY, info["cols"])

    def combine(self, parts, info):
        """Top-k of a column block from the q row blocks' candidates (vectorised)."""
        ncols = parts[0][0].shape[1]
        rows = np.concatenate([b.idx for b, _, _ in parts])
        vals = np.concatenate([b.val for b, _, _ in parts])
        col = np.concatenate([np.repeat(np.arange(ncols), np.diff(b.ptr)) for b, _, _ in parts])
        order = np.lexsort((rows, -vals, col))
        col = col[order]
        counts = np.bincount(col, minlength=ncols)
        start = np.concatenate([[0], np.cumsum(counts)])
        rank = np.arange(col.size) - start[col]
        keep = order[rank < self.k]          # already grouped by column
        kept_counts = np.minimum(counts, self.k)
        ptr = np.concatenate([[0], np.cumsum(kept_counts)]).astype(np.int64)
        return (CscBlock(ptr, rows[keep], vals[keep], parts[0][0].shape), _IDENTITY,
                parts[0][2])

    def batch(self, t, results):
        return {"nnz": sum(int(r[0].nnz) for r in results)}


class _Identity:
    """Row ids that are already original (``_IDENTITY[idx] is idx``)."""

    def __getitem__(self, idx):
        return idx


_IDENTITY = _Identity()


class MaskedSum(Consumer):
    """``sum(C .* mask)`` batch by batch (triangle counting, section V-B).

    Pass the mask to :func:`~daskhpc.spgemm.multiply` as ``mask=``: the driver
    permutes it like C and gives every cell its piece as the operand.
    """

    def operand(self, mask, rows, cols):
        return CscBlock.from_scipy(mask[rows][:, cols])

    def cell(self, block, info, operand):
        if operand is None:
            raise ValueError("MaskedSum needs multiply(..., mask=M)")
        return float(_masked_dot(block.ptr, block.idx, block.val, operand.ptr, operand.idx,
                                 operand.val, block.shape[0]))

    def batch(self, t, results):
        return {"sum": float(sum(results))}

    def finalize(self, summaries, kept):
        return float(sum(s["sum"] for s in summaries))


def parse_consumer(text: str) -> Consumer:
    """From the CLI: ``keep``, ``count``, ``write:DIR``, ``prune:K``, ``threshold:X``."""
    kind, _, arg = str(text).partition(":")
    try:
        if kind == "keep" and not arg:
            return Keep()
        if kind == "count" and not arg:
            return Count()
        if kind == "write" and arg:
            return Write(arg)
        if kind == "prune" and arg:
            k = int(arg)
            if k < 1:
                raise ValueError
            return Prune(k=k)
        if kind == "threshold" and arg:
            return Prune(threshold=float(arg))
    except ValueError:
        pass
    raise InputError(f"--consume must be keep, count, write:DIR, prune:K (K >= 1) or "
                     f"threshold:X, not {text!r}")


def assemble(kept: list, shape) -> sp.csr_array:
    """C from kept ``(block, row ids, col ids)`` triples (canonical CSR, no zeros)."""
    rows, cols, vals = [], [], []
    for block, r, c in kept:
        rows.append(r[block.idx])
        cols.append(np.repeat(np.asarray(c), np.diff(block.ptr)))
        vals.append(block.val)
    if not rows:
        return sp.csr_array(shape, dtype=np.float64)
    out = sp.coo_array((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                       shape=shape).tocsr()
    out.sum_duplicates()
    out.eliminate_zeros()   # as scipy's product: no entry whose sum cancelled to 0
    return out


def load_batch(path) -> sp.csr_array:
    """Read one file written by :class:`Write`: C with only that batch's columns."""
    with np.load(path) as z:
        shape = tuple(int(x) for x in z["shape"])
        cells = sorted({name.rsplit("_", 1)[0] for name in z.files if name != "shape"})
        kept = []
        for c in cells:
            ptr = z[f"{c}_indptr"]
            kept.append((CscBlock(ptr, np.arange(ptr[-1], dtype=np.int32), z[f"{c}_data"],
                                  (int(ptr[-1]), ptr.size - 1)), z[f"{c}_rows"], z[f"{c}_cols"]))
    return assemble(kept, shape)


def _threshold(block: CscBlock, thr: float) -> CscBlock:
    keep = block.val >= thr
    kept_before = np.concatenate([[0], np.cumsum(keep, dtype=np.int64)])
    ptr = kept_before[block.ptr]
    return CscBlock(ptr, block.idx[keep], block.val[keep], block.shape, block.sorted)


@njit(cache=True, nogil=True)
def _masked_dot(c_ptr, c_idx, c_val, m_ptr, m_idx, m_val, nrows):
    mark = np.zeros(nrows, np.float64)
    total = 0.0
    for j in range(c_ptr.size - 1):
        for t in range(m_ptr[j], m_ptr[j + 1]):
            mark[m_idx[t]] = m_val[t]
        for t in range(c_ptr[j], c_ptr[j + 1]):
            total += c_val[t] * mark[c_idx[t]]
        for t in range(m_ptr[j], m_ptr[j + 1]):
            mark[m_idx[t]] = 0.0
    return total
