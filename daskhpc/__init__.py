"""daskhpc: communication-bound sparse HPC algorithms on Dask.

Layers (data flows top to bottom, never back up)::

    io          files -> scipy.sparse / sparse.COO / numpy
    hypergraph  models and partitioners -> Hypergraph, Partition      (no dask)
    comm        message plans and their cost -> Plan                  (no dask)
    runtime     cluster, placement, pinned graphs, transfer ledger    (dask)
    workflows   ssgd, spgemm, cpals, gcn, allreduce, linear (entry points, see _workflows)

Sub-packages are imported lazily so that ``import daskhpc.hypergraph`` does not
pull in dask: a Plan for 1024 parts is computed on a laptop without a cluster.

Examples
--------
>>> import daskhpc as dh
>>> h = dh.hypergraph.column_net(dh.datasets.ratings().matrix)   # doctest: +SKIP
>>> dh.hypergraph.partition(h, 4).metrics()                        # doctest: +SKIP
"""

from __future__ import annotations

import importlib

from daskhpc._version import __version__

_SUBMODULES = ("io", "datasets", "hypergraph", "comm", "runtime", "dashboard", "report",
               "errors", "cli", "testing")
_RUNTIME_NAMES = ("connect", "Placement", "TransferLedger")

__all__ = ["__version__", "load", *_SUBMODULES, *_RUNTIME_NAMES]


def load(directory, workflow: str | None = None):
    """The result saved in ``directory`` (by ``--save DIR`` or ``result.save(DIR)``): the
    workflow's result class, with its model, history and report (no dask needed).

    Examples
    --------
    >>> import daskhpc as dh
    >>> res = dh.load("cp-model")                       # doctest: +SKIP
    >>> res.factors[0].shape, res.fit[-1]               # doctest: +SKIP
    """
    from daskhpc._saved import load as load_

    return load_(directory, workflow)


def _workflow_packages() -> list[str]:
    # every registered workflow is reachable as dh.<name> (dh.ssgd, dh.cpals, ...)
    from daskhpc._workflows import available

    return sorted({v.split(".")[1] for v in available().values() if v.startswith("daskhpc.")})


def __getattr__(name: str):
    if name in _SUBMODULES or (not name.startswith("_") and name in _workflow_packages()):
        return importlib.import_module(f"daskhpc.{name}")
    if name in _RUNTIME_NAMES:
        return getattr(importlib.import_module("daskhpc.runtime"), name)
    raise AttributeError(f"module 'daskhpc' has no attribute {name!r}")


def __dir__():
    return sorted({*__all__, *_workflow_packages()})
