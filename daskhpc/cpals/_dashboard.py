"""The CP-ALS panel of the daskhpc dashboard (``/individual-daskhpc-cpals-fit``): the fit
and time of every iteration, live, from the history rows the frame publishes."""

from __future__ import annotations

import math

from bokeh.models import DataRange1d, LinearAxis
from daskhpc._dask_internals import log_errors

from daskhpc.dashboard import Component, update_source

EMPTY = "<i>No CP-ALS run yet (daskhpc run cpals, or dh.cpals.fit).</i>"


def fit_rows(run: dict, history: list) -> dict:
    """The panel's columns (iteration, fit, ms) of the current run, if it is a CP-ALS one."""
    data = {"iteration": [], "fit": [], "time_ms": [], "total": []}
    if (run or {}).get("workflow") != "cpals":
        return data
    rows = sorted((r for r in history if "fit" in r),
                  key=lambda r: r.get("iteration", r.get("unit", 0)))
    for r in rows:
        data["iteration"].append(int(r.get("iteration", r.get("unit", 0))))
        data["fit"].append(float(r["fit"]))
        t = r.get("time_s")
        data["time_ms"].append(float("nan") if t is None else 1e3 * float(t))
    data["total"] = [len(rows)] * len(rows)
    return data


class FitCurve(Component):
    """Fit per iteration (left axis) and milliseconds per iteration (right axis)."""

    def __init__(self, scheduler, **kw):
        super().__init__(scheduler, **kw)
        self.source = self.empty_source("daskhpc-cpals-fit", "iteration", "fit", "time_ms")
        self.fig = self.figure("CP-ALS: fit per iteration", [
            ("iteration", "@iteration"), ("fit", "@fit{0.000000}"),
            ("time", "@time_ms{0.0} ms")], tools="hover,xwheel_zoom,xpan,save,reset",
            x_axis_label="iteration", y_axis_label="fit")
        self.fig.line("iteration", "fit", source=self.source, line_width=2, color="navy",
                      legend_label="fit")
        self.fig.scatter("iteration", "fit", source=self.source, size=5, color="navy")
        self.fig.extra_y_ranges = {"time": DataRange1d()}
        self.fig.add_layout(LinearAxis(y_range_name="time", axis_label="ms per iteration"),
                            "right")
        t = self.fig.scatter("iteration", "time_ms", source=self.source, y_range_name="time",
                             size=5, color="firebrick", marker="square",
                             legend_label="ms per iteration")
        self.fig.extra_y_ranges["time"].renderers = [t]
        self.fig.legend.location = "bottom_right"
        self.set_root(EMPTY, "daskhpc-cpals-summary", self.fig)

    @log_errors
    def update(self) -> None:
        st = self.state
        if st is None:
            return
        data = fit_rows(st.run, st.history)
        update_source(self.source, data)
        if not data["fit"]:
            self.summary.text = EMPTY
            return
        times = sorted(x for x in data["time_ms"] if not math.isnan(x))
        med = f", median {times[len(times) // 2]:.1f} ms per iteration" if times else ""
        self.summary.text = (f"<b>{st.run.get('name', 'cpals')}</b>: {len(data['fit'])} "
                             f"iterations, fit {data['fit'][-1]:.6f}{med}")


#: page key -> (panel, title): ``/individual-daskhpc-cpals-fit``
PANELS = {"cpals-fit": (FitCurve, "CP-ALS fit")}
