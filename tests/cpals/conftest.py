"""Fixtures for the CP-ALS tests: the real tensors, and setups cached per session
(hypergraph partitions of ml-latest-small take seconds; every test that needs one
shares it)."""

from __future__ import annotations

import pytest

from daskhpc.cpals import as_tensor, prepare

TENSORS = {"nations": "nations_head_rel_tail.tns", "umls": "umls_head_rel_tail.tns",
           "mlsmall": "mlsmall_user_movie_year.tns"}

_tensors: dict = {}
_setups: dict = {}


@pytest.fixture(scope="session")
def tensor(shared_data):
    """``tensor(name)``: nations, umls or mlsmall as a validated Tensor."""
    def get(name):
        if name not in _tensors:
            _tensors[name] = as_tensor(shared_data / "tensors" / TENSORS[name])
        return _tensors[name]
    return get


@pytest.fixture(scope="session")
def setup_of(tensor):
    """``setup_of(name, K, grain, partition, rank=10)``: a prepared run, cached."""
    def get(name, K, grain, partition, rank=10, **options):
        key = (name, K, grain, partition, rank, tuple(sorted(options.items())))
        if key not in _setups:
            _setups[key] = prepare(tensor(name), K, grain=grain, partition=partition,
                                   rank=rank, **options)
        return _setups[key]
    return get
