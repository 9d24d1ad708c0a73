"""Task graphs whose every task is pinned on one worker.

.. warning::
   Per-key restrictions travel as *callable* layer annotations (bound
   ``dict.__getitem__``): the scheduler calls ``annotation(key)`` for every key
   (``HLGExpr.__dask_annotations__`` in dask 2026.8); a plain dict would be handed whole
   to every key and fail ``update_graph``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from dask.highlevelgraph import HighLevelGraph, MaterializedLayer

if TYPE_CHECKING:
    from distributed import Client, Future

LAYER_NAME = "daskhpc-pinned"


def pinned_graph(tasks: Mapping[Any, Any], workers: Mapping[Any, str]) -> HighLevelGraph:
    """Wrap tasks in a graph that pins each key on its worker.

    Parameters
    ----------
    tasks : mapping
        ``{key: task}``: an old-style tuple ``(func, arg, ...)`` whose arguments may be
        other keys of the graph or Futures (a bare string naming client data is *not*
        resolved), a ``dask._task_spec.Task`` or ``DataNode``, or a literal.
    workers : mapping
        ``{key: address}`` for every key (a list of addresses means any of these).

    Returns
    -------
    HighLevelGraph
        One ``MaterializedLayer`` named ``"daskhpc-pinned"`` with the annotations
        ``workers`` and ``allow_other_workers=False`` on every key.

    Examples
    --------
    >>> from operator import add
    >>> hlg = pinned_graph({"x": (add, 1, 2), "y": (add, "x", 1)},
    ...                    {"x": "tcp://a:1", "y": "tcp://b:1"})
    >>> hlg.layers["daskhpc-pinned"].annotations["workers"]("y")
    ['tcp://b:1']
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

    ``client.get`` skips dask's low-level optimiser, whose fusion would merge tasks of
    different workers and drop their restrictions.

    Parameters
    ----------
    client : distributed.Client
    tasks, workers : mapping
        As for :func:`pinned_graph`.
    keys : iterable
        Keys to return futures for, in order; the others are released once used.

    Examples
    --------
    >>> from operator import add
    >>> [y] = submit_pinned(client, {"x": (add, 1, 2), "y": (add, "x", 1)},
    ...                     {"x": a, "y": b}, ["y"])                   # doctest: +SKIP
    """
    keys = list(keys)
    unknown = [k for k in keys if k not in tasks]
    if unknown:
        raise KeyError(f"keys not in the graph: {unknown[:3]}")
    return client.get(pinned_graph(tasks, workers), keys, sync=False)


def _as_list(where: str | Iterable[str]) -> list[str]:
    if isinstance(where, str):
        return [where]
    where = list(where)
    if not where:
        # [] would mean "no restriction" to the scheduler: refuse it.
        raise ValueError("an empty worker list does not pin a task")
    return where
