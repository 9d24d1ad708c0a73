"""The allreduce panel of the daskhpc dashboard: bytes per stage and time per call."""

from __future__ import annotations

from bokeh.models import FactorRange
from daskhpc._dask_internals import log_errors

from daskhpc.dashboard import EMPTY, Component, format_bytes, update_source


class AllreduceStages(Component):
    """Planned payload bytes per stage (sum over ranks) and milliseconds per call."""

    def __init__(self, scheduler, **kw):
        super().__init__(scheduler, **kw)
        self.stage_source = self.empty_source("daskhpc-allreduce-stages", "stage", "bytes")
        self.stages = self.figure("Bytes per stage (all ranks)", [("stage", "@stage"),
                                                                  ("bytes", "@bytes{0,0}")],
                                  x_range=FactorRange(), y_axis_label="bytes")
        self.stages.vbar(x="stage", top="bytes", width=0.8, source=self.stage_source)
        self.call_source = self.empty_source("daskhpc-allreduce-calls", "call", "ms", "measured")
        self.calls = self.figure("Time per call (ms)", [("call", "@call"), ("ms", "@ms{0.0}"),
                                                        ("measured bytes", "@measured{0,0}")],
                                 x_axis_label="call", y_axis_label="ms")
        self.calls.line(x="call", y="ms", source=self.call_source)
        self.calls.scatter(x="call", y="ms", source=self.call_source, size=6)
        self.set_root(EMPTY, "daskhpc-allreduce-summary", self.stages, self.calls)

    @log_errors
    def update(self) -> None:
        rows = self.rows("allreduce", "stage_bytes")
        if self.cleared(rows, self.stage_source, self.call_source):
            return
        last = rows[-1]
        labels = [f"{i}" for i in range(len(last["stage_bytes"]))]
        self.stages.x_range.factors = labels
        update_source(self.stage_source, {"stage": labels,
                                          "bytes": list(last["stage_bytes"]),
                                          "total": [len(labels)] * len(labels)})
        update_source(self.call_source, {
            "call": [r.get("call", r.get("unit", i)) for i, r in enumerate(rows)],
            "ms": [1e3 * r.get("time_s", 0.0) for r in rows],
            "measured": [r.get("measured_bytes", 0) for r in rows],
            "total": [len(rows)] * len(rows)})
        times = sorted(r.get("time_s", 0.0) for r in rows)
        self.summary.text = (
            f"<b>allreduce</b> {last.get('algorithm', '')}: {len(rows)} calls, median "
            f"{1e3 * times[len(times) // 2]:.1f} ms, "
            f"{format_bytes(sum(last['stage_bytes']))} per call in "
            f"{len(last['stage_bytes'])} stages")


#: page key -> (panel, title): ``/individual-daskhpc-allreduce``
PANELS = {"allreduce": (AllreduceStages, "allreduce stages")}
