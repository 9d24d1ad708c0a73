"""What CP-ALS holds of a tensor, counted at a small size: int32 indices and float32
values (when exact) from the reader to the parts, results unchanged by the storage, and
the client's peaks (tracemalloc) near the tensor's raw 16 bytes a nonzero."""

from __future__ import annotations

import numpy as np
import pytest

from daskhpc.cpals import as_tensor, prepare
from daskhpc.cpals._assign import part_counts, random_parts
from daskhpc.cpals._kernels import mttkrp
from daskhpc.cpals._parts import iter_statics, statics
from daskhpc.testing import traced

SHAPE = (300, 200, 40)


def tns(tmp_path, n=100_000, seed=0, vals=None, name="t.tns"):
    """A .tns file of about ``n`` nonzeros, sorted and unique (as FROSTT's are)."""
    rng = np.random.default_rng(seed)
    keys = np.unique(rng.integers(0, np.prod(SHAPE), n))
    coords = np.column_stack(np.unravel_index(keys, SHAPE))
    v = rng.integers(1, 6, keys.size).astype(float) if vals is None else vals
    path = tmp_path / name
    np.savetxt(path, np.column_stack([coords + 1, v]), fmt="%d %d %d %.17g")
    return path


def peak_of(fn):
    with traced() as t:
        out = fn()
    return out, t.peak


def test_tensor_dtypes(tmp_path):
    X = as_tensor(tns(tmp_path, 2000))
    assert X.coords.dtype == np.int32 and X.vals.dtype == np.float32
    Y = as_tensor((X.coords.astype(np.int64), X.vals.astype(np.float64), X.shape))
    assert Y.coords.dtype == np.int32 and Y.vals.dtype == np.float32
    assert as_tensor(([[0, 1]] * 3, [0.1, 1.0], (2, 2, 2))).vals.dtype == np.float64


def test_duplicates_summed_in_float64():
    # 2**24 + 1 is no float32 number: a float32 sum would drop the 1
    X = as_tensor((np.array([[1, 0, 1]] * 3), np.array([2.0**24, 5.0, 1.0], np.float32),
                   (2, 2, 2)))
    assert X.vals.dtype == np.float64 and X.vals.tolist() == [5.0, 2.0**24 + 1]
    assert X.norm2() == 25.0 + (2.0**24 + 1) ** 2


def test_mttkrp_float32_values_bit_for_bit():
    rng = np.random.default_rng(1)
    coords = rng.integers(0, SHAPE, size=(5000, 3)).T
    vals = rng.integers(1, 6, 5000).astype(np.float32)
    U = [rng.random((n, 4)) for n in SHAPE]
    for n in range(3):
        a = mttkrp(coords.astype(np.int32), vals, U, n)
        b = mttkrp(coords.astype(np.int64), vals.astype(np.float64), U, n)
        assert np.array_equal(a, b)


@pytest.mark.parametrize("grain, partition", [("fine", "random"), ("coarse", "block")])
def test_statics_narrow_and_one_at_a_time(tmp_path, grain, partition):
    s = prepare(tns(tmp_path, 3000), 3, grain=grain, partition=partition, rank=2)
    if grain == "fine":
        assert s.dist.nnz_parts.dtype == np.int16
    whole = statics(s)
    assert all(st.coords.dtype == np.int32 and st.vals.dtype == np.float32 for st in whole)
    (p, one), = iter_statics(s, [1])
    assert p == 1 and np.array_equal(one.coords, whole[1].coords)
    assert all(np.array_equal(a, b) for a, b in zip(one.rows, whole[1].rows))
    assert one.exp_recv[0].keys() == whole[1].exp_recv[0].keys()


def test_random_parts_as_before():
    """The int32 shuffle and the dealing in blocks give the int64 permutation's parts."""
    n, K = 100_003, 7
    perm = np.random.default_rng([3, 0xC9A15, 2]).permutation(n)
    old = np.empty(n, np.int64)
    old[perm] = np.arange(n) % K
    new = random_parts(n, K, 3, 2, np.int16)
    assert new.dtype == np.int16 and np.array_equal(new, old)
    assert np.array_equal(part_counts(new, K), np.bincount(old, minlength=K))


def test_client_peaks_near_the_raw_size(tmp_path, monkeypatch):
    """Reading (16 bytes a nonzero kept) and a random partition with its plans (2 bytes
    a nonzero kept) hold far less than the int64/float64 copies did (32 bytes a nonzero
    for the tensor alone, 24 more for the random partition)."""
    from daskhpc.cpals import _assign
    from daskhpc.io import _tns

    monkeypatch.setattr(_tns, "BLOCK", 1 << 16)         # a block's temporaries: small here
    monkeypatch.setattr(_assign, "BLOCK", 1 << 12)
    path = tns(tmp_path, 200_000)
    small = prepare(tns(tmp_path, 500, name="small.tns"), 2, partition="random")
    list(iter_statics(small))                            # the kernels loaded
    X, peak = peak_of(lambda: as_tensor(path))
    raw = 16 * X.nnz
    assert X.coords.nbytes + X.vals.nbytes == raw
    assert peak < 2.5 * raw           # the tensor and one block of the text's parse
    s, peak = peak_of(lambda: prepare(X, 2, grain="fine", partition="random", rank=4))
    assert peak < 0.5 * raw           # the part ids (2 B) and the shuffle's int32
    # the parts made one at a time: at most one part's data besides the tensor
    def send_each():
        for _, st in iter_statics(s):
            del st                    # sent away (fit scatters it to its worker)
    _, peak = peak_of(send_each)
    assert peak < 0.8 * raw           # a half's indices (6 B), values (2 B), positions (4 B)


def test_part_drops_its_nonzeros_once_sliced(tmp_path):
    """A part's coords and values go once its per-mode slices hold them; another attempt
    on the same statics (a restart on that worker) starts from the slices: same bits."""
    from daskhpc.comm import run_local
    from daskhpc.cpals import _program as P

    s = prepare(tns(tmp_path, 3000), 2, grain="coarse", partition="block", rank=3,
                iters=3, tol=0)
    st = statics(s)
    a, _ = run_local(P.program(s), st)
    assert all(p.coords is None and p.vals is None for p in st)
    b, _ = run_local(P.program(s), st)
    c, _ = run_local(P.program(s), statics(s))
    for x, y in ((a, b), (a, c)):
        (lx, fx), (ly, fy) = P.assemble(s, x), P.assemble(s, y)
        assert np.array_equal(lx, ly) and all(np.array_equal(u, v) for u, v in zip(fx, fy))
