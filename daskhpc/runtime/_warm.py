"""A workflow's warm-up (loading its numba kernels before anything is timed) runs once in
each worker process.

The frame ran it on every worker at the start of every run, though a process keeps the
kernels it loaded: GCN's, four tiny programs through ``run_local``, took 19 ms of every
fit on Cora (a call trace, 2 workers). :func:`warm_once` remembers, in the worker
process, which warm-ups it ran (by function and arguments); a new worker process (a
replacement after a loss) has none and runs them.
"""

from __future__ import annotations

import functools

__all__ = ["warm", "warm_once"]

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
    client.run(warm_once, fn, workers=workers)
