"""The linear-classifier panel of the daskhpc dashboard (named by its
Workflow's ``dashboard``): train and test accuracy per epoch, and the bytes the
parts' allreduces sent, from the run's history rows (topic ``history``).
"""

from __future__ import annotations

from bokeh.layouts import column, row
from bokeh.models import ColumnDataSource, Div, HoverTool
from bokeh.palettes import Category10_10
from bokeh.plotting import figure
from distributed.utils import log_errors

from daskhpc.dashboard import EMPTY, Component, format_bytes, update_source

__all__ = ["AccuracyCurve", "PANELS"]


class AccuracyCurve(Component):
    """Accuracy (train, test) per epoch and allreduce bytes per epoch."""

    def __init__(self, scheduler, **kw):
        super().__init__(scheduler, **kw)
        self.source = ColumnDataSource({"epoch": [], "train": [], "test": [], "sent": [],
                                        "total": []}, name="daskhpc-linear-accuracy")
        self.acc = figure(title="Accuracy per epoch", tools="hover,save,reset",
                          toolbar_location="above", x_axis_label="epoch",
                          y_axis_label="accuracy", **self.sizing)
        for key, color in (("train", Category10_10[0]), ("test", Category10_10[1])):
            self.acc.line(x="epoch", y=key, source=self.source, color=color, legend_label=key)
            self.acc.scatter(x="epoch", y=key, source=self.source, color=color, size=6)
        self.acc.legend.location = "bottom_right"
        self.acc.select_one(HoverTool).tooltips = [("epoch", "@epoch"),
                                                   ("train", "@train{0.0000}"),
                                                   ("test", "@test{0.0000}")]
        self.bytes = figure(title="Allreduce bytes sent per epoch (all parts)",
                            tools="hover,save,reset", toolbar_location="above",
                            x_axis_label="epoch", y_axis_label="bytes", **self.sizing)
        self.bytes.vbar(x="epoch", top="sent", width=0.8, source=self.source)
        self.summary = Div(text=EMPTY, name="daskhpc-linear-summary")
        self.root = column(self.summary, row(self.acc, self.bytes, **self.layout),
                           **self.layout)

    @log_errors
    def update(self) -> None:
        st = self.state
        if st is None:
            return
        if st.run.get("workflow") != "linear":         # another workflow's run: show nothing
            st = None
        rows = [r for r in st.history if "train_accuracy" in r] if st is not None else []
        if not rows:
            update_source(self.source, {k: [] for k in self.source.data})
            return
        nan = float("nan")
        update_source(self.source, {
            "epoch": [r.get("epoch", r.get("unit")) for r in rows],
            "train": [r["train_accuracy"] for r in rows],
            "test": [r.get("test_accuracy", nan) for r in rows],
            "sent": [r.get("sent_bytes", 0) for r in rows],
            "total": [len(rows)] * len(rows)})
        last = rows[-1]
        test = f", test {last['test_accuracy']:.4f}" if "test_accuracy" in last else ""
        self.summary.text = (f"<b>linear</b>: epoch {last.get('epoch')}: train "
                             f"{last['train_accuracy']:.4f}{test}, "
                             f"{format_bytes(last.get('sent_bytes', 0))} sent")


#: page key -> (panel, title): ``/individual-daskhpc-linear``
PANELS = {"linear": (AccuracyCurve, "linear accuracy")}
