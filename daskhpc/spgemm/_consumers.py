"""What happens to each batch of C: keep it, write it, reduce it, or prune it (no dask)."""

from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numba import njit

from daskhpc.errors import InputError
from daskhpc.spgemm import _local
from daskhpc.spgemm._block import CscBlock


class Consumer:
    """Base class of what happens to each batch of C; subclasses override what they need.

    ``cell(block, info, operand)`` runs on a cell's worker with its C block of one batch
    (``info``: ``batch``, ``cell``, original ``rows`` and ``cols``); its result stays there
    if ``keeps``, else it is small. ``batch(t, results)`` reduces a batch (its completion
    admits the next one); ``finalize(summaries, kept)`` gives the run's value on the
    client. ``columnwise`` consumers ``combine`` the q row blocks' candidates of a column
    block (as HipMCL prunes a batch, section V-C)."""

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

    ``nnz`` drops entries that cancelled to exactly 0 (plus_times, as scipy);
    ``structural_nnz`` counts every entry formed, independent of the order of additions."""

    def cell(self, block, info, operand):
        nnz, total = _count_sum(block.val)
        if info.get("structural"):     # a semiring other than plus_times: 0 is a value
            nnz = block.val.size
        return int(nnz), float(total), int(block.val.size)

    def batch(self, t, results):
        out = {"nnz": sum(r[0] for r in results), "sum": sum(r[1] for r in results)}
        if all(len(r) > 2 for r in results):
            out["structural_nnz"] = sum(r[2] for r in results)
        return out

    def finalize(self, summaries, kept):
        out = {"nnz": sum(s["nnz"] for s in summaries),
               "sum": float(sum(s["sum"] for s in summaries))}
        if all("structural_nnz" in s for s in summaries):   # a checkpoint of before
            out["structural_nnz"] = sum(s["structural_nnz"] for s in summaries)
        return out


@dataclass
class Write(Consumer):
    """One ``batch-00000.npz`` per batch in ``directory`` (read with :func:`load_batch`)."""

    directory: str
    chained = True
    sort = True

    def cell(self, block, info, operand):
        path = os.path.join(self.directory, f"batch-{info['batch']:05d}.npz")
        c = "c{}_{}_{}".format(*info["cell"])
        arrays = {f"{c}_indptr": block.ptr, f"{c}_rows": info["rows"][block.idx],
                  f"{c}_data": block.val, f"{c}_cols": info["cols"],
                  "shape": np.asarray(info["shape"], np.int64)}
        # the first cell of the batch starts the file: a batch computed again
        # (after a lost worker) must not append to what the lost attempt wrote
        mode = "w" if info.get("first") else "a"
        with zipfile.ZipFile(path, mode=mode, compression=zipfile.ZIP_STORED,
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
    """Keep the ``k`` largest entries of every column and/or those >= ``threshold``.

    The pruning of Markov clustering (section V-C); the pruned C is kept."""

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
        """Top-k of a column block from the q row blocks' candidates."""
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

    batch = Keep.batch


class _Identity:
    """Row ids that are already original (``_IDENTITY[idx] is idx``)."""

    def __getitem__(self, idx):
        return idx


_IDENTITY = _Identity()


class MaskedSum(Consumer):
    """``sum(C .* mask)`` batch by batch (triangle counting, section V-B).

    Pass the mask to :func:`~daskhpc.spgemm.multiply` as ``mask=``."""

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
    """From the CLI: ``keep``, ``count``, ``write:DIR``, ``prune:K``, ``threshold:X``.

    Examples
    --------
    >>> parse_consumer("prune:10")
    Prune(k=10, threshold=None)
    """
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


def assemble(kept: list, shape, drop_zeros: bool = True) -> sp.csr_array:
    """C from kept ``(block, row ids, col ids)`` triples: canonical CSR, duplicates summed."""
    nrows, ncols = int(shape[0]), int(shape[1])
    kept = [(block, np.arange(block.shape[0], dtype=np.int64) if isinstance(r, _Identity)
             else r, c) for block, r, c in kept if block.nnz > 0]
    if not kept:
        return sp.csr_array(shape, dtype=np.float64)
    blocks = _local._stack([block for block, _, _ in kept])
    rmaps, cmaps = _maps([r for _, r, _ in kept]), _maps([c for _, _, c in kept])
    indptr, indices, data, dups = _assemble_csr(*blocks, *rmaps, *cmaps, nrows, ncols,
                                                ASSEMBLE_CHUNK, drop_zeros)
    if indptr[-1] < 2**31 and max(nrows, ncols) < 2**31:
        indptr = indptr.astype(np.int32)
    else:
        indices = indices.astype(np.int64)
    out = sp.csr_array((data, indices, indptr), shape=shape)
    if dups:
        out.sum_duplicates()
        if drop_zeros:
            out.eliminate_zeros()
    else:
        out.has_sorted_indices = True
        out.has_canonical_format = True
    return out


def _maps(arrays) -> tuple:
    """Index maps concatenated (int64) and the offsets of each."""
    off = np.concatenate(([0], np.cumsum([a.size for a in arrays], dtype=np.int64)))
    return np.concatenate(arrays, dtype=np.int64), off


#: Rows are assembled in chunks of consecutive rows holding about this many
#: nonzeros (16 bytes each while in flight: ~4 MiB, cache sized).
ASSEMBLE_CHUNK = 1 << 18


@njit(cache=True, nogil=True, boundscheck=False)
def _assemble_csr(ptr, off, idx, val, rmap, roff, cmap, coff, nrows, ncols, chunk,
                  drop=True):
    """CSR of C from stacked CSC blocks with original row/column ids, no sort.

    Pass 1 appends each entry, columns ascending, to its chunk of consecutive rows (few
    write streams, not a random cache line per nonzero); pass 2 scatters each cache-sized
    chunk into its rows. Both keep the column order, so rows come out sorted."""
    nb = off.size - 1
    # every block column, grouped by its original column id
    starts = np.zeros(ncols + 1, np.int64)
    for b in range(nb):
        for c in range(coff[b], coff[b + 1]):
            starts[cmap[c] + 1] += 1
    for j in range(ncols):
        starts[j + 1] += starts[j]
    fill = starts[:-1].copy()
    piece_block = np.empty(starts[ncols], np.int32)
    piece_col = np.empty(starts[ncols], np.int64)
    for b in range(nb):
        for c in range(coff[b + 1] - coff[b]):
            j = cmap[coff[b] + c]
            d = fill[j]
            piece_block[d] = b
            piece_col[d] = c
            fill[j] = d + 1
    # nonzeros per original row
    indptr = np.zeros(nrows + 1, np.int64)
    for b in range(nb):
        ro = roff[b]
        for t in range(ptr[off[b]], ptr[off[b + 1] - 1]):
            if val[t] != 0.0 or not drop:
                indptr[rmap[ro + idx[t]] + 1] += 1
    for r in range(nrows):
        indptr[r + 1] += indptr[r]
    nnz = indptr[nrows]
    # chunks of consecutive rows with about `chunk` nonzeros
    chunk_of = np.empty(nrows, np.int32)
    chunk_lo = np.empty(nrows + 1, np.int64)     # first row of every chunk
    nch = 0
    chunk_lo[0] = 0
    for r in range(nrows):
        if r > chunk_lo[nch] and indptr[r + 1] - indptr[chunk_lo[nch]] > chunk:
            nch += 1
            chunk_lo[nch] = r
        chunk_of[r] = nch
    nch += 1
    chunk_lo[nch] = nrows
    indices = np.empty(nnz, np.int32)
    data = np.empty(nnz, np.float64)
    rows = np.empty(nnz, np.int32)
    cur = np.empty(nch, np.int64)
    for c in range(nch):
        cur[c] = indptr[chunk_lo[c]]
    # pass 1: entries to their chunk, columns ascending
    for j in range(ncols):
        for p in range(starts[j], starts[j + 1]):
            b = piece_block[p]
            c = off[b] + piece_col[p]
            ro = roff[b]
            for t in range(ptr[c], ptr[c + 1]):
                v = val[t]
                if v == 0.0 and drop:
                    continue
                r = rmap[ro + idx[t]]
                ch = chunk_of[r]
                d = cur[ch]
                indices[d] = j
                data[d] = v
                rows[d] = r
                cur[ch] = d + 1
    # pass 2: inside every chunk, entries to their rows (stable)
    nxt = indptr[:-1].copy()
    dups = False
    maxlen = 0
    for c in range(nch):
        maxlen = max(maxlen, indptr[chunk_lo[c + 1]] - indptr[chunk_lo[c]])
    s_idx = np.empty(maxlen, np.int32)
    s_val = np.empty(maxlen, np.float64)
    s_row = np.empty(maxlen, np.int32)
    for c in range(nch):
        lo = indptr[chunk_lo[c]]
        hi = indptr[chunk_lo[c + 1]]
        n = hi - lo
        for t in range(n):      # element loops: a slice assignment costs ~2 s of compile
            s_idx[t] = indices[lo + t]
            s_val[t] = data[lo + t]
            s_row[t] = rows[lo + t]
        for t in range(n):
            r = s_row[t]
            d = nxt[r]
            j = s_idx[t]
            if d > indptr[r] and indices[d - 1] == j:
                dups = True
            indices[d] = j
            data[d] = s_val[t]
            nxt[r] = d + 1
    return indptr, indices, data, dups


def load_batch(path, drop_zeros: bool = True) -> sp.csr_array:
    """Read one file written by :class:`Write`: C with only that batch's columns."""
    with np.load(path) as z:
        shape = tuple(int(x) for x in z["shape"])
        cells = sorted({name.rsplit("_", 1)[0] for name in z.files if name != "shape"})
        kept = []
        for c in cells:
            ptr = z[f"{c}_indptr"]
            kept.append((CscBlock(ptr, np.arange(ptr[-1], dtype=np.int32), z[f"{c}_data"],
                                  (int(ptr[-1]), ptr.size - 1)), z[f"{c}_rows"], z[f"{c}_cols"]))
    return assemble(kept, shape, drop_zeros)


def _threshold(block: CscBlock, thr: float) -> CscBlock:
    keep = block.val >= thr
    kept_before = np.concatenate([[0], np.cumsum(keep, dtype=np.int64)])
    ptr = kept_before[block.ptr]
    return CscBlock(ptr, block.idx[keep], block.val[keep], block.shape, block.sorted)


@njit(cache=True, nogil=True)
def _count_sum(val):
    """Nonzero values and their sum, pairwise over 4096-value chunks (numpy's rounding)."""
    nnz = 0
    total = 0.0
    for lo in range(0, val.size, 4096):
        part = 0.0
        for t in range(lo, min(lo + 4096, val.size)):
            v = val[t]
            nnz += v != 0.0
            part += v
        total += part
    return nnz, total


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
