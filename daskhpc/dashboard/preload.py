"""Scheduler preload that adds the daskhpc dashboard pages and their data plugin.

Importing this module (which Dask does while it builds the scheduler, before its dashboard
server starts) registers the pages; ``dask_setup`` then adds the
:class:`~daskhpc.dashboard.DashboardPlugin`. ``daskhpc.connect()`` and the launchers use
it; any other scheduler can too::

    dask scheduler --preload daskhpc.dashboard.preload
    DASK_DISTRIBUTED__SCHEDULER__PRELOAD='["daskhpc.dashboard.preload"]' dask-mpi ...
"""

from __future__ import annotations

from daskhpc.dashboard._install import install
from daskhpc.dashboard._plugin import DashboardPlugin

__all__ = ["dask_setup"]

install()


def dask_setup(scheduler) -> None:
    """Preload hook: add the daskhpc dashboard plugin (its ``start`` runs next)."""
    scheduler.add_plugin(DashboardPlugin(), idempotent=True)
