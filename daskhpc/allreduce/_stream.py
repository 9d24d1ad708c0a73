"""The stream format of the sparse allreduce (Renggli 2017, sections 3.3.2 and 4.1)."""

from __future__ import annotations

import numpy as np

from ._kernels import merge_sum, merge_union

#: c: bytes of one sparse index (uint32, section 4.1.1)
INDEX_BYTES = 4
#: the stream header: the item count (``unsigned nofitems``, Listing 4.1)
HEADER_BYTES = 4


class Format:
    """Value type and sizes of a call's streams: ``isize``, ``c`` and the dense switch.

    Examples
    --------
    >>> import numpy as np
    >>> f = Format(np.float64)
    >>> f.phi(12), f.dense_if(8, 12), f.dense_if(7, 12)
    (8, True, False)
    """

    __slots__ = ("dtype", "isize", "c")

    def __init__(self, dtype):
        self.dtype = np.dtype(dtype)
        self.isize = int(self.dtype.itemsize)
        self.c = INDEX_BYTES

    def dense_if(self, n: int, d: int) -> bool:
        """True when ``n`` sparse items over a range of ``d`` are no cheaper than dense."""
        return n * (self.c + self.isize) >= d * self.isize

    def phi(self, d: int) -> int:
        """phi(d) = floor(d isize / (isize + c)), the most sparse items (section 4.1.2)."""
        return (d * self.isize) // (self.isize + self.c)

    def item_bytes(self, dense: bool) -> int:
        return self.isize if dense else self.c + self.isize

    def __reduce__(self):
        return (Format, (self.dtype.str,))

    def __repr__(self):
        return f"Format({self.dtype.name}, isize={self.isize}, c={self.c})"


class Stream:
    """``[lo, hi)`` of a vector: dense when ``idx is None``; ``val is None`` index-only.

    Sparse: sorted unique uint32 global indices and their values; a message costs a
    4-byte header plus ``n (c + isize)`` bytes sparse or ``d isize`` dense. A single stream
    is dense iff ``n (c + isize) >= d isize``; a merge of two sparse ones goes dense iff
    ``(n1 + n2)(c + isize) >= d isize`` (Listing 4.3) and never back; a concatenation is
    sparse iff both parts are. As a payload: ``(idx, val)`` sparse, ``(val,)`` dense.

    Examples
    --------
    >>> import numpy as np
    >>> a = Stream(0, 12, np.array([1, 5], np.uint32), np.array([1.0, 2.0]))
    >>> a.to_dense()[:6].tolist(), a.nbytes(Format(np.float64))
    ([0.0, 1.0, 0.0, 0.0, 0.0, 2.0], 24)
    """

    __slots__ = ("lo", "hi", "idx", "val")

    def __init__(self, lo: int, hi: int, idx, val):
        self.lo, self.hi, self.idx, self.val = int(lo), int(hi), idx, val

    @property
    def dense(self) -> bool:
        return self.idx is None

    @property
    def dim(self) -> int:
        return self.hi - self.lo

    @property
    def nitems(self) -> int:
        return self.dim if self.idx is None else int(self.idx.size)

    def nbytes(self, fmt: Format) -> int:
        """Payload bytes (without the header)."""
        return self.nitems * fmt.item_bytes(self.dense)

    def to_dense(self) -> np.ndarray:
        """The values of ``[lo, hi)`` as a dense array."""
        if self.idx is None:
            return self.val
        out = np.zeros(self.dim, self.val.dtype)
        out[self.idx - np.uint32(self.lo)] = self.val
        return out

    def __repr__(self):
        kind = "dense" if self.dense else f"sparse {self.nitems}"
        return f"Stream([{self.lo}, {self.hi}), {kind})"


def densify(s: Stream, fmt: Format) -> Stream:
    """The same values, dense (index-only streams stay index-only)."""
    return s if s.dense else Stream(s.lo, s.hi, None, None if s.val is None else s.to_dense())


def canon(s: Stream, fmt: Format) -> Stream:
    """A single stream in its representation: dense iff ``n (c + isize) >= d isize``."""
    return densify(s, fmt) if not s.dense and fmt.dense_if(s.nitems, s.dim) else s


def merge(a: Stream, b: Stream, fmt: Format) -> Stream:
    """The sum of two streams over the same range, with the dynamic dense switch.

    Cases of section 4.1.3: both sparse (Listing 4.3), both dense (4.4), one dense (4.5).
    Inputs are never modified."""
    lo, hi = a.lo, a.hi
    index_only = a.val is None
    if not a.dense and not b.dense and not fmt.dense_if(a.nitems + b.nitems, hi - lo):
        if index_only:
            return Stream(lo, hi, merge_union(a.idx, b.idx), None)
        idx, val = merge_sum(a.idx, a.val, b.idx, b.val)
        return Stream(lo, hi, idx, val)
    if index_only:
        return Stream(lo, hi, None, None)
    if a.dense and b.dense:
        return Stream(lo, hi, None, a.val + b.val)
    if a.dense or b.dense:
        d, s = (a, b) if a.dense else (b, a)
        out = d.val.copy()
        out[s.idx - np.uint32(lo)] += s.val
        return Stream(lo, hi, None, out)
    # both sparse, switching to dense: first's values, then second's added (Listing 4.3)
    out = np.zeros(hi - lo, a.val.dtype)
    out[a.idx - np.uint32(lo)] = a.val
    out[b.idx - np.uint32(lo)] += b.val
    return Stream(lo, hi, None, out)


def take(s: Stream, lo: int, hi: int, fmt: Format) -> Stream:
    """The part ``[lo, hi)`` of ``s`` (a split part: dense stays dense, sparse is canon)."""
    if s.dense:
        val = None if s.val is None else s.val[lo - s.lo:hi - s.lo]
        return Stream(lo, hi, None, val)
    a, b = np.searchsorted(s.idx, np.array([lo, hi], np.int64))
    val = None if s.val is None else s.val[a:b]
    return canon(Stream(lo, hi, s.idx[a:b], val), fmt)


def concat(a: Stream, b: Stream, fmt: Format) -> Stream:
    """Adjacent ranges ``a`` then ``b`` as one stream (4.1.3 case 2: sparse iff both)."""
    if a.hi != b.lo:
        raise ValueError(f"cannot concatenate {a} and {b}: not adjacent")
    if not a.dense and not b.dense:
        val = None if a.val is None else np.concatenate([a.val, b.val])
        return Stream(a.lo, b.hi, np.concatenate([a.idx, b.idx]), val)
    if a.val is None:
        return Stream(a.lo, b.hi, None, None)
    return Stream(a.lo, b.hi, None, np.concatenate([densify(a, fmt).val, densify(b, fmt).val]))


def to_payload(s: Stream) -> tuple:
    """The message: ``(idx, val)`` sparse, ``(val,)`` dense."""
    return (s.val,) if s.dense else (s.idx, s.val)


def from_payload(payload: tuple, lo: int, hi: int) -> Stream:
    """A received message over ``[lo, hi)`` (the range the algorithm says it covers)."""
    if len(payload) == 1:
        return Stream(lo, hi, None, payload[0])
    return Stream(lo, hi, payload[0], payload[1])
