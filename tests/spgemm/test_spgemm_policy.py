"""The batch-admission policy is a plain object: tested without a cluster."""

from __future__ import annotations

import pytest

from daskhpc.spgemm import BatchPolicy


def test_window_one_admits_next_only_after_consumed():
    pol = BatchPolicy(3, window=1, now=0.0)
    assert pol.admitted() == [0]
    pol.started(0, 1.0)
    pol.finished(0, 2.0)
    assert pol.admitted() == [0]          # finished is not enough: consumed is
    assert pol.consumed(0, 3.0) == [1]
    assert pol.consumed(1, 4.0) == [2]
    assert pol.consumed(2, 5.0) == []
    assert pol.done() and pol.check() == []


def test_window_two_and_violation_detection():
    pol = BatchPolicy(4, window=2, now=0.0)
    assert pol.admitted() == [0, 1]
    assert pol.consumed(1, 1.0) == [3]
    pol.started(3, 1.5)
    assert pol.check() == []
    pol.started(2, 0.5)                    # batch 2 started before batch 0 was consumed
    assert any("batch 2" in v for v in pol.check())


def test_bad_arguments():
    with pytest.raises(ValueError):
        BatchPolicy(0)
    with pytest.raises(ValueError):
        BatchPolicy(3, window=0)
