"""daskhpc pages in the Dask dashboard.

Served by the scheduler's own dashboard server next to Dask's pages, linked as "Daskhpc" in
its navigation bar, and listed under "More..." and for the JupyterLab Dask extension:
``/daskhpc`` (what runs, with its panels), ``/individual-daskhpc-comm`` (planned and measured
bytes between workers), ``/individual-daskhpc-load`` (planned share of the work vs compute
share) and ``/individual-daskhpc-<key>`` (a workflow's own panels: SpGEMM's batches, SSGD's
strata timeline, ...); docs/dashboard.md shows each.

The pages update every half second from a scheduler plugin (:class:`DashboardPlugin`) that
workflows feed with :func:`publish`, that counts the bytes workers send each other
(:class:`TransferCounter`) and reads the workflows' own plugins' timelines.
``daskhpc.connect()`` and the launchers set it up; for any other scheduler, preload
:mod:`daskhpc.dashboard.preload`.

Examples
--------
>>> import daskhpc as dh
>>> from daskhpc import dashboard
>>> client = dh.connect(n_workers=2)                    # doctest: +SKIP
>>> client.dashboard_link.replace("status", "daskhpc")  # doctest: +SKIP
'http://127.0.0.1:8787/daskhpc'
>>> dashboard.publish(client, "run", name="my run",
...                   workers=dh.runtime.worker_addresses(client))   # doctest: +SKIP
True
"""

from __future__ import annotations

from daskhpc.dashboard._base import (EMPTY, UPDATE_MS, Component, bytes_text, format_bytes,
                                     update_source, worker_label)
from daskhpc.dashboard._install import install, serve
from daskhpc.dashboard._plugin import DashboardPlugin, TransferCounter
from daskhpc.dashboard._publish import (ensure_plugin, plan_fields, plan_matrix, publish,
                                        sent_now)
from daskhpc.dashboard._state import PLUGIN_NAME, TOPICS, DashboardState

__all__ = [
    "Component",
    "EMPTY",
    "UPDATE_MS",
    "DashboardPlugin",
    "DashboardState",
    "PAGES",
    "PLUGIN_NAME",
    "TOPICS",
    "TransferCounter",
    "bytes_text",
    "format_bytes",
    "update_source",
    "worker_label",
    "ensure_plugin",
    "install",
    "plan_fields",
    "plan_matrix",
    "publish",
    "sent_now",
    "serve",
]


def __getattr__(name: str):
    # PAGES needs bokeh; importing daskhpc.dashboard (to publish) must not.
    if name == "PAGES":
        from daskhpc.dashboard._pages import PAGES

        return PAGES
    raise AttributeError(f"module 'daskhpc.dashboard' has no attribute {name!r}")
