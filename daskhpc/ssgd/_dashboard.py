"""The SSGD strata timeline panel of the daskhpc dashboard."""

from __future__ import annotations

import time

from bokeh.models import FactorRange
from bokeh.palettes import Category10_10
from daskhpc._dask_internals import log_errors

from daskhpc.dashboard import Component, update_source, worker_label


class StrataTimeline(Component):
    """Sub-steps (strata, sub-epochs) per worker over time, from a strata-timeline source."""

    def __init__(self, scheduler, **kw):
        super().__init__(scheduler, **kw)
        self.source = self.empty_source("daskhpc-strata", "worker", "left", "right", "ms",
                                        "substep", "task", "epoch", "messages", "color")
        self.fig = self.figure("Strata timeline: sub-steps per worker (seconds)", [
            ("worker", "@worker"), ("epoch", "@epoch"), ("sub-step", "@substep"),
            ("task", "@task"), ("messages", "@messages"),
            ("start", "@left{0.000} s"), ("took", "@ms{0.00} ms")],
            tools="hover,xwheel_zoom,xpan,save,reset", y_range=FactorRange(),
            x_axis_label="seconds")
        # outlined in their own colour: a white outline hid sub-millisecond sweeps
        self.fig.hbar(y="worker", left="left", right="right", height=0.8, fill_color="color",
                      line_color="color", source=self.source)
        self.set_root("<i>No strata timeline yet (SSGD records one).</i>",
                      "daskhpc-strata-summary", self.fig)

    @log_errors
    def update(self) -> None:
        st = self.state
        if st is None:
            return
        # the scheduler's clock (``sent``, ``done``) where the row has it: the workers'
        # ``start``/``stop`` are shifted by its latency estimate (docs/ssgd.md)
        rows = [(r.get("sent", r.get("start")), r.get("done", r.get("stop")), r)
                for r in st.strata_rows() if r.get("worker")]
        rows = [x for x in rows if x[0] is not None]
        if not rows:
            return
        t0 = min(begin for begin, _, _ in rows)
        now = time.time()
        # a sweep can take 0.1 ms of a run of seconds: draw every bar at least 0.2 % of
        # the span wide, or it is no pixel at all (the hover gives the real duration)
        span = max((end if end is not None else now) for _, end, _ in rows) - t0
        data = {k: [] for k in self.source.data}
        for begin, end, r in rows:
            sub = r.get("substep", r.get("subepoch", 0))
            stop = (end if end is not None else now) - t0
            data["worker"].append(worker_label(self.scheduler, r["worker"]))
            data["left"].append(begin - t0)
            data["right"].append(max(stop, begin - t0 + 0.002 * span))
            data["ms"].append(1e3 * (stop - (begin - t0)))
            data["substep"].append(str(sub))
            data["task"].append(str(r.get("task", r.get("key", ""))))
            data["epoch"].append(str(r.get("epoch", "")))
            data["messages"].append(str(r.get("messages", "")))
            data["color"].append(Category10_10[int(sub) % 10] if str(sub).isdigit()
                                 else Category10_10[hash(sub) % 10])
        data["total"] = [len(rows)] * len(rows)
        workers = sorted(set(data["worker"]), key=lambda s: (len(s), s))
        self.fig.y_range.factors = workers
        update_source(self.source, data)
        subs = len(set(data["substep"]))
        self.summary.text = (f"<b>strata timeline</b>: {len(rows):,} steps on {len(workers)} "
                             f"workers, {subs} sub-steps, {span:.2f} s" + shown_text(st))


def shown_text(state) -> str:
    """What of the run the timeline shows when not every row (past the state's row limit),
    e.g. "; every 4th epoch shown (0, 4, 8, ...) of a run of 88.80 s"."""
    thin = state.strata_thinning()
    first, last = thin["span"]
    whole = f" of a run of {last - first:.2f} s" if first is not None and last is not None \
        else ""
    k = thin["stride"]
    if k > 1:
        nth = {2: "2nd", 3: "3rd"}.get(k, f"{k}th")
        return (f"; every {nth} epoch shown (0, {k}, {2 * k}, ...: over {thin['limit']:,} rows)"
                f"{whole}")
    if thin["dropped"]:
        return f"; the latest {thin['limit']:,} steps shown ({thin['dropped']:,} older ones dropped)" \
            f"{whole}"
    return ""


#: page key -> (panel, title): ``/individual-daskhpc-strata``
PANELS = {"strata": (StrataTimeline, "strata timeline")}
