"""The linear-time builds give what the sort-based ones gave, and label propagation the
partitions of its pin-count-table version (digests of those, pinned)."""

import hashlib

import numpy as np
import pytest
import scipy.sparse as sp

import daskhpc.hypergraph as hg
from daskhpc.arrays import unique_sorted


@pytest.mark.parametrize("seed, K, objective, digest, value", [
    (0, 8, "km1", "e3b90071885ca2d6", 890),
    (1, 16, "soed", "2d67806f98d55e09", 1584),
    (2, 70, "km1", "bf70ae100ea195d5", 2578),      # two words of bits a net
])
def test_lp_partitions_unchanged(seed, K, objective, digest, value):
    A = sp.random_array((300, 200), density=0.05, random_state=seed, format="csr")
    h = hg.column_net(A)
    parts = hg.partition(h, K, "lp", objective=objective, seed=seed).parts
    assert hashlib.sha1(parts.astype(np.int64).tobytes()).hexdigest()[:16] == digest
    assert hg.metrics(h, parts, K)[objective] == value


def test_connectivity_sets_match_sorted_keys():
    rng = np.random.default_rng(0)
    for _ in range(20):
        K, nv, M = int(rng.integers(1, 40)), int(rng.integers(1, 300)), int(rng.integers(0, 80))
        h = hg.Hypergraph.from_nets(nv, [rng.choice(nv, int(rng.integers(0, min(nv, 30) + 1)),
                                                    replace=False) for _ in range(M)])
        parts = rng.integers(0, K, nv)
        keys = unique_sorted(h.net_of_pin() * K + parts[h.pins])
        ptr, lam = hg.connectivity_sets(h, parts, K)
        assert np.array_equal(lam, keys % K) and lam.dtype == np.int64
        assert np.array_equal(ptr, np.concatenate([[0], np.cumsum(
            np.bincount(keys // K, minlength=M))]))


@pytest.mark.parametrize("shape", [(5, 4, 3), (50, 7, 2, 9), (1, 1, 1), (30, 40)])
def test_tensor_coarse_matches_pair_sort(shape):
    rng = np.random.default_rng(len(shape))
    coords = np.stack([rng.integers(0, s, 200) for s in shape])
    N = len(shape)
    offsets = np.concatenate([[0], np.cumsum(shape)])
    gid = coords + offsets[:N, None]
    own = np.arange(offsets[-1])
    ref = hg.Hypergraph.from_incidence(
        np.concatenate([gid[m] for m in range(N) for _ in range(N)] + [own]),
        np.concatenate([gid[mm] for _ in range(N) for mm in range(N)] + [own]),
        int(offsets[-1]), int(offsets[-1]))
    h = hg.tensor_coarse((coords, shape))
    assert np.array_equal(h.net_ptr, ref.net_ptr) and np.array_equal(h.pins, ref.pins)
