"""The serial reference of SpGEMM and the comparison of a run with it (``serial_check``)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from daskhpc.errors import InputError

from ._kernels import SEMIRINGS
from ._data import like_input
from ._result import SpgemmResult, reference_name, serial_statement
from ._setup import Setup


def serial_multiply(a, b=None, *, semiring: str = "plus_times", mask=None,
                    complement: bool = False) -> sp.csr_array:
    """The serial reference of :func:`multiply`, canonical CSR.

    plus_times is scipy's single-threaded product (masked by scipy); another semiring the
    one-cell product of the local kernel."""
    from ._data import check_inputs
    from ._setup import check_mask, check_semiring

    a2, b2 = check_inputs(a, b)
    sr = check_semiring(semiring)
    m = check_mask(mask, (a2.shape[0], b2.shape[1]))
    if complement and m is None:
        raise InputError("the mask's complement needs a mask (--mask FILE)")
    return like_input(_serial_product(a2, b2, sr, m, complement), a, b)


def _serial_product(a, b, semiring: int = 0, mask=None, complement: bool = False
                    ) -> sp.csr_array:
    if semiring == 0:
        ref = sp.csr_array(a @ b)
        ref.sum_duplicates()
        if mask is not None:
            kept = sp.csr_array(_ones(ref) - _ones(ref).multiply(_ones(mask))) if complement \
                else sp.csr_array(_ones(ref).multiply(_ones(mask)))
            ref = sp.csr_array(ref.multiply(kept))
            ref.eliminate_zeros()
            ref.sort_indices()
        return ref
    from ._block import CscBlock
    from ._local import fused_multiply

    c = fused_multiply([CscBlock.from_scipy(a)], [CscBlock.from_scipy(b)], sort=True,
                       semiring=semiring, complement=complement,
                       mask=None if mask is None else CscBlock.from_scipy(mask))
    out = sp.csr_array(sp.csc_array((c.val, c.idx, c.ptr), shape=c.shape))
    out.sort_indices()
    return out


def _ones(m) -> sp.csr_array:
    """The pattern of m (stored entries, zeros included) with values 1."""
    m = sp.csr_array(m)
    return sp.csr_array((np.ones(m.nnz), m.indices, m.indptr), shape=m.shape)


def compare_products(c, ref) -> dict:
    """The ``serial_check`` of a kept C against ``ref``, on the union of the patterns.

    Sums in another order may cancel to exactly 0 on one side only: ``identical`` means
    every value agrees to 1e-12 of the largest |entry|; ``only_here``/``only_in_serial``
    count the entries one side alone stores."""
    if c.shape != ref.shape:
        return {"done": True, "identical": False, "same_pattern": False,
                "shape": list(c.shape), "shape_serial": list(ref.shape)}
    same = c.nnz == ref.nnz and bool((c.indptr == ref.indptr).all() and
                                     (c.indices == ref.indices).all())
    scale = max(float(abs(ref.data).max()), 1e-300) if ref.nnz else 1.0
    out = {"done": True, "same_pattern": same}
    if same:
        diff = float(abs(c.data - ref.data).max()) if c.nnz else 0.0
    else:
        d = sp.csr_array(c - ref)
        diff = float(abs(d.data).max()) if d.nnz else 0.0
        here = sp.csr_array(_ones(c) - _ones(ref))           # +1 only in c, -1 only in ref
        for name, sign, m in (("only_here", 1.0, c), ("only_in_serial", -1.0, ref)):
            mask = sp.csr_array(here == sign)
            vals = sp.csr_array(abs(m) * mask).data
            out[name] = int(mask.nnz)
            out[f"{name}_max_abs"] = float(vals.max()) if vals.size else 0.0
    out.update(max_abs_diff=diff, tolerance=1e-12 * scale, identical=diff <= 1e-12 * scale)
    return out


def serial_check(s: Setup, res: SpgemmResult, a=None, b=None) -> dict:
    """The ``serial_check`` section: the run's C (or count) against the serial reference."""
    a, b = (s.a, s.b) if a is None else (a, b)
    ref = _serial_product(a, b, s.semiring, s.mask, s.complement)
    if res.matrix is not None and type(s.consumer).__name__ == "Keep":
        from ._collect import client_of

        c = res.matrix if sp.issparse(res.matrix) else sp.csr_array(
            res.matrix.compute(scheduler=client_of(res.matrix)))
        out = compare_products(sp.csr_array(c), ref)
    elif res.pieces is not None and type(s.consumer).__name__ == "Keep":
        from daskhpc._saved import read_pieces       # the files read back: what was saved

        out = compare_products(read_pieces(*res.pieces), ref)
    elif isinstance(res.value, dict) and "nnz" in res.value and res.pieces is None:
        out = compare_counts(res.value, a, b, ref, s.mask, s.complement)
    else:
        return {"done": False}
    out["reference"] = reference_name(SEMIRINGS[s.semiring])
    out["statement"] = serial_statement(out)
    return out


def compare_counts(value: dict, a, b, ref, mask=None, complement: bool = False) -> dict:
    """The ``serial_check`` of ``--consume count`` against ``ref``.

    ``nnz`` may differ by exact cancellations (bcsstk13: 850 of 396,773), so ``identical``
    compares the structural count exactly and the sum to 1e-12 of the sum of |C|."""
    out = {"done": True, "nnz": int(value["nnz"]), "nnz_ref": int(ref.nnz),
           "sum": float(value.get("sum", np.nan)), "sum_ref": float(ref.sum())}
    abs_sum = float(abs(ref.data).sum()) if ref.nnz else 0.0
    out["sum_tolerance"] = 1e-12 * abs_sum
    sum_ok = abs(out["sum"] - out["sum_ref"]) <= out["sum_tolerance"]
    if "structural_nnz" not in value:            # a count from an older checkpoint
        out.update(compared="nnz, sum", identical=bool(sum_ok and out["nnz"] == ref.nnz))
        return out
    structural = sp.csr_array(_ones(a) @ _ones(b))     # positive terms: nothing cancels
    if mask is not None:
        inside = sp.csr_array(structural.multiply(_ones(mask)))
        structural = sp.csr_array(structural - inside) if complement else inside
        structural.eliminate_zeros()
    out.update(compared="structural_nnz, sum", structural_nnz=int(value["structural_nnz"]),
               structural_nnz_ref=int(structural.nnz))
    out["identical"] = bool(sum_ok and out["structural_nnz"] == out["structural_nnz_ref"])
    return out
