"""Every algorithm sums correctly over P x N x density.

Integers: bitwise equal to the dense sum. float64: within (P - 1) u sum_i |v_i| of
math.fsum per element. All ranks hold the same bits; a rerun gives the same bits.
N = 2^20 runs only a few combinations by default (the rest are marked slow).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from allreduce_reference import DENSITIES, PARTS, vectors

import daskhpc.allreduce as ar

ALGOS = sorted(ar.ALGORITHMS)
U = 2.0 ** -53


def _check(P, N, density, seed):
    ints = vectors(N, P, density, seed, integer=True)
    flts = vectors(N, P, density, seed + 1, integer=False)
    want_int = np.sum(ints, axis=0)
    stack = np.stack(flts)
    support = np.flatnonzero(np.any(stack != 0, axis=0))
    exact = np.array([math.fsum(stack[:, j]) for j in support])
    bound = (P - 1) * U * np.abs(stack[:, support]).sum(axis=0)
    for name in ALGOS:
        r = ar.allreduce_local(ints, algorithm=name)
        first = r.streams[0]
        for s in r.streams:                           # every rank: the same bits
            assert s.dense == first.dense
            assert np.array_equal(s.val, first.val)
            assert s.dense or np.array_equal(s.idx, first.idx)
        assert np.array_equal(r.total, want_int), name
        assert r.total.dtype == np.int64
        f1 = ar.allreduce_local(flts, algorithm=name)
        f2 = ar.allreduce_local(flts, algorithm=name)          # rerun: identical bits
        assert all(np.array_equal(a.to_dense().view(np.int64), b.to_dense().view(np.int64))
                   for a, b in zip(f1.streams, f2.streams)), name
        got = f1.total
        assert np.all(np.abs(got[support] - exact) <= bound), name
        off = np.ones(N, bool)
        off[support] = False
        assert np.all(got[off] == 0), name
        assert f1.report()["quality"]["ranks_identical"]


@pytest.mark.parametrize("P", PARTS)
@pytest.mark.parametrize("N", [1, "P-1", 1000])
@pytest.mark.parametrize("density", DENSITIES)
def test_sum_small(P, N, density):
    N = P - 1 if N == "P-1" else N
    _check(P, N, density, seed=100 * P + int(1000 * density))


@pytest.mark.parametrize("P,density", [(4, 1e-3), (5, 1e-2)])
def test_sum_2_20_default(P, density):
    _check(P, 2 ** 20, density, seed=7)


@pytest.mark.slow
@pytest.mark.parametrize("P", PARTS)
@pytest.mark.parametrize("density", DENSITIES)
def test_sum_2_20(P, density):
    _check(P, 2 ** 20, density, seed=8)


def test_check_serial_reports_the_bound():
    vecs = vectors(5000, 5, 0.01, seed=3, integer=False)
    r = ar.allreduce_local(vecs, algorithm="ssar_split_allgather", check_serial=True)
    c = r.report()["serial_check"]
    assert c["done"] and c["within_bound"]
    ri = ar.allreduce_local(vectors(5000, 5, 0.01, seed=3, integer=True),
                            algorithm="dsar_early_switch", check_serial=True)
    assert ri.report()["serial_check"]["identical"]


def test_inputs_in_every_form_give_the_same_total():
    N = 50
    dense = vectors(N, 3, 0.2, seed=4, integer=True)
    pairs = [(np.flatnonzero(v), v[np.flatnonzero(v)]) for v in dense]
    import scipy.sparse as sp
    mats = [sp.csr_array(v.reshape(1, -1)) for v in dense]
    want = ar.serial_allreduce(dense)
    for form, kw in ((dense, {}), (pairs, {"N": N}), (mats, {}), (np.stack(dense), {})):
        assert np.array_equal(ar.allreduce_local(form, "ssar_rec_dbl", **kw).total, want)
