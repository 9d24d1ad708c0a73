"""The base of every daskhpc dashboard panel, for the generic pages and the workflows' own.

A panel (:class:`Component`) has a ``root`` (a Bokeh layout) and an ``update()`` that only
reads the scheduler's :class:`~daskhpc.dashboard.DashboardState`, so it is cheap; each data
source has a ``name`` (``daskhpc-...``) and a ``total`` column the browser tests read. A
workflow's ``dashboard`` module maps page keys to ``(Component subclass, title)`` in
``PANELS``: page ``/individual-daskhpc-<key>``, and a panel of ``/daskhpc`` during its runs.
"""

from __future__ import annotations

import numpy as np

from daskhpc.dashboard._state import PLUGIN_NAME
from daskhpc.report import format_bytes as report_bytes

UPDATE_MS = 500
EMPTY = "<i>No daskhpc run on this scheduler yet.</i>"


def worker_label(scheduler, addr: str) -> str:
    ws = scheduler.workers.get(addr)
    name = ws.name if ws is not None else None
    return f"w{name}" if isinstance(name, int) or str(name).isdigit() else str(name or addr)


def format_bytes(n: float) -> str:
    """One decimal on the pages (``daskhpc.report.format_bytes``)."""
    return report_bytes(n, ",.1f")


def bytes_text(d: dict, unit_name: str | None = None) -> str:
    """Planned vs measured bytes per run and per unit, as the pages print them."""
    unit = unit_name or "unit"
    n, total = d["units_done"], d["units_total"]
    if d["scope"] is None:
        return f"measured {format_bytes(d['measured_so_far'])} (no plan published)"
    done = f"{n}/{total}" if total else f"{n}"
    ratio = f" ({d['ratio']:.2f} x planned)" if d["ratio"] else ""
    run = (f"per run: planned {format_bytes(d['planned_run'])}"
           if d["planned_run"] is not None else "per run: planned ? (unit count unknown)")
    text = (f"{run}; after {done} {unit}s: planned {format_bytes(d['planned_so_far'])}, "
            f"measured {format_bytes(d['measured_so_far'])}{ratio}")
    if d["planned_per_unit"] is not None:
        # a mean: units differ (the first and last epochs of SSGD send less)
        mean = f" (mean of {n})" if n > 1 else ""
        text += f"; per {unit}{mean}: planned {format_bytes(d['planned_per_unit'])}"
        if d["measured_per_unit"] is not None:
            text += f", measured {format_bytes(d['measured_per_unit'])}"
    return text


class Component:
    """A panel: subclasses build ``root`` and implement ``update()``."""

    def __init__(self, scheduler, sizing_mode: str = "stretch_both", height: int | None = None):
        self.scheduler = scheduler
        # figures get the height; layouts only stretch, so titles and axes fit
        self.layout = {"sizing_mode": sizing_mode}
        self.sizing = {"sizing_mode": sizing_mode}
        if height is not None:
            self.sizing["height"] = height

    @property
    def plugin(self):
        """The scheduler's DashboardPlugin (None before it is installed)."""
        return self.scheduler.plugins.get(PLUGIN_NAME)

    @property
    def state(self):
        plugin = self.plugin
        return None if plugin is None else plugin.state

    def rows(self, workflow: str, field: str) -> list | None:
        """The current run's history rows that have ``field`` ([] unless it is a
        ``workflow`` run; None before the plugin is installed)."""
        if (st := self.state) is None:
            return None
        return [r for r in st.history if field in r] if st.run.get("workflow") == workflow else []

    def cleared(self, rows: list | None, *sources) -> bool:
        """True if there are no ``rows`` (the ``sources`` emptied once the plugin is
        installed)."""
        if rows:
            return False
        for src in sources if rows is not None else ():
            update_source(src, {k: [] for k in src.data})
        return True

    # bokeh is imported in these methods: importing daskhpc.dashboard (to publish) must
    # not load it
    def empty_source(self, name: str, *columns: str):
        """An empty data source ``name`` of these columns and ``total``."""
        from bokeh.models import ColumnDataSource

        return ColumnDataSource({**{k: [] for k in columns}, "total": []}, name=name)

    def figure(self, title: str, tooltips=None, tools: str = "hover,save,reset", **kw):
        """A figure of the panel's size, its toolbar above, with these hover tooltips."""
        from bokeh.models import HoverTool
        from bokeh.plotting import figure

        fig = figure(title=title, tools=tools, toolbar_location="above", **kw, **self.sizing)
        if tooltips is not None:
            fig.select_one(HoverTool).tooltips = tooltips
        return fig

    def set_root(self, text: str, name: str, *figs) -> None:
        """``root``: the ``summary`` line (a Div named ``name``) above the figures, in a row."""
        from bokeh.layouts import column, row
        from bokeh.models import Div

        self.summary = Div(text=text, name=name)
        self.root = column(self.summary, row(*figs, **self.layout) if len(figs) > 1 else figs[0],
                           **self.layout)


def update_source(source, data: dict) -> None:
    """Replace a source's data only if it changed: every assignment ships all of
    it to each open browser (a K x K image for K = 1024 is 8 MB)."""
    old = source.data
    if set(old) == set(data) and all(_same(old[k], v) for k, v in data.items()):
        return
    source.data = data


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and \
            a.shape == b.shape and bool(np.array_equal(a, b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b
