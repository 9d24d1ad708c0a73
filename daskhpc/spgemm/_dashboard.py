"""The SpGEMM batches panel of the daskhpc dashboard (named by its Workflow's ``dashboard``).
"""

from __future__ import annotations

import time

from bokeh.models import FactorRange, Range1d, Span
from bokeh.palettes import Category10_10
from daskhpc._dask_internals import log_errors

from daskhpc.dashboard import (EMPTY, Component, bytes_text, format_bytes, update_source,
                               worker_label)


class BatchProgress(Component):
    """SpGEMM batches over time (waiting, computing, consuming) and memory against the budget."""

    PHASES = (("admitted", "started", "admitted, waiting", "#bbbbbb"),
              ("started", "finished", "computing", Category10_10[0]),
              ("finished", "consumed", "consuming", Category10_10[2]))

    def __init__(self, scheduler, **kw):
        super().__init__(scheduler, **kw)
        self.gantt_source = self.empty_source("daskhpc-batches", "batch", "left", "right",
                                              "phase", "color")
        self.gantt = self.figure("Batches (seconds since the first admission)",
                                 [("batch", "@batch"), ("phase", "@phase"),
                                  ("from", "@left{0.000} s"), ("to", "@right{0.000} s")],
                                 y_range=Range1d(-0.5, 0.5), x_axis_label="seconds",
                                 y_axis_label="batch")
        self.gantt.hbar(y="batch", left="left", right="right", height=0.8, fill_color="color",
                        line_color="color", source=self.gantt_source, legend_field="phase")
        self.gantt.legend.location = "top_right"   # batches run top left to bottom right
        self.memory_source = self.empty_source("daskhpc-memory", "x", "bytes", "color")
        self.memory = self.figure("Memory added per worker (now, peak) and the budget",
                                  [("", "@x"), ("bytes", "@bytes{0,0}")], x_range=FactorRange(),
                                  y_range=Range1d(0, 1), y_axis_label="bytes")
        self.memory.vbar(x="x", top="bytes", width=0.9, fill_color="color", line_color="color",
                         source=self.memory_source)
        self.budget = Span(dimension="width", location=0, line_color="red", line_dash="dashed",
                           line_width=2, visible=False)
        self.memory.add_layout(self.budget)
        self.set_root(EMPTY, "daskhpc-spgemm-summary", self.gantt, self.memory)

    @log_errors
    def update(self) -> None:
        if (st := self.state) is None or not st.batches:
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
        update_source(self.gantt_source, data)
        self.gantt.y_range.start, self.gantt.y_range.end = len(batches) - 0.5, -0.5
        self._update_memory(st)
        done = sum(b.get("consumed") is not None for b in batches)
        bad = tl.get("violations") or []
        budget = st.topics.get("memory", {}).get("budget")
        _, measured = st.measured_matrix(self.plugin.sent())
        self.summary.text = (
            f"<b>spgemm {run}</b>: {done}/{len(batches)} batches consumed, window "
            f"{tl.get('window', '?')}"
            + (f", budget {format_bytes(budget)} per worker" if budget else "")
            + (f"; <b style='color:red'>{len(bad)} admission violations</b>" if bad
               else "; admission order kept")
            + "<br>bytes between workers: " + bytes_text(st.bytes_summary(float(measured.sum())),
                                                        "batch"))

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
                data["x"].append((worker_label(self.scheduler, w), kind))
                data["bytes"].append(max(0, value - (base.get(w) or 0)))
                data["color"].append(color)
        data["total"] = [sum(data["bytes"])] * len(data["x"])
        self.memory.x_range.factors = data["x"]
        update_source(self.memory_source, data)
        budget = mem.get("budget")
        self.budget.visible = bool(budget)
        if budget:
            self.budget.location = float(budget)
        # the budget line counts for the range: a run well under it should look so
        self.memory.y_range.end = 1.1 * max([1.0, float(budget or 0), *data["bytes"]])


#: page key -> (panel, title): ``/individual-daskhpc-spgemm``
PANELS = {"spgemm": (BatchProgress, "SpGEMM batches")}
