"""A workflow's warm-up (loading its numba kernels) runs once in each worker process
(GCN's took 19 ms of every fit on Cora, docs/benchmarks.md)."""

from __future__ import annotations

import functools

from daskhpc.runtime._fault import run_on_workers

_DONE: set = set()       # this process's warm-ups already run


def _key(fn) -> tuple:
    if isinstance(fn, functools.partial):
        return (_key(fn.func), repr(fn.args), repr(sorted(fn.keywords.items())))
    return (getattr(fn, "__module__", None), getattr(fn, "__qualname__", None) or repr(fn))


def warm_once(fn, dask_worker=None) -> bool:
    """Run ``fn()`` here unless this process ran it already; whether it ran."""
    key = _key(fn)
    if key in _DONE:
        return False
    fn()
    _DONE.add(key)
    return True


def warm(client, fn, workers=None) -> None:
    """``fn`` run once in each of the ``workers`` (default all) that has not run it."""
    run_on_workers(client, warm_once, fn, workers=workers)


def started(client, fn=None, count: bool = False) -> dict | None:
    """A run's first worker call, one round trip: the warm-up ``fn`` (once per process) and,
    with ``count``, each worker's sent-bytes counters now (``{worker: counters}``, else
    None; None too where the call failed without a warm-up)."""
    try:
        got = run_on_workers(client, _started, fn, count)
    except Exception:
        if fn is not None:
            raise
        return None
    return got if count else None


def _started(fn, count: bool, dask_worker=None):
    if fn is not None:
        warm_once(fn)
    if count:
        from daskhpc.dashboard import sent_now

        return sent_now(dask_worker=dask_worker)
    return None
