"""What the client holds while it sets a product up: counts of bytes, not times."""

import numpy as np
import scipy.sparse as sp

from daskhpc.io import _mtx, read_matrix_market
from daskhpc.spgemm import _symbolic
from daskhpc.spgemm._setup import prepare
from daskhpc.testing import traced

from spgemm_helpers import random_matrix


def _nbytes(m) -> int:
    return m.data.nbytes + m.indices.nbytes + m.indptr.nbytes


def _peak(f):
    with traced() as t:
        out = f()
    return out, t.peak


def _warm(s):
    s.block("A", (0, 0, 0))        # the kernels compiled outside the traced calls
    s.symbolic(1)


def test_a_squared_holds_a_once_and_no_permuted_copy_or_blocks():
    a = random_matrix(2000, 2000, 0.05, 1)
    _warm(prepare(a, grid="2x2x1", nworkers=2, batches=1))
    s, peak = _peak(lambda: prepare(a, grid="2x2x1", nworkers=2, memory_per_worker="1GB"))
    assert s.b is s.a and a.indices.dtype == s.a.indices.dtype == np.int32
    assert np.shares_memory(s.a.data, a.data)            # the caller's float64 CSR itself
    # the permutations, their maps and the cells' counts (a few ids each): a permuted
    # copy (or the blocks) was 1x A each, and B a second A
    assert peak < 0.2 * _nbytes(a), (peak, _nbytes(a))
    assert s.nnz_a == max(b.nnz for b in s.blocks("A").values())


def test_a_block_is_cut_without_a_copy_of_its_rows():
    a = random_matrix(8000, 8000, 0.02, 2)
    s = prepare(a, grid="2x2x1", nworkers=2, batches=1)
    _warm(s)
    for name in ("A", "B"):
        blk, peak = _peak(lambda: s.block(name, (1, 0, 0)))
        # the block's own arrays (3.9 MB): the row block's copy, its CSC and the column
        # slice came before it (about 3x); measured 1.01x
        assert peak < 1.3 * blk.nbytes, (name, peak, blk.nbytes)


def test_the_plan_reads_the_operands_through_the_permutations():
    a = random_matrix(1500, 1500, 0.08, 3)
    mask = random_matrix(1500, 1500, 0.04, 4)
    s = prepare(a, grid="2x2x2", nworkers=8, batches=2, mask=mask)
    _warm(s)
    sym, peak = _peak(lambda: s.symbolic(2))
    # maps and marks of the ids (m + kk + n, a set per thread), no permuted copy of A, B
    # or the mask (2x A and more) and no temporary of a nonzero each
    assert peak < 0.4 * _nbytes(a), (peak, _nbytes(a))
    ap, bp = a[s.pr][:, s.pk], a[s.pk][:, s.pc]
    mp = sp.csr_array(mask)[s.pr][:, s.pc]
    want = _symbolic.grid_symbolic(ap, bp, s.grid, 2, mp)
    for k in ("unmerged", "layer", "final", "flops_cell", "nnz_a", "nnz_b", "nnz_b_batch"):
        np.testing.assert_array_equal(getattr(sym, k), getattr(want, k))


def test_a_matrix_market_file_is_read_in_blocks_into_its_csr(monkeypatch, tmp_path):
    rng = np.random.default_rng(0)
    n, nnz = 2000, 600_000
    rows = np.sort(rng.integers(0, n, nnz))
    cols, vals = rng.integers(0, n, nnz), rng.random(nnz)
    path = tmp_path / "a.mtx"
    with open(path, "w") as f:
        f.write(f"%%MatrixMarket matrix coordinate real general\n{n} {n} {nnz}\n")
        f.writelines(f"{r + 1} {c + 1} {v:.8g}\n" for r, c, v in zip(rows, cols, vals))
    monkeypatch.setattr(_mtx, "BLOCK", 1 << 16)
    small = tmp_path / "small.mtx"      # kernels and first-call caches outside the count
    small.write_text("%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1.5\n2 1 2\n")
    read_matrix_market(small)
    got, peak = _peak(lambda: read_matrix_market(path).matrix)
    want = sp.csr_array((np.array([float(f"{v:.8g}") for v in vals]), (rows, cols)),
                        shape=(n, n))
    want.sum_duplicates()
    assert got.indices.dtype == np.int32
    assert np.array_equal(got.indptr, want.indptr) and \
        np.array_equal(got.indices, want.indices) and np.array_equal(got.data, want.data)
    # the CSR's columns and values themselves and a block's text and numbers; the whole
    # text, its line index and a table of floats were about 9x the CSR
    assert peak < 1.3 * _nbytes(got) + 10 * (1 << 16), (peak, _nbytes(got))


def test_a_collections_pattern_holds_its_indices_only():
    from types import SimpleNamespace

    from daskhpc.spgemm._collect import pattern

    rng = np.random.default_rng(5)
    pins = rng.integers(0, 400, (2, 200_000)).astype(np.int32)
    few = pins[:, :100].copy()          # imports and first-call caches outside the count
    pattern(SimpleNamespace(pins=few, nnz=100, name="A"), (400, 400))
    m, peak = _peak(lambda: pattern(SimpleNamespace(pins=pins, nnz=pins.shape[1], name="A"),
                                    (400, 400)))
    want = sp.csr_array((np.ones(pins.shape[1]), (pins[0], pins[1])), shape=(400, 400))
    want.sum_duplicates()
    assert np.array_equal(m.indptr, want.indptr) and np.array_equal(m.indices, want.indices)
    assert (m.data == 1.0).all() and m.data.strides == (0,) and m.has_canonical_format
    # its int32 indices and int8 values while the COO became CSR (about 7 bytes a
    # nonzero); float64 ones and their CSR copy were 20
    assert peak < 8 * pins.shape[1] + 8 * 401, peak
