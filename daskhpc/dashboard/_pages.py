"""The daskhpc pages: Bokeh components that read the scheduler's DashboardPlugin.

Each component has a ``root`` (a Bokeh layout) and an ``update()`` that a
periodic callback runs on the scheduler's event loop; ``update()`` only reads
:class:`~daskhpc.dashboard._state.DashboardState` and the scheduler's worker
table, so it is cheap. Each data source has a ``name`` (``daskhpc-...``) and a
``total`` column that the browser tests read to know the plot has data.

================================  =====================================================
page                              shows
================================  =====================================================
``/daskhpc``                      all four below, in the dashboard's own page template
``/individual-daskhpc-comm``      K x K heatmaps: planned bytes, measured bytes so far
``/individual-daskhpc-load``      per worker: planned share of the work, compute share
``/individual-daskhpc-spgemm``    batch admission timeline; memory against the budget
``/individual-daskhpc-strata``    strata timeline: sub-steps per worker over time
================================  =====================================================
"""

from __future__ import annotations

import time

import numpy as np
from bokeh.layouts import column, row
from bokeh.models import (ColorBar, ColumnDataSource, Div, FactorRange, HoverTool,
                          LinearColorMapper, Range1d, Span)
from bokeh.palettes import Category10_10, Category20_20, Viridis256
from bokeh.plotting import figure
from distributed.dashboard.components.scheduler import BOKEH_THEME, env
from distributed.utils import log_errors

from daskhpc.dashboard._plugin import PLUGIN_NAME

__all__ = ["CommMatrix", "WorkerLoad", "BatchProgress", "StrataTimeline", "PAGES"]

UPDATE_MS = 500
EMPTY = "<i>No daskhpc run on this scheduler yet.</i>"


def _plugin(scheduler):
    return scheduler.plugins.get(PLUGIN_NAME)


def _label(scheduler, addr: str) -> str:
    ws = scheduler.workers.get(addr)
    name = ws.name if ws is not None else None
    return f"w{name}" if isinstance(name, int) or str(name).isdigit() else str(name or addr)


def _bytes(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1000
    return f"{n}"  # pragma: no cover


class _Component:
    def __init__(self, scheduler, sizing_mode: str = "stretch_both", height: int | None = None):
        self.scheduler = scheduler
        # figures get the height; layouts only stretch, so titles and axes fit
        self.layout = {"sizing_mode": sizing_mode}
        self.sizing = {"sizing_mode": sizing_mode}
        if height is not None:
            self.sizing["height"] = height

    @property
    def state(self):
        plugin = _plugin(self.scheduler)
        return None if plugin is None else plugin.state


class CommMatrix(_Component):
    """Planned and measured bytes between every pair of workers (source row, destination column).

    Both heatmaps share one colour scale, so a cell that is brighter on the right
    moved more than the plan said. The measured matrix grows as the workers'
    heartbeats report new transfers.
    """

    def __init__(self, scheduler, **kw):
        super().__init__(scheduler, **kw)
        self.mapper = LinearColorMapper(palette=Viridis256, low=0, high=1)
        self.sources = {}
        figs = []
        for which, title in (("planned", "Planned bytes (row sends to column)"),
                             ("measured", "Measured bytes so far")):
            src = ColumnDataSource({"image": [np.zeros((1, 1))], "dw": [1], "dh": [1],
                                    "total": [0.0]}, name=f"daskhpc-comm-{which}")
            fig = figure(title=title, x_range=Range1d(0, 1), y_range=Range1d(1, 0),
                         tools="hover,save,reset", toolbar_location="above",
                         x_axis_label="to worker", y_axis_label="from worker",
                         match_aspect=True, **self.sizing)
            fig.image(image="image", x=0, y=0, dw="dw", dh="dh", source=src,
                      color_mapper=self.mapper)
            fig.select_one(HoverTool).tooltips = [("from", "$y{0}"), ("to", "$x{0}"),
                                                  ("bytes", "@image{0,0}")]
            figs.append(fig)
            self.sources[which] = src
        figs[1].add_layout(ColorBar(color_mapper=self.mapper, width=10), "right")
        self.figs = figs
        self.summary = Div(text=EMPTY, name="daskhpc-comm-summary")
        self.root = column(self.summary, row(*figs, **self.layout), **self.layout)

    @log_errors
    def update(self) -> None:
        st = self.state
        if st is None:
            return
        plugin = _plugin(self.scheduler)
        workers, measured = st.measured_matrix(plugin.sent())
        _, planned = st.planned_matrix()
        k = len(workers)
        if k == 0:
            return
        if planned is None or planned.shape[0] != k:
            planned = np.zeros((k, k)) if planned is None else _pad(planned, k)
        self.mapper.high = max(float(planned.max()), float(measured.max()), 1.0)
        labels = {i + 0.5: _label(self.scheduler, w) for i, w in enumerate(workers)}
        for which, m in (("planned", planned), ("measured", measured)):
            _update(self.sources[which], {"image": [m], "dw": [k], "dh": [k],
                                          "total": [float(m.sum())]})
        for fig in self.figs:
            fig.x_range.end = k
            fig.y_range.start = k
            if k <= 32:
                for axis in (fig.xaxis[0], fig.yaxis[0]):
                    axis.ticker = list(labels)
                    axis.major_label_overrides = labels
        ptotal, mtotal = planned.sum(), measured.sum()
        ratio = f" ({mtotal / ptotal:.2f} x planned)" if ptotal else ""
        self.summary.text = (f"<b>{st.run.get('name', 'run')}</b>: {k} workers; planned "
                             f"{_bytes(ptotal)}, measured {_bytes(mtotal)}{ratio}")


def _update(source, data: dict) -> None:
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


def _pad(m: np.ndarray, k: int) -> np.ndarray:
    out = np.zeros((k, k))
    n = min(k, m.shape[0])
    out[:n, :n] = m[:n, :n]
    return out


class WorkerLoad(_Component):
    """Per worker: its planned share of the work and its share of the compute time so far."""

    def __init__(self, scheduler, **kw):
        super().__init__(scheduler, **kw)
        self.source = ColumnDataSource({"x": [], "share": [], "value": [], "kind": [],
                                        "color": [], "total": []}, name="daskhpc-load")
        self.fig = figure(title="Share of the work per worker: planned vs compute time",
                          x_range=FactorRange(), y_range=Range1d(0, 1),
                          tools="hover,save,reset", toolbar_location="above",
                          y_axis_label="share", **self.sizing)
        self.fig.vbar(x="x", top="share", width=0.9, source=self.source, fill_color="color",
                      line_color="color", legend_field="kind")
        self.fig.select_one(HoverTool).tooltips = [("worker", "@x"), ("amount", "@value{0,0.000}"),
                                                   ("share", "@share{0.0%}")]
        self.fig.legend.location = "top_right"
        self.summary = Div(text=EMPTY, name="daskhpc-load-summary")
        self.root = column(self.summary, self.fig, **self.layout)

    @log_errors
    def update(self) -> None:
        st = self.state
        if st is None:
            return
        workers = st.workers(self.scheduler.workers)
        if not workers:
            return
        d = st.load(workers)
        unit = st.topics.get("load", {}).get("unit", "work")
        kinds = [(f"planned ({unit})", "planned", "planned_share", Category10_10[0]),
                 ("compute seconds", "busy", "busy_share", Category10_10[1])]
        data = {"x": [], "share": [], "value": [], "kind": [], "color": [], "total": []}
        for i, w in enumerate(workers):
            for kind, value, share, color in kinds:
                data["x"].append((_label(self.scheduler, w), kind))
                data["share"].append(d[share][i])
                data["value"].append(d[value][i])
                data["kind"].append(kind)
                data["color"].append(color)
                data["total"].append(sum(d["busy"]) + sum(d["planned"]))
        self.fig.x_range.factors = data["x"]
        self.fig.y_range.end = max([0.05, *data["share"]]) * 1.15
        _update(self.source, data)
        busy = np.asarray(d["busy"])
        spread = f"; slowest/mean compute = {busy.max() / busy.mean():.2f}" if busy.sum() else ""
        self.summary.text = (f"<b>{st.run.get('name', 'run')}</b>: {sum(d['tasks'])} tasks "
                             f"done, {busy.sum():.2f} s of compute{spread}")


class BatchProgress(_Component):
    """SpGEMM batches over time (waiting, computing, consuming) and memory against the budget."""

    PHASES = (("admitted", "started", "admitted, waiting", "#bbbbbb"),
              ("started", "finished", "computing", Category10_10[0]),
              ("finished", "consumed", "consuming", Category10_10[2]))

    def __init__(self, scheduler, **kw):
        super().__init__(scheduler, **kw)
        self.gantt_source = ColumnDataSource(
            {"batch": [], "left": [], "right": [], "phase": [], "color": [], "total": []},
            name="daskhpc-batches")
        self.gantt = figure(title="Batches (seconds since the first admission)",
                            y_range=Range1d(-0.5, 0.5), tools="hover,save,reset",
                            toolbar_location="above", x_axis_label="seconds",
                            y_axis_label="batch", **self.sizing)
        self.gantt.hbar(y="batch", left="left", right="right", height=0.8, fill_color="color",
                        line_color="color", source=self.gantt_source, legend_field="phase")
        self.gantt.select_one(HoverTool).tooltips = [("batch", "@batch"), ("phase", "@phase"),
                                                     ("from", "@left{0.000} s"),
                                                     ("to", "@right{0.000} s")]
        self.gantt.legend.location = "top_right"   # batches run top left to bottom right
        self.memory_source = ColumnDataSource({"x": [], "bytes": [], "color": [], "total": []},
                                              name="daskhpc-memory")
        self.memory = figure(title="Memory added per worker (now, peak) and the budget",
                             x_range=FactorRange(), y_range=Range1d(0, 1),
                             tools="hover,save,reset",
                             toolbar_location="above", y_axis_label="bytes", **self.sizing)
        self.memory.vbar(x="x", top="bytes", width=0.9, fill_color="color", line_color="color",
                         source=self.memory_source)
        self.memory.select_one(HoverTool).tooltips = [("", "@x"), ("bytes", "@bytes{0,0}")]
        self.budget = Span(dimension="width", location=0, line_color="red", line_dash="dashed",
                           line_width=2, visible=False)
        self.memory.add_layout(self.budget)
        self.summary = Div(text=EMPTY, name="daskhpc-spgemm-summary")
        self.root = column(self.summary, row(self.gantt, self.memory, **self.layout),
                           **self.layout)

    @log_errors
    def update(self) -> None:
        st = self.state
        if st is None or not st.batches:
            return
        run, tl = next(reversed(st.batches.items()))   # the latest run
        batches = tl.get("batches", [])
        t0 = min((b["admitted"] for b in batches if b.get("admitted") is not None),
                 default=None)
        if t0 is None:
            return
        now = st.batches_clock(run, time.time())
        data = {"batch": [], "left": [], "right": [], "phase": [], "color": [], "total": []}
        for b in batches:
            for start, stop, phase, color in self.PHASES:
                if b.get(start) is None:
                    continue
                data["batch"].append(b["batch"])
                data["left"].append(b[start] - t0)
                data["right"].append((b[stop] if b.get(stop) is not None else now) - t0)
                data["phase"].append(phase)
                data["color"].append(color)
                data["total"].append(len(batches))
        _update(self.gantt_source, data)
        self.gantt.y_range.start, self.gantt.y_range.end = len(batches) - 0.5, -0.5
        self._update_memory(st)
        done = sum(b.get("consumed") is not None for b in batches)
        bad = tl.get("violations") or []
        budget = st.topics.get("memory", {}).get("budget")
        self.summary.text = (
            f"<b>spgemm {run}</b>: {done}/{len(batches)} batches consumed, window "
            f"{tl.get('window', '?')}" + (f", budget {_bytes(budget)} per worker" if budget else "")
            + (f"; <b style='color:red'>{len(bad)} admission violations</b>" if bad
               else "; admission order kept"))

    def _update_memory(self, st) -> None:
        mem = st.topics.get("memory", {})
        base = mem.get("baseline") or {}
        final = mem.get("peak") or {}
        workers = [w for w in st.workers(self.scheduler.workers) if w in base or
                   w in self.scheduler.workers]
        data = {"x": [], "bytes": [], "color": [], "total": []}
        for w in workers:
            ws = self.scheduler.workers.get(w)
            now = ws.memory.process if ws is not None else None
            peak = max(st.memory_peak.get(w, 0), final.get(w) or 0)
            for kind, value, color in (("now", now, Category10_10[0]),
                                       ("peak", peak, Category10_10[3])):
                if value is None:
                    continue
                data["x"].append((_label(self.scheduler, w), kind))
                data["bytes"].append(max(0, value - (base.get(w) or 0)))
                data["color"].append(color)
        data["total"] = [sum(data["bytes"])] * len(data["x"])
        self.memory.x_range.factors = data["x"]
        _update(self.memory_source, data)
        budget = mem.get("budget")
        self.budget.visible = bool(budget)
        if budget:
            self.budget.location = float(budget)
        # the budget line counts for the range: a run well under it should look so
        self.memory.y_range.end = 1.1 * max([1.0, float(budget or 0), *data["bytes"]])


class StrataTimeline(_Component):
    """Sub-steps (strata, sub-epochs) per worker over time, from a strata-timeline source."""

    def __init__(self, scheduler, **kw):
        super().__init__(scheduler, **kw)
        self.source = ColumnDataSource(
            {"worker": [], "left": [], "right": [], "substep": [], "task": [], "epoch": [],
             "messages": [], "color": [], "total": []}, name="daskhpc-strata")
        self.fig = figure(title="Strata timeline: sub-steps per worker (seconds)",
                          y_range=FactorRange(), tools="hover,xwheel_zoom,xpan,save,reset",
                          toolbar_location="above", x_axis_label="seconds", **self.sizing)
        self.fig.hbar(y="worker", left="left", right="right", height=0.8, fill_color="color",
                      line_color="white", source=self.source)
        self.fig.select_one(HoverTool).tooltips = [
            ("worker", "@worker"), ("epoch", "@epoch"), ("sub-step", "@substep"),
            ("task", "@task"), ("messages", "@messages"),
            ("time", "@left{0.000} - @right{0.000} s")]
        self.summary = Div(text="<i>No strata timeline yet (SSGD records one).</i>",
                           name="daskhpc-strata-summary")
        self.root = column(self.summary, self.fig, **self.layout)

    @log_errors
    def update(self) -> None:
        st = self.state
        if st is None:
            return
        # The scheduler's clock (``sent`` to the worker, result ``done``) where the row
        # has it: one clock for every task. The workers' ``start``/``stop`` arrive
        # shifted by the scheduler's per-worker latency estimate, which was off by up to
        # 1.7 s on a loaded machine, enough to draw sub-epochs out of order.
        rows = [(r.get("sent", r.get("start")), r.get("done", r.get("stop")), r)
                for r in st.strata_rows() if r.get("worker")]
        rows = [x for x in rows if x[0] is not None]
        if not rows:
            return
        t0 = min(begin for begin, _, _ in rows)
        now = time.time()
        data = {k: [] for k in self.source.data}
        for begin, end, r in rows:
            sub = r.get("substep", r.get("subepoch", 0))
            data["worker"].append(_label(self.scheduler, r["worker"]))
            data["left"].append(begin - t0)
            data["right"].append((end if end is not None else now) - t0)
            data["substep"].append(str(sub))
            data["task"].append(str(r.get("task", r.get("key", ""))))
            data["epoch"].append(str(r.get("epoch", "")))
            data["messages"].append(str(r.get("messages", "")))
            data["color"].append(Category20_20[int(sub) % 20] if str(sub).isdigit()
                                 else Category20_20[hash(sub) % 20])
        data["total"] = [len(rows)] * len(rows)
        workers = sorted(set(data["worker"]), key=lambda s: (len(s), s))
        self.fig.y_range.factors = workers
        _update(self.source, data)
        subs = len(set(data["substep"]))
        self.summary.text = (f"<b>strata timeline</b>: {len(rows)} steps on {len(workers)} "
                             f"workers, {subs} sub-steps, {max(data['right']):.2f} s")


# -- documents ---------------------------------------------------------------------------

def _individual(cls, title: str):
    def doc_fn(scheduler, extra, doc):
        with log_errors():
            comp = cls(scheduler)
            comp.update()
            doc.add_periodic_callback(comp.update, UPDATE_MS)
            doc.add_root(comp.root)
            doc.title = f"daskhpc: {title}"
            doc.theme = BOKEH_THEME
    doc_fn.__name__ = f"{cls.__name__.lower()}_doc"
    return doc_fn


def overview_doc(scheduler, extra, doc):
    """``/daskhpc``: every daskhpc plot on one page, with the dashboard's navigation bar."""
    with log_errors():
        comps = [CommMatrix(scheduler, sizing_mode="stretch_width", height=380),
                 WorkerLoad(scheduler, sizing_mode="stretch_width", height=300),
                 BatchProgress(scheduler, sizing_mode="stretch_width", height=320),
                 StrataTimeline(scheduler, sizing_mode="stretch_width", height=320)]
        for comp in comps:
            comp.update()
            doc.add_periodic_callback(comp.update, UPDATE_MS)
        doc.add_root(column(*[c.root for c in comps], sizing_mode="stretch_width"))
        doc.title = "Dask: daskhpc"
        doc.template = env.get_template("simple.html")
        doc.template_variables.update(extra)
        doc.theme = BOKEH_THEME


#: URL -> Bokeh document function ``fn(scheduler, extra, doc)``.
PAGES = {
    "/daskhpc": overview_doc,
    "/individual-daskhpc-comm": _individual(CommMatrix, "communication matrix"),
    "/individual-daskhpc-load": _individual(WorkerLoad, "worker load"),
    "/individual-daskhpc-spgemm": _individual(BatchProgress, "SpGEMM batches"),
    "/individual-daskhpc-strata": _individual(StrataTimeline, "strata timeline"),
}
