"""The SSGD strata timeline panel of the daskhpc dashboard (named by its Workflow's ``dashboard``).
"""

from __future__ import annotations

import time

from bokeh.layouts import column
from bokeh.models import ColumnDataSource, Div, FactorRange, HoverTool
from bokeh.palettes import Category20_20
from bokeh.plotting import figure
from distributed.utils import log_errors

from daskhpc.dashboard import Component, update_source, worker_label

__all__ = ["StrataTimeline", "PANELS"]


class StrataTimeline(Component):
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
            data["worker"].append(worker_label(self.scheduler, r["worker"]))
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
        update_source(self.source, data)
        subs = len(set(data["substep"]))
        self.summary.text = (f"<b>strata timeline</b>: {len(rows)} steps on {len(workers)} "
                             f"workers, {subs} sub-steps, {max(data['right']):.2f} s")


#: page key -> (panel, title): ``/individual-daskhpc-strata``
PANELS = {"strata": (StrataTimeline, "strata timeline")}
