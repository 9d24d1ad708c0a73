"""Bad input gets one line naming the problem (InputError), never NaN or a traceback."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import sparse

from daskhpc.cpals import as_tensor, plan, prepare, serial_fit
from daskhpc.errors import InputError

GOOD = ([[0, 1, 2], [1, 2, 0], [2, 0, 1]], [1.0, 2.0, 3.0], (3, 3, 3))


def one_line(excinfo) -> str:
    msg = str(excinfo.value)
    assert "\n" not in msg
    return msg


@pytest.mark.parametrize("rank", [0, -3])
def test_rank_must_be_positive(rank):
    with pytest.raises(InputError) as e:
        serial_fit(GOOD, rank)
    assert "--rank" in one_line(e)
    with pytest.raises(InputError):
        prepare(GOOD, 2, rank=rank)


def test_a_matrix_is_not_a_tensor(tmp_path):
    with pytest.raises(InputError) as e:
        as_tensor(sp.random_array((5, 4), density=0.5, random_state=0, format="csr"))
    assert "matrix" in one_line(e)
    with pytest.raises(InputError) as e:
        as_tensor(([[0, 1], [1, 0]], [1.0, 1.0], (2, 2)))
    assert "order 3 or more" in one_line(e)
    f = tmp_path / "m.mtx"
    f.write_text("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 1.0\n")
    with pytest.raises(InputError) as e:
        plan(str(f), 1)
    assert str(f) in one_line(e) and "tensor" in one_line(e)


def test_all_zero_and_empty_tensors():
    with pytest.raises(InputError) as e:
        as_tensor(([[0, 1], [1, 0], [0, 0]], [0.0, 0.0], (2, 2, 2)))
    assert "all zeros" in one_line(e)
    with pytest.raises(InputError) as e:
        as_tensor((np.zeros((3, 0), int), [], (2, 2, 2)))
    assert "no nonzeros" in one_line(e)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_values(bad):
    with pytest.raises(InputError) as e:
        as_tensor(([[0, 1], [1, 0], [0, 1]], [1.0, bad], (2, 2, 2)))
    assert "(1, 0, 1)" in one_line(e) and "finite" in one_line(e)


def test_non_finite_value_in_a_file_names_the_line(tmp_path):
    f = tmp_path / "x.tns"
    f.write_text("1 1 1 1.0\n2 2 2 nan\n")
    with pytest.raises(InputError) as e:
        serial_fit(str(f), 2)
    assert one_line(e).startswith(f"{f}:2:")


def test_more_parts_than_nonzeros():
    with pytest.raises(InputError) as e:
        prepare(GOOD, 4)
    assert "--parts 4" in one_line(e) and "3 nonzeros" in one_line(e)
    with pytest.raises(InputError):
        prepare(GOOD, 0)


def test_a_mode_with_a_single_slice():
    with pytest.raises(InputError) as e:
        as_tensor(([[0, 1], [0, 0], [1, 0]], [1.0, 2.0], (2, 1, 2)))
    assert "mode 2 has a single slice" in one_line(e)


def test_indices_outside_the_shape():
    with pytest.raises(InputError) as e:
        as_tensor(([[0, 3], [0, 0], [1, 0]], [1.0, 2.0], (3, 2, 2)))
    assert "index 3 in mode 1" in one_line(e)
    with pytest.raises(InputError):
        as_tensor(([[0, -1], [0, 0], [1, 0]], [1.0, 2.0], (3, 2, 2)))


@pytest.mark.parametrize("opts, flag", [({"grain": "medium"}, "--grain"),
                                        ({"partition": "block"}, "--partition"),
                                        ({"grain": "coarse", "partition": "random"}, "--partition"),
                                        ({"iters": 0}, "--iters"), ({"tol": -1.0}, "--tol"),
                                        ({"tol": float("nan")}, "--tol"),
                                        ({"epsilon": -0.1}, "--epsilon"), ({"seed": -1}, "--seed")])
def test_bad_options(opts, flag):
    with pytest.raises(InputError) as e:
        prepare(GOOD, 2, **opts)
    assert flag in one_line(e)


def test_block_on_the_fine_grain_suggests_the_coarse_grain():
    with pytest.raises(InputError) as e:
        prepare(GOOD, 2, grain="fine", partition="block")
    assert "--grain coarse" in one_line(e)


def test_inputs_accepted_and_canonical():
    """COO, dense, triplets and files give the same canonical tensor; duplicates sum."""
    c = np.array([[2, 0, 1, 0], [0, 1, 1, 1], [1, 1, 0, 1]])
    v = np.array([1.0, 2.0, 3.0, 4.0])           # (0, 1, 1) twice
    t = as_tensor((c, v, (3, 2, 2)))
    assert t.coords.tolist() == [[0, 1, 2], [1, 1, 0], [1, 0, 1]]
    assert t.vals.tolist() == [6.0, 3.0, 1.0]
    coo = sparse.COO(c, v, shape=(3, 2, 2))
    for other in (as_tensor(coo), as_tensor(coo.todense())):
        assert np.array_equal(other.coords, t.coords) and np.array_equal(other.vals, t.vals)


@pytest.mark.parametrize("opts", [{"rank": "4"}, {"rank": 2.5}, {"iters": True},
                                  {"seed": 1.5}, {"tol": "small"}])
def test_option_types(opts):
    with pytest.raises(InputError):
        prepare(GOOD, 2, **opts)
    with pytest.raises(InputError):
        prepare(GOOD, 2.0)
