"""Task graphs whose every task is pinned on one worker.

We build low-level graphs ourselves (one task per part and phase) and give each
key a hard worker restriction. The graph is submitted with ``client.get``, which
does not run dask's low-level optimiser: fusion would otherwise merge tasks
of different workers and drop or intersect their restrictions.

.. warning::
   Per-key restrictions travel as *callable* layer annotations: the scheduler
   calls ``annotation(key)`` for every key of the layer (``HLGExpr.
   __dask_annotations__`` in dask 2026.8). A plain ``{key: value}`` dict is
   handed whole to every key and makes ``update_graph`` fail with
   "unhashable type: 'dict'". We pass bound ``dict.__getitem__`` methods, which
   pickle without importing daskhpc on the scheduler.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from dask.highlevelgraph import HighLevelGraph, MaterializedLayer

if TYPE_CHECKING:
    from distributed import Client, Future

__all__ = ["pinned_graph", "submit_pinned"]

LAYER_NAME = "daskhpc-pinned"


def pinned_graph(tasks: Mapping[Any, Any], workers: Mapping[Any, str]) -> HighLevelGraph:
    """Wrap tasks in a graph that pins each key on its worker.

    Parameters
    ----------
    tasks : mapping
        ``{key: task}``. A task is an old-style tuple ``(func, arg, ...)`` whose
        arguments may be other keys of the graph or Futures (pass the Future
        itself: a bare string naming data the client already holds is *not*
        resolved, the task receives the string); a ``dask._task_spec.Task``
        (with ``TaskRef`` arguments) or a ``DataNode`` also work, as does any
        literal value. Keys are str or tuples like ``("spmv", 3)``.
    workers : mapping
        ``{key: address}`` for every key of ``tasks`` (a list of addresses is
        accepted too and means "any of these").

    Returns
    -------
    HighLevelGraph
        One ``MaterializedLayer`` named ``"daskhpc-pinned"`` with the
        annotations ``workers`` and ``allow_other_workers=False`` on every key.

    Examples
    --------
    >>> from operator import add
    >>> hlg = pinned_graph({"x": (add, 1, 2), "y": (add, "x", 1)},
    ...                    {"x": "tcp://a:1", "y": "tcp://b:1"})
    >>> layer = hlg.layers["daskhpc-pinned"]
    >>> layer.annotations["workers"]("y"), layer.annotations["allow_other_workers"]("y")
    (['tcp://b:1'], False)
    """
    missing = [k for k in tasks if k not in workers]
    if missing:
        raise KeyError(f"no worker given for {len(missing)} task(s), e.g. {missing[:3]}")
    extra = [k for k in workers if k not in tasks]
    if extra:
        raise KeyError(f"workers given for {len(extra)} unknown key(s), e.g. {extra[:3]}")
    where = {k: _as_list(workers[k]) for k in tasks}
    annotations = {
        "workers": where.__getitem__,
        "allow_other_workers": dict.fromkeys(tasks, False).__getitem__,
    }
    layer = MaterializedLayer(dict(tasks), annotations=annotations)
    return HighLevelGraph({LAYER_NAME: layer}, {LAYER_NAME: set()})


def submit_pinned(
    client: Client,
    tasks: Mapping[Any, Any],
    workers: Mapping[Any, str],
    keys: Iterable[Any],
) -> list[Future]:
    """Submit a pinned graph and return futures for ``keys``.

    Parameters
    ----------
    client : distributed.Client
    tasks, workers : mapping
        As for :func:`pinned_graph`.
    keys : iterable
        Keys to hold futures for, in the order wanted. Keys that are not asked
        for are released once their dependents have run.

    Returns
    -------
    list of distributed.Future

    Examples
    --------
    >>> from operator import add
    >>> a, b = worker_addresses(client)                               # doctest: +SKIP
    >>> [y] = submit_pinned(client, {"x": (add, 1, 2), "y": (add, "x", 1)},
    ...                     {"x": a, "y": b}, ["y"])                   # doctest: +SKIP
    >>> y.result()                                                    # doctest: +SKIP
    4
    """
    keys = list(keys)
    unknown = [k for k in keys if k not in tasks]
    if unknown:
        raise KeyError(f"keys not in the graph: {unknown[:3]}")
    # client.get skips the low-level optimiser, so annotations arrive intact.
    return client.get(pinned_graph(tasks, workers), keys, sync=False)


def _as_list(where: str | Iterable[str]) -> list[str]:
    if isinstance(where, str):
        return [where]
    where = list(where)
    if not where:
        # [] would mean "no restriction" to the scheduler: refuse it.
        raise ValueError("an empty worker list does not pin a task")
    return where
