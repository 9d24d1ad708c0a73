"""Shared inputs of the GCN tests: the real graphs, read once per session."""

from __future__ import annotations

import functools

import pytest

from daskhpc.gcn._data import as_graph


@functools.lru_cache(maxsize=None)
def graph_named(name: str, root: str):
    """The checked Graph of a data set (Cora bundled; the others from ../shared/data)."""
    paths = {"cora": "cora", "pubmed": f"{root}/graphs/pubmed.npz",
             "slashdot": f"{root}/graphs/soc-Slashdot0902.txt.gz",
             "facebook": f"{root}/graphs/facebook_page_page",
             "enron": f"{root}/graphs/email-Enron.txt.gz"}
    return as_graph(paths[name])


@pytest.fixture(scope="session")
def graphs(shared_data):
    return lambda name: graph_named(name, str(shared_data))
