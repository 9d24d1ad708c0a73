"""unique_sorted: the sort-based replacement of np.unique gives np.unique's arrays."""

import numpy as np
import pytest

from daskhpc.arrays import unique_sorted


@pytest.mark.parametrize("case", ["random", "few", "empty", "one", "negative", "int32", "2d"])
def test_unique_sorted_matches_numpy(case):
    rng = np.random.default_rng(7)
    a = {"random": rng.integers(0, 10**12, 50_000),
         "few": rng.integers(0, 5, 10_000),
         "empty": np.zeros(0, np.int64),
         "one": np.array([42]),
         "negative": rng.integers(-50, 50, 1000),
         "int32": rng.integers(0, 300, 2000).astype(np.int32),
         "2d": rng.integers(0, 30, (40, 25))}[case]
    assert np.array_equal(unique_sorted(a), np.unique(a))
    assert unique_sorted(a).dtype == np.unique(a).dtype
    for inv, cnt in [(True, False), (False, True), (True, True)]:
        got = unique_sorted(a, return_inverse=inv, return_counts=cnt)
        want = np.unique(a.ravel(), return_inverse=inv, return_counts=cnt)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert np.array_equal(g, w) and g.dtype == w.dtype


def test_unique_sorted_inverse_rebuilds_input():
    a = np.random.default_rng(1).integers(0, 100, 5000)
    u, inv = unique_sorted(a, return_inverse=True)
    assert np.array_equal(u[inv], a)
