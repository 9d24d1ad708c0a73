"""The local submatrix a grid cell holds: compressed sparse columns, int32 rows (no dask)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


@dataclass(eq=False)
class CscBlock:
    """A sparse block in compressed sparse column form (12 bytes a nonzero).

    Column-oriented like the paper's SpGEMM, with no requirement that rows be sorted
    within a column (section IV-D keeps intermediate products unsorted).

    Parameters
    ----------
    ptr : int64 array, ``ncols + 1``
    idx : int32 array, row of each nonzero
    val : float64 array
    shape : (int, int)
    sorted : bool
        Whether rows are ascending within every column.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> blk = CscBlock.from_scipy(sp.eye(3, format="csr"))
    >>> blk.nnz, blk.shape, blk.nbytes
    (3, (3, 3), 68)
    """

    ptr: np.ndarray
    idx: np.ndarray
    val: np.ndarray
    shape: tuple
    sorted: bool = False

    @classmethod
    def empty(cls, shape) -> CscBlock:
        return cls(np.zeros(shape[1] + 1, np.int64), np.zeros(0, np.int32),
                   np.zeros(0, np.float64), tuple(shape), True)

    @classmethod
    def from_scipy(cls, m) -> CscBlock:
        """From any scipy sparse matrix or array (converted to CSC, float64)."""
        if m.shape[0] >= 2**31:
            raise ValueError("blocks with 2**31 rows or more are not supported")
        c = sp.csc_array(m)
        c.sum_duplicates()
        return cls(c.indptr.astype(np.int64), c.indices.astype(np.int32),
                   c.data.astype(np.float64), tuple(c.shape), True)

    @property
    def nnz(self) -> int:
        return int(self.ptr[-1])

    @property
    def nbytes(self) -> int:
        return int(self.ptr.nbytes + self.idx.nbytes + self.val.nbytes)

    def to_scipy(self, fmt: str = "csc"):
        """A scipy sparse array (``csc`` or ``csr``); sorted if this block is."""
        idx_dtype = np.int32 if self.nnz < 2**31 else np.int64
        m = sp.csc_array((self.val, self.idx.astype(idx_dtype, copy=False),
                          self.ptr.astype(idx_dtype, copy=False)), shape=self.shape)
        m.has_sorted_indices = bool(self.sorted)
        return m if fmt == "csc" else m.tocsr()

    def __repr__(self) -> str:
        return (f"CscBlock({self.shape[0]}x{self.shape[1]}, nnz={self.nnz}, "
                f"sorted={self.sorted})")
