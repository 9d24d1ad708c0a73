"""Helpers shared by the spgemm tests (imported by name: the test folder is on sys.path)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def random_matrix(m, n, density, seed):
    """A random sparse matrix with integer-valued entries (exact sums) and some negatives."""
    rng = np.random.default_rng(seed)
    a = sp.random_array((m, n), density=density, rng=rng, format="csr")
    a.data = np.round(a.data * 8) - 3.0
    a.data[a.data == 0] = 1.0
    return a


def assert_same_product(c, ref):
    """Same pattern; values within 1e-12 relative.

    scipy drops entries whose sum cancels to exactly 0; the hash kernels keep the
    structural entry with value 0.0 (like CombBLAS), so zeros are dropped from
    both sides before the patterns are compared.
    """
    c = sp.csr_array(c)
    ref = sp.csr_array(ref)
    c.sum_duplicates()
    ref.sum_duplicates()
    c.eliminate_zeros()
    ref.eliminate_zeros()
    assert c.shape == ref.shape
    assert c.nnz == ref.nnz
    np.testing.assert_array_equal(c.indptr, ref.indptr)
    np.testing.assert_array_equal(c.indices, ref.indices)
    scale = np.maximum(abs(ref.data), 1.0)
    assert np.all(abs(c.data - ref.data) <= 1e-12 * scale)
