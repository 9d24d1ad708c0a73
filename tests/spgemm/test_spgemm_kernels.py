"""Local kernels (section IV-D) against scipy: symbolic, hash multiply, hash merge, sort."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from spgemm_helpers import assert_same_product, random_matrix

from daskhpc.spgemm import _local
from daskhpc.spgemm._block import CscBlock


@pytest.mark.parametrize("shape", [(50, 40, 30), (1, 7, 1), (200, 3, 150), (64, 64, 64)])
@pytest.mark.parametrize("density", [0.02, 0.3])
def test_multiply_equals_scipy(shape, density):
    m, k, n = shape
    a = random_matrix(m, k, density, 1)
    b = random_matrix(k, n, density, 2)
    ref = a @ b
    c = _local.local_multiply(CscBlock.from_scipy(a), CscBlock.from_scipy(b))
    assert not c.sorted
    assert_same_product(c.to_scipy(), ref)
    counts, flops = _local.local_symbolic(CscBlock.from_scipy(a), CscBlock.from_scipy(b))
    pa, pb = (abs(a) > 0).astype(np.int64), (abs(b) > 0).astype(np.int64)
    np.testing.assert_array_equal(flops, np.asarray((pa @ pb).sum(axis=0)).ravel())
    np.testing.assert_array_equal(counts, np.diff(sp.csc_array(pa @ pb).indptr))  # structural


def test_hash_symbolic_agrees_with_dense_marker(monkeypatch):
    a = random_matrix(300, 300, 0.05, 3)
    blk = CscBlock.from_scipy(a)
    dense, _ = _local.local_symbolic(blk, blk)
    monkeypatch.setattr(_local, "DENSE_SYMBOLIC_ROWS", 0)
    hashed, _ = _local.local_symbolic(blk, blk)
    np.testing.assert_array_equal(dense, hashed)


def test_merge_sums_unsorted_blocks_and_sorts_on_request():
    parts = [random_matrix(80, 60, 0.1, s) for s in range(3)]
    blocks = [_local.local_multiply(CscBlock.from_scipy(p), CscBlock.from_scipy(sp.eye(60)))
              for p in parts]
    merged = _local.merge(blocks)
    assert_same_product(merged.to_scipy(), parts[0] + parts[1] + parts[2])
    srt = _local.merge(blocks, sort=True)
    assert srt.sorted
    for j in range(srt.shape[1]):
        col = srt.idx[srt.ptr[j]:srt.ptr[j + 1]]
        assert np.all(np.diff(col) > 0)


def test_fused_multiply_equals_staged():
    a = random_matrix(90, 120, 0.05, 4)
    b = random_matrix(120, 70, 0.05, 5)
    cuts = [0, 40, 120]
    a_parts = [CscBlock.from_scipy(a[:, lo:hi]) for lo, hi in zip(cuts, cuts[1:])]
    b_parts = [CscBlock.from_scipy(b[lo:hi]) for lo, hi in zip(cuts, cuts[1:])]
    fused = _local.fused_multiply(a_parts, b_parts)
    staged = _local.merge([_local.local_multiply(x, y) for x, y in zip(a_parts, b_parts)])
    assert_same_product(fused.to_scipy(), a @ b)
    assert_same_product(staged.to_scipy(), a @ b)


def test_topk_keeps_largest_with_row_tiebreak():
    c = sp.csc_array(np.array([[3.0, 1.0], [5.0, 1.0], [5.0, 0.0], [1.0, 2.0]]))
    top = _local.topk(CscBlock.from_scipy(c), 2).to_scipy().toarray()
    np.testing.assert_array_equal(top, [[0, 1], [5, 0], [5, 0], [0, 2]])


def test_select_columns_and_empty_blocks():
    a = CscBlock.from_scipy(random_matrix(10, 8, 0.3, 6))
    sel = _local.select_columns(a, np.array([7, 0]))
    np.testing.assert_array_equal(sel.to_scipy().toarray(), a.to_scipy().toarray()[:, [7, 0]])
    empty = CscBlock.empty((10, 0))
    out = _local.local_multiply(a, CscBlock.empty((8, 0)))
    assert out.shape == (10, 0) and out.nnz == 0 and empty.nnz == 0
