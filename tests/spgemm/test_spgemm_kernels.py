"""Local kernels (section IV-D) against scipy: symbolic, hash multiply, hash merge, sort."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from spgemm_helpers import assert_same_product, random_matrix

from daskhpc.spgemm import _local
from daskhpc.spgemm._block import CscBlock
from daskhpc.spgemm import _consumers
from daskhpc.spgemm._consumers import assemble


ACCUMULATORS = ["dense", "hash", "auto"]


@pytest.mark.parametrize("accumulator", ACCUMULATORS)
@pytest.mark.parametrize("shape", [(50, 40, 30), (1, 7, 1), (200, 3, 150), (64, 64, 64)])
@pytest.mark.parametrize("density", [0.02, 0.3])
def test_multiply_equals_scipy(shape, density, accumulator):
    m, k, n = shape
    a = random_matrix(m, k, density, 1)
    b = random_matrix(k, n, density, 2)
    ref = a @ b
    ab, bb = CscBlock.from_scipy(a), CscBlock.from_scipy(b)
    c = _local.local_multiply(ab, bb, accumulator=accumulator)
    assert not c.sorted
    assert c.idx.dtype == np.int32 and c.val.dtype == np.float64 and c.ptr.size == n + 1
    assert_same_product(c.to_scipy(), ref)
    counts, flops = _local.local_symbolic(ab, bb, accumulator=accumulator)
    pa, pb = (abs(a) > 0).astype(np.int64), (abs(b) > 0).astype(np.int64)
    np.testing.assert_array_equal(flops, np.asarray((pa @ pb).sum(axis=0)).ravel())
    np.testing.assert_array_equal(counts, np.diff(sp.csc_array(pa @ pb).indptr))  # structural
    np.testing.assert_array_equal(np.diff(c.ptr), counts)     # one pass, exact columns


def test_hash_symbolic_agrees_with_dense_marker():
    a = random_matrix(300, 300, 0.05, 3)
    blk = CscBlock.from_scipy(a)
    dense, _ = _local.local_symbolic(blk, blk, accumulator="dense")
    hashed, _ = _local.local_symbolic(blk, blk, accumulator="hash")
    np.testing.assert_array_equal(dense, hashed)


@pytest.mark.parametrize("accumulator", ["dense", "hash"])
def test_accumulators_agree_on_a_skewed_graph(accumulator):
    """Hub columns (power-law degrees) and cancelling values: both accumulators
    give scipy's pattern and values."""
    rng = np.random.default_rng(7)
    n = 400
    deg = np.minimum((rng.pareto(1.2, n) + 1).astype(int), n)
    rows = np.concatenate([rng.choice(n, d, replace=False) for d in deg])
    cols = np.repeat(np.arange(n), deg)
    vals = rng.choice([-1.0, 1.0, 2.0], rows.size)
    a = sp.csr_array((vals, (rows, cols)), shape=(n, n))
    c = _local.local_multiply(CscBlock.from_scipy(a), CscBlock.from_scipy(a),
                              accumulator=accumulator)
    assert_same_product(c.to_scipy(), a @ a)


def test_exact_count_path_when_the_bound_is_not_reserved(monkeypatch):
    a = random_matrix(120, 90, 0.08, 8)
    b = random_matrix(90, 100, 0.08, 9)
    monkeypatch.setattr(_local, "RESERVE_BYTES", 0)      # always count first
    for acc in ("dense", "hash"):
        c = _local.local_multiply(CscBlock.from_scipy(a), CscBlock.from_scipy(b),
                                  accumulator=acc)
        assert c.idx.base is None or c.idx.base.size == c.nnz   # exactly sized
        assert_same_product(c.to_scipy(), a @ b)
        p = random_matrix(120, 100, 0.05, 13)
        c = _local.fused_multiply([CscBlock.from_scipy(a)], [CscBlock.from_scipy(b)],
                                  add=[CscBlock.from_scipy(p)], accumulator=acc)
        assert_same_product(c.to_scipy(), a @ b + p)


def test_choose_accumulator_rule(monkeypatch):
    assert _local.choose_accumulator(36_692, 51_501_448) == "dense"       # email-Enron
    assert _local.choose_accumulator(_local.DENSE_ROWS + 1, 10**12) == "hash"   # tall
    assert _local.choose_accumulator(100_000, 1_000) == "hash"            # nearly empty
    monkeypatch.setattr(_local, "DENSE_ROWS", 0)
    blk = CscBlock.from_scipy(random_matrix(40, 40, 0.1, 10))
    assert_same_product(_local.local_multiply(blk, blk).to_scipy(),
                        blk.to_scipy() @ blk.to_scipy())
    with pytest.raises(ValueError, match="accumulator"):
        _local.local_multiply(blk, blk, accumulator="heap")


@pytest.mark.parametrize("accumulator", ACCUMULATORS)
def test_merge_sums_unsorted_blocks_and_sorts_on_request(accumulator):
    parts = [random_matrix(80, 60, 0.1, s) for s in range(3)]
    blocks = [_local.local_multiply(CscBlock.from_scipy(p), CscBlock.from_scipy(sp.eye(60)))
              for p in parts]
    merged = _local.merge(blocks, accumulator=accumulator)
    assert_same_product(merged.to_scipy(), parts[0] + parts[1] + parts[2])
    srt = _local.merge(blocks, sort=True, accumulator=accumulator)
    assert srt.sorted
    for j in range(srt.shape[1]):
        col = srt.idx[srt.ptr[j]:srt.ptr[j + 1]]
        assert np.all(np.diff(col) > 0)


@pytest.mark.parametrize("accumulator", ["dense", "hash"])
def test_fused_multiply_equals_staged(accumulator):
    a = random_matrix(90, 120, 0.05, 4)
    b = random_matrix(120, 70, 0.05, 5)
    cuts = [0, 40, 120]
    a_parts = [CscBlock.from_scipy(a[:, lo:hi]) for lo, hi in zip(cuts, cuts[1:])]
    b_parts = [CscBlock.from_scipy(b[lo:hi]) for lo, hi in zip(cuts, cuts[1:])]
    fused = _local.fused_multiply(a_parts, b_parts, accumulator=accumulator)
    staged = _local.merge([_local.local_multiply(x, y, accumulator=accumulator)
                           for x, y in zip(a_parts, b_parts)], accumulator=accumulator)
    assert_same_product(fused.to_scipy(), a @ b)
    assert_same_product(staged.to_scipy(), a @ b)
    # Merge-Fiber fused in: pieces from other layers added into the same accumulator
    pieces = [random_matrix(90, 70, 0.05, 20 + s) for s in range(2)]
    plus = _local.fused_multiply(a_parts, b_parts, add=[CscBlock.from_scipy(p) for p in pieces],
                                 accumulator=accumulator, sort=True)
    assert plus.sorted
    assert_same_product(plus.to_scipy(), a @ b + pieces[0] + pieces[1])
    with pytest.raises(ValueError, match="blocks to add"):
        _local.fused_multiply(a_parts, b_parts, add=[CscBlock.from_scipy(pieces[0].T)])


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


@pytest.mark.parametrize("chunk", [1 << 18, 5])
def test_assemble_maps_ids_drops_zeros_and_sums_duplicates(chunk, monkeypatch):
    monkeypatch.setattr(_consumers, "ASSEMBLE_CHUNK", chunk)     # one chunk, many chunks
    rng = np.random.default_rng(3)
    c = sp.csc_array(random_matrix(50, 40, 0.2, 12))
    c.data[::7] = 0.0                                   # cancelled entries
    pr, pc = rng.permutation(50), rng.permutation(40)
    cp = c[pr][:, pc]
    kept = [(CscBlock.from_scipy(cp[r0:r1][:, c0:c1]), pr[r0:r1], pc[c0:c1])
            for r0, r1 in ((0, 20), (20, 50)) for c0, c1 in ((0, 15), (15, 40))]
    ref = sp.csr_array(c)
    ref.eliminate_zeros()
    out = assemble(kept, c.shape)
    assert out.has_canonical_format and out.indices.dtype == np.int32
    assert_same_product(out, ref)
    np.testing.assert_array_equal(out.indices, ref.indices)     # sorted, no zeros
    doubled = assemble(kept + kept[:1], c.shape)                # one block twice
    extra = assemble(kept[:1], c.shape)
    assert_same_product(doubled, ref + extra)
    assert assemble([], c.shape).nnz == 0


def test_localize_keeps_every_block_set_and_sorts_inside():
    from daskhpc.spgemm._data import localize

    perm = np.random.default_rng(4).permutation(1000)
    bounds = [0, 250, 251, 600, 1000]
    out = localize(perm, bounds)
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        assert set(out[lo:hi]) == set(perm[lo:hi])      # same blocks: same balance
        assert np.all(np.diff(out[lo:hi]) > 0)          # original order inside
