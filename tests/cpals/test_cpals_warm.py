"""Warm start: ``init=`` a saved cpals model (its directory, or the result) continues
training: 5 iterations, saved, then 5 more, is the 10-iteration run (to rounding: the
weights are folded into the first factor), and a directory of another workflow is
refused with one line naming its manifest."""

from __future__ import annotations

import pytest

from daskhpc import cpals, datasets, ssgd
from daskhpc.errors import InputError


@pytest.fixture(scope="module")
def five(tmp_path_factory):
    d = tmp_path_factory.mktemp("cp5")
    r = cpals.serial_fit(datasets.path("tensor"), 4, iters=5, tol=0)
    r.save(d)
    return r, d


@pytest.mark.parametrize("how", ["directory", "result"])
def test_five_more_iterations_from_the_saved_five_are_the_ten(five, how):
    r, d = five
    warm = cpals.serial_fit(datasets.path("tensor"), 4, iters=5, tol=0,
                            init=d if how == "directory" else r)
    ten = cpals.serial_fit(datasets.path("tensor"), 4, iters=10, tol=0)
    assert warm.fit[-1] == pytest.approx(ten.fit[-1], rel=1e-9)
    assert warm.fit[0] > r.fit[0]                      # it did not start from scratch


def test_a_saved_model_of_another_workflow_is_refused(tmp_path):
    ssgd.serial_fit(datasets.path("ratings"), 1, epochs=1).save(tmp_path)
    with pytest.raises(InputError, match=r"manifest.json: a ssgd result, not cpals"):
        cpals.serial_fit(datasets.path("tensor"), 4, iters=1, init=str(tmp_path))
