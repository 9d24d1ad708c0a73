"""SpGEMM over semirings and with a general mask ``C<M> = A·B``.

The references are written here from the definitions (GraphBLAS semantics: C(i,j) = add
over k of mul(A(i,k), B(k,j)) over the stored entries of A and B; an entry exists iff the
pattern product has it, whatever its value), independently of the package's kernels; and
python-graphblas (SuiteSparse) where it is installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp
from spgemm_helpers import random_matrix

from daskhpc.errors import InputError
from daskhpc.spgemm import _local, multiply, plan, serial_multiply
from daskhpc.spgemm._block import CscBlock
from daskhpc.spgemm._kernels import SEMIRINGS

EXE = os.path.join(os.path.dirname(sys.executable), "daskhpc")

# (mul, add as a numpy ufunc) of each semiring, from the definitions
OPS = {"plus_times": (lambda a, b: a * b, np.add),
       "min_plus": (lambda a, b: a + b, np.minimum),
       "max_plus": (lambda a, b: a + b, np.maximum),
       "max_times": (lambda a, b: a * b, np.maximum),
       "or_and": (lambda a, b: ((a != 0) & (b != 0)).astype(float), np.maximum),
       "plus_pair": (lambda a, b: np.ones_like(a), np.add)}


def dense_reference(a, b, semiring, mask=None, complement=False) -> dict:
    """``{(i, j): value}`` by the triple loop of the definition (small matrices)."""
    mul, add = OPS[semiring]
    a, b = sp.csr_array(a), sp.csr_array(b)
    pa, pb = a.copy(), b.copy()
    pa.data[:], pb.data[:] = 1, 1
    pa, pb, ad, bd = pa.toarray(), pb.toarray(), a.toarray(), b.toarray()
    inm = None if mask is None else (abs(sp.csr_array(mask)).toarray() > 0) | \
        _pattern(mask).toarray().astype(bool)
    out = {}
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            ks = [k for k in range(a.shape[1]) if pa[i, k] and pb[k, j]]
            if not ks or (inm is not None and bool(inm[i, j]) == complement):
                continue
            terms = [mul(np.float64(ad[i, k]), np.float64(bd[k, j])) for k in ks]
            out[(i, j)] = float(add.reduce(np.array(terms)))
    return out


def expanded_reference(a, b, semiring, mask=None, complement=False) -> sp.csr_array:
    """The same definition, vectorised: every product term (i, k, j), then the semiring's
    add over k (``ufunc.reduceat`` on the terms sorted by (i, j))."""
    mul, add = OPS[semiring]
    a, b = sp.coo_array(a), sp.csr_array(b)
    lens = np.diff(b.indptr)[a.col]
    rows = np.repeat(a.row, lens)
    starts = np.repeat(b.indptr[a.col], lens)
    offs = np.arange(lens.sum()) - np.repeat(np.cumsum(lens) - lens, lens)
    pos = starts + offs
    cols = b.indices[pos]
    vals = mul(np.repeat(a.data, lens), b.data[pos])
    order = np.lexsort((cols, rows))
    rows, cols, vals = rows[order], cols[order], vals[order]
    first = np.flatnonzero(np.r_[True, (rows[1:] != rows[:-1]) | (cols[1:] != cols[:-1])])
    r, c, v = rows[first], cols[first], add.reduceat(vals, first)
    if mask is not None:
        m = _pattern(mask).tocsr()
        m.sort_indices()
        keep = np.asarray(m[r, c]).ravel() > 0
        keep = ~keep if complement else keep
        r, c, v = r[keep], c[keep], v[keep]
    out = sp.csr_array((v, (r, c)), shape=(a.shape[0], b.shape[1]))
    out.sort_indices()
    return out


def _pattern(m) -> sp.csr_array:
    m = sp.csr_array(m)
    return sp.csr_array((np.ones(m.nnz), m.indices, m.indptr), shape=m.shape)


def graphblas_reference(a, b, semiring, mask=None, complement=False):
    """python-graphblas's product (None when it is not installed)."""
    try:
        import graphblas as gb
    except ImportError:
        return None
    if semiring == "or_and":               # GraphBLAS's lor_land on boolean matrices
        ga, gbb, op, dtype = _bool(gb, a), _bool(gb, b), gb.semiring.lor_land, bool
    else:
        ga, gbb = (gb.io.from_scipy_sparse(sp.csr_matrix(x)) for x in (a, b))
        op, dtype = getattr(gb.semiring, semiring), float
    c = gb.Matrix(dtype, a.shape[0], b.shape[1])
    if mask is None:
        c << ga.mxm(gbb, op)
    else:
        gm = gb.io.from_scipy_sparse(sp.csr_matrix(_pattern(mask)))
        c(~gm.S if complement else gm.S) << ga.mxm(gbb, op)
    out = sp.csr_array(gb.io.to_scipy_sparse(c, format="csr").astype(np.float64))
    out.sort_indices()
    return out


def _bool(gb, m):
    m = sp.csr_matrix(m)
    return gb.Matrix.from_csr(m.indptr, m.indices, m.data != 0, nrows=m.shape[0],
                              ncols=m.shape[1])


def as_dict(c) -> dict:
    c = sp.coo_array(c)
    return {(int(i), int(j)): float(v) for i, j, v in zip(c.row, c.col, c.data)}


def assert_equal_product(c, ref):
    """Same structural pattern (zeros included) and values (exact sums here)."""
    c, ref = sp.csr_array(c), sp.csr_array(ref)
    for x in (c, ref):
        x.sum_duplicates()
        x.sort_indices()
    assert c.shape == ref.shape and c.nnz == ref.nnz
    np.testing.assert_array_equal(c.indptr, ref.indptr)
    np.testing.assert_array_equal(c.indices, ref.indices)
    np.testing.assert_allclose(c.data, ref.data, rtol=1e-12, atol=0)


@pytest.fixture(scope="module")
def small():
    """A random rectangular product (integer values, some 0 sums) and a mask."""
    a = random_matrix(40, 30, 0.12, 1)
    b = random_matrix(30, 35, 0.12, 2)
    b.data[::7] = -b.data[::7]                     # min_plus / max_plus can reach 0
    m = random_matrix(40, 35, 0.3, 3)
    return a, b, m


#: Semirings of the default run (each compiles its own kernels on a fresh install: CI
#: budget); the others run with -m slow.
QUICK = ("plus_times", "min_plus", "or_and")


@pytest.mark.parametrize("semiring", [s if s in QUICK else pytest.param(s, marks=pytest.mark.slow)
                                      for s in SEMIRINGS])
def test_local_kernels_equal_the_definition(small, semiring):
    a, b, m = small
    ca, cb, cm = (CscBlock.from_scipy(x) for x in (a, b, m))
    for mask, complement in ((None, False), (m, False), (m, True)):
        ref = dense_reference(a, b, semiring, mask, complement)
        assert ref == as_dict(expanded_reference(a, b, semiring, mask, complement))
        for acc in ("dense", "hash"):
            c = _local.local_multiply(ca, cb, semiring=semiring, accumulator=acc,
                                      mask=None if mask is None else cm, complement=complement)
            assert as_dict(c.to_scipy()) == ref, (acc, mask is not None, complement)
        counts, _ = _local.local_symbolic(ca, cb, mask=None if mask is None else cm,
                                          complement=complement)
        assert int(counts.sum()) == len(ref)
    if semiring in ("min_plus", "max_plus"):          # a sum of 0 is still an entry
        assert 0.0 in dense_reference(a, b, semiring).values()


def test_graphblas_agrees_with_the_definition(small):
    pytest.importorskip("graphblas")
    a, b, m = small
    for semiring in SEMIRINGS:
        for mask, complement in ((None, False), (m, True)):
            assert_equal_product(graphblas_reference(a, b, semiring, mask, complement),
                                 expanded_reference(a, b, semiring, mask, complement))


@pytest.mark.parametrize("semirings", [("min_plus", "plus_pair"), pytest.param(
    tuple(s for s in SEMIRINGS if s not in ("min_plus", "plus_pair")), marks=pytest.mark.slow)])
def test_distributed_semirings_equal_the_references(client2, small, semirings):
    """Every semiring on a 1x1x2 grid (fused parts and Merge-Fiber), 2 batches, keep."""
    a, b, _ = small
    for semiring in semirings:
        res = multiply(a, b, client=client2, grid="1x1x2", batches=2, semiring=semiring,
                       plan=False, measure_memory=False, check_serial=True)
        ref = expanded_reference(a, b, semiring)
        if semiring == "plus_times":      # scipy's convention: sums of exactly 0 dropped
            ref.eliminate_zeros()
        assert_equal_product(res.matrix, ref)
        rep = res.report()
        assert rep["semiring"] == semiring and rep.get("mask") is None
        assert rep["serial_check"]["identical"]
        # scipy has no min_plus product: the summary names the reference compared with
        said = rep["serial_check"]["statement"]
        assert "scipy" not in said and said.startswith(
            f"C matches the serial {semiring} product (the local kernel on one cell): "
            "every value to ")
    assert_equal_product(serial_multiply(a, b, semiring="min_plus"),
                         expanded_reference(a, b, "min_plus"))


@pytest.mark.parametrize("complement", [False, True])
def test_masked_product_in_count_and_keep(client2, small, complement):
    """C<M> (C<!M>) equals (A @ B) masked, kept and counted, on a 2x2x1 grid."""
    a, b, m = small
    full = sp.csr_array(a @ b)
    inside = sp.csr_array(full.multiply(_pattern(m)))
    want = sp.csr_array(full - inside) if complement else inside
    want.eliminate_zeros()
    res = multiply(a, b, client=client2, grid="2x2x1", batches=2, mask=m,
                   complement=complement, plan=False, measure_memory=False, check_serial=True)
    assert_equal_product(res.matrix, want)
    assert res.report()["mask"] == {"shape": [40, 35], "nnz": m.nnz, "complement": complement}
    cnt = multiply(a, b, client=client2, grid="2x2x1", batches=2, mask=m,
                   complement=complement, consume="count", plan=False, measure_memory=False,
                   check_serial=True)
    assert cnt.value["nnz"] == want.nnz
    assert cnt.value["sum"] == pytest.approx(float(want.sum()), abs=1e-9)
    assert cnt.report()["serial_check"]["identical"]
    # the min_plus product, masked, through the count consumer
    ref = expanded_reference(a, b, "min_plus", m, complement)
    cmp = multiply(a, b, client=client2, grid="2x2x1", semiring="min_plus", mask=m,
                   complement=complement, consume="count", plan=False, measure_memory=False)
    assert cmp.value["nnz"] == cmp.value["structural_nnz"] == ref.nnz
    assert cmp.value["sum"] == pytest.approx(float(ref.sum()), abs=1e-9)


def test_plan_counts_only_the_masked_entries(small):
    """The planner's maxnnzC (Symbolic3D) is the masked count, so b can only shrink."""
    a, b, m = small
    free = plan(a, b, grid="1x1x1")
    masked = plan(a, b, grid="1x1x1", mask=m)
    comp = plan(a, b, grid="1x1x1", mask=m, complement=True, semiring="or_and")
    ones = sp.csr_array(_pattern(a) @ _pattern(b))
    n_in = sp.csr_array(ones.multiply(_pattern(m))).nnz
    assert free["symbolic"]["max_nnz_c"] == ones.nnz
    assert masked["symbolic"]["max_nnz_c"] == n_in
    assert comp["symbolic"]["max_nnz_c"] == ones.nnz - n_in
    assert comp["semiring"] == "or_and" and comp["mask"]["complement"] is True
    # a budget that needs 2+ batches unmasked needs fewer with a tight mask
    tight = sp.csr_array((np.ones(5), (np.arange(5), np.arange(5))), shape=(40, 35))
    budget = 24 * (a.nnz + b.nnz) + 24 * ones.nnz // 3
    assert plan(a, b, grid="1x1x1", memory_per_worker=budget, mask=tight)["batches"] < \
        plan(a, b, grid="1x1x1", memory_per_worker=budget)["batches"]


def test_bad_semiring_or_mask_is_one_line(small):
    a, b, m = small
    with pytest.raises(InputError, match="the mask is 35 x 40, but C = A·B is 40 x 35"):
        plan(a, b, mask=sp.csr_array(m.T))
    with pytest.raises(InputError, match="semiring must be one of plus_times, min_plus"):
        plan(a, b, semiring="min_times")
    with pytest.raises(InputError, match="complement needs a mask"):
        serial_multiply(a, b, complement=True)


def test_cli_bad_mask_shape_exits_2_before_a_cluster(tmp_path, small):
    a, b, m = small
    for name, x in (("a.mtx", a), ("b.mtx", b), ("m.mtx", m.T)):
        scipy.io.mmwrite(tmp_path / name, sp.coo_matrix(x))
    p = subprocess.run([EXE, "run", "spgemm", str(tmp_path / "a.mtx"), "--b",
                        str(tmp_path / "b.mtx"), "--mask", str(tmp_path / "m.mtx"),
                        "--semiring", "min_plus", "--workers", "2"],
                       capture_output=True, text=True, timeout=280)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "m.mtx: the mask is 35 x 40" in lines[0], p.stderr


@pytest.mark.slow
def test_bcsstk13_semirings_and_masks(client2, shared_data):
    """bcsstk13 A·A for every semiring against the definition (and python-graphblas),
    then C<M> with M = A's pattern in count and keep, on 2x2x1 under a budget."""
    from daskhpc.io import read

    a = sp.csr_array(read(str(shared_data / "matrices" / "bcsstk13.mtx")).matrix)
    for semiring in SEMIRINGS:
        res = multiply(a, client=client2, grid="1x1x2", batches=2, semiring=semiring,
                       plan=False, check_serial=True)
        ref = expanded_reference(a, a, semiring)
        # exact for min/max/pair semirings; sums in another order for plus_times
        c = sp.csr_array(res.matrix)
        if semiring == "plus_times":
            assert res.report()["serial_check"]["identical"]
        else:
            assert_equal_product(c, ref)
            gbr = graphblas_reference(a, a, semiring)
            if gbr is not None:
                assert_equal_product(c, gbr)
    for complement in (False, True):
        ref = expanded_reference(a, a, "min_plus", a, complement)
        kept = multiply(a, client=client2, grid="2x2x1", semiring="min_plus", mask=a,
                        complement=complement, memory_per_worker="8MB")
        assert_equal_product(kept.matrix, ref)
        cnt = multiply(a, client=client2, grid="2x2x1", semiring="min_plus", mask=a,
                       complement=complement, consume="count", memory_per_worker="8MB")
        assert cnt.value["nnz"] == ref.nnz
        assert cnt.memory["within_budget"], cnt.memory
        full = sp.csr_array(a @ a)
        masked = sp.csr_array(full.multiply(_pattern(a)))
        want = sp.csr_array(full - masked) if complement else masked
        pt = multiply(a, client=client2, grid="2x2x1", mask=a, complement=complement,
                      consume="count", check_serial=True)
        assert pt.report()["serial_check"]["identical"]
        assert pt.value["structural_nnz"] >= want.nnz


@pytest.mark.slow
def test_cli_semiring_and_mask_on_files(tmp_path, small):
    """``daskhpc run spgemm --semiring min_plus --mask FILE --mask-complement`` and
    ``daskhpc plan`` with the same options, through the console script."""
    a, b, m = small
    for name, x in (("a.mtx", a), ("b.mtx", b), ("m.mtx", m)):
        scipy.io.mmwrite(tmp_path / name, sp.coo_matrix(x))
    args = [str(tmp_path / "a.mtx"), "--b", str(tmp_path / "b.mtx"), "--semiring",
            "min_plus", "--mask", str(tmp_path / "m.mtx"), "--mask-complement"]
    out = tmp_path / "r.json"
    p = subprocess.run([EXE, "run", "spgemm", *args, "--workers", "2", "--grid", "1x1x2",
                        "--consume", "count", "--check-serial", "--json", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    rep = json.loads(out.read_text())
    ref = expanded_reference(a, b, "min_plus", m, True)
    assert rep["semiring"] == "min_plus" and rep["mask"]["complement"] is True
    assert rep["mask"]["path"].endswith("m.mtx")
    assert rep["serial_check"]["identical"] and rep["quality"]["nnz_c"] == ref.nnz
    p = subprocess.run([EXE, "plan", "spgemm", *args, "--grid", "2x2x1", "--json",
                        str(out)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    rep = json.loads(out.read_text())
    assert rep["plan"]["symbolic"]["max_nnz_c"] <= ref.nnz
    assert rep["plan"]["semiring"] == "min_plus"
