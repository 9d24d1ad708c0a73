"""The generic daskhpc pages (listed in :mod:`daskhpc.dashboard`), and the overview that adds
the running workflow's panels."""

from __future__ import annotations

import logging

import numpy as np
from bokeh.layouts import column
from bokeh.models import ColorBar, ColumnDataSource, Div, FactorRange, LinearColorMapper, Range1d
from bokeh.palettes import Category10_10, Viridis256
from daskhpc._dask_internals import BOKEH_THEME, env, log_errors

from daskhpc.dashboard._base import (EMPTY, UPDATE_MS, Component, bytes_text, update_source,
                                     worker_label)

logger = logging.getLogger(__name__)


class CommMatrix(Component):
    """Planned and measured bytes between every pair of workers (source row, destination
    column) on one colour scale: a cell brighter on the right moved more than the plan said."""

    def __init__(self, scheduler, **kw):
        super().__init__(scheduler, **kw)
        self.mapper = LinearColorMapper(palette=Viridis256, low=0, high=1)
        self.sources = {}
        figs = []
        for which, title in (("planned", "Planned bytes (row sends to column)"),
                             ("measured", "Measured bytes so far")):
            src = ColumnDataSource({"image": [np.zeros((1, 1))], "dw": [1], "dh": [1],
                                    "total": [0.0]}, name=f"daskhpc-comm-{which}")
            fig = self.figure(title, [("from", "$y{0}"), ("to", "$x{0}"),
                                      ("bytes", "@image{0,0}")],
                              x_range=Range1d(0, 1), y_range=Range1d(1, 0),
                              x_axis_label="to worker", y_axis_label="from worker",
                              match_aspect=True)
            fig.image(image="image", x=0, y=0, dw="dw", dh="dh", source=src,
                      color_mapper=self.mapper)
            # one mapper: both bars read on the same scale
            fig.add_layout(ColorBar(color_mapper=self.mapper, width=10, title="bytes"), "right")
            figs.append(fig)
            self.sources[which] = src
        self.figs = figs
        self.set_root(EMPTY, "daskhpc-comm-summary", *figs)

    @log_errors
    def update(self) -> None:
        if (st := self.state) is None:
            return
        workers, measured = st.measured_matrix(self.plugin.sent())
        _, planned = st.planned_matrix()
        k = len(workers)
        if k == 0:
            return
        if planned is None:
            planned = np.zeros((k, k))
        elif planned.shape[0] != k:          # the plan's corner, zeros for workers beyond it
            planned = np.pad(planned[:k, :k], (0, k - min(k, planned.shape[0])))
        d = st.bytes_summary(float(measured.sum()))
        # the planned heatmap is the plan of the units done so far (a per-unit plan times
        # the units done, a run plan in proportion), so both share one scale all along
        if d["scope"] == "unit":
            planned = planned * d["units_done"]
        elif d["planned_run"] and d["units_total"]:
            planned = planned * (d["planned_so_far"] / d["planned_run"])
        self.mapper.high = max(float(planned.max()), float(measured.max()), 1.0)
        labels = {i + 0.5: worker_label(self.scheduler, w) for i, w in enumerate(workers)}
        for which, m in (("planned", planned), ("measured", measured)):
            update_source(self.sources[which], {"image": [m], "dw": [k], "dh": [k],
                                          "total": [float(m.sum())]})
        for fig in self.figs:
            fig.x_range.end = k
            fig.y_range.start = k
            if k <= 32:
                for axis in (fig.xaxis[0], fig.yaxis[0]):
                    axis.ticker = list(labels)
                    axis.major_label_overrides = labels
        self.summary.text = f"<b>{st.run.get('name', 'run')}</b>: {k} workers; " + \
            bytes_text(d, st.unit_name())


class WorkerLoad(Component):
    """Per worker: its planned share of the work and its share of the compute time so far."""

    def __init__(self, scheduler, **kw):
        super().__init__(scheduler, **kw)
        self.source = self.empty_source("daskhpc-load", "x", "share", "value", "kind", "color")
        self.fig = self.figure("Share of the work per worker: planned vs compute time",
                               [("worker", "@x"), ("amount", "@value{0,0.000}"),
                                ("share", "@share{0.0%}")],
                               x_range=FactorRange(), y_range=Range1d(0, 1), y_axis_label="share")
        self.fig.vbar(x="x", top="share", width=0.9, source=self.source, fill_color="color",
                      line_color="color", legend_field="kind")
        self.fig.legend.location = "top_right"
        self.set_root(EMPTY, "daskhpc-load-summary", self.fig)

    @log_errors
    def update(self) -> None:
        if (st := self.state) is None:
            return
        workers = st.workers(self.scheduler.workers)
        if not workers:
            return
        d = st.load(workers, self.plugin.steps())
        unit = st.load_unit()
        kinds = [(f"planned ({unit})", "planned", "planned_share", Category10_10[0]),
                 (f"compute seconds ({COMPUTE_WORDS[d['compute']][0]})", "busy", "busy_share",
                  Category10_10[1])]
        total = sum(d["busy"]) + sum(d["planned"])
        rows = [((worker_label(self.scheduler, w), kind), d[share][i], d[value][i], kind, color,
                 total) for i, w in enumerate(workers) for kind, value, share, color in kinds]
        data = dict(zip(("x", "share", "value", "kind", "color", "total"),
                        (list(c) for c in zip(*rows))))
        self.fig.x_range.factors = data["x"]
        self.fig.y_range.end = max([0.05, *data["share"]]) * 1.15
        update_source(self.source, data)
        busy = np.asarray(d["busy"])
        spread = f"; slowest/mean compute = {busy.max() / busy.mean():.2f}" if busy.sum() else ""
        what, done = COMPUTE_WORDS[d["compute"]]
        late = st.waited_for(self.plugin.waited())
        name = late and worker_label(self.scheduler, late[0])
        waited = (f"; the others waited most for {name}"
                  f"{'' if name == late[0] else ' at ' + late[0]} ({late[1]:.2f} s)"
                  ) if late else ""
        self.summary.text = (f"<b>{st.run.get('name', 'run')}</b>: {sum(d['tasks']):,} {done} "
                             f"done, {busy.sum():.2f} s of compute ({what}){spread}{waited}")


#: How the load panel names its compute seconds, and what it counts done, per
#: :meth:`DashboardState.load` ``compute``: the step functions' time is what the command
#: line's summary calls "compute" (``execution.steps``).
COMPUTE_WORDS = {"steps": ("in the step functions, as the summary's steps line", "steps"),
                 "tasks": ("whole tasks: this run timed no steps", "tasks")}


def workflow_panels() -> dict:
    """``{key: (workflow, Component class, title)}`` of every registered workflow that
    has a dashboard module (a broken one is skipped, with a log line)."""
    from daskhpc import _workflows

    out = {}
    for name in sorted(_workflows.available()):
        try:
            for key, (cls, title) in _workflows.load(name).panels().items():
                out[key] = (name, cls, title)
        except Exception as e:  # noqa: BLE001 - one workflow must not break the pages
            logger.warning("daskhpc dashboard: no panels of %s: %s", name, e)
    return out


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


def heading_text(state, scheduler=None) -> str:
    """What runs (or ran: "Finished", "Failed" once the run published its end), for the
    top of ``/daskhpc``."""
    if state is None or not state.run:
        return EMPTY
    run = state.run
    nworkers = len(run.get("workers") or ())
    n, total = len(state.units_done()), state.units_total()
    unit = state.unit_name()
    done = f"{n}/{total}" if total else f"{n}"
    status = str(run.get("status", "")) if run.get("ended") else ""
    head, _, why = status.partition(":")
    word = "Running" if not status else head.strip().capitalize() or "Finished"
    why = f" ({why.strip()})" if why.strip() else ""
    return (f"<h3 style='margin:4px 0'>{word}: <b>{run.get('workflow', 'a workflow')}</b>"
            f"{why} &mdash; {run.get('name', '')} on {nworkers} workers; {done} {unit}s "
            "done</h3>")


def overview_doc(scheduler, extra, doc):
    """``/daskhpc``: the generic panels and the running workflow's own (every registered
    workflow's panels are built, only the running one's are visible), under a heading
    that says what runs."""
    with log_errors():
        heading = Div(text=EMPTY, name="daskhpc-heading")
        generic = [CommMatrix(scheduler, sizing_mode="stretch_width", height=380),
                   WorkerLoad(scheduler, sizing_mode="stretch_width", height=300)]
        own = [(name, cls(scheduler, sizing_mode="stretch_width", height=320))
               for name, cls, _ in workflow_panels().values()]
        for key, (_, comp) in zip(workflow_panels(), own):
            comp.root.visible = False
            comp.root.name = f"daskhpc-panel-{key}"

        def update():
            st = generic[0].state
            heading.text = heading_text(st, scheduler)
            running = (st.run.get("workflow") if st is not None and st.run else None)
            for comp in generic:
                comp.update()
            for name, comp in own:
                show = running is not None and _runs(name, running)
                if comp.root.visible != show:
                    comp.root.visible = show
                if show:
                    comp.update()

        update()
        doc.add_periodic_callback(update, UPDATE_MS)
        doc.add_root(column(heading, *[c.root for c in generic], *[c.root for _, c in own],
                            sizing_mode="stretch_width"))
        doc.title = "Dask: daskhpc"
        doc.template = env.get_template("simple.html")
        doc.template_variables.update(extra)
        doc.theme = BOKEH_THEME


def _runs(workflow: str, running: str) -> bool:
    """Is ``running`` (a run's ``workflow`` field) this registered workflow?"""
    return running == workflow or str(running).startswith(f"{workflow}-")


def pages() -> dict:
    """URL -> Bokeh document function ``fn(scheduler, extra, doc)``: the generic pages and
    one per registered workflow panel."""
    out = {"/daskhpc": overview_doc,
           "/individual-daskhpc-comm": _individual(CommMatrix, "communication matrix"),
           "/individual-daskhpc-load": _individual(WorkerLoad, "worker load")}
    for key, (_, cls, title) in workflow_panels().items():
        out[f"/individual-daskhpc-{key}"] = _individual(cls, title)
    return out


#: The pages when this module was imported (``pages()`` looks again).
PAGES = pages()
