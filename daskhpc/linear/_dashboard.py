"""The linear-classifier panel of the dashboard: accuracy and allreduce bytes per epoch."""

from __future__ import annotations

from bokeh.palettes import Category10_10

from daskhpc._dask_internals import log_errors

from daskhpc.dashboard import EMPTY, Component, format_bytes, update_source


class AccuracyCurve(Component):
    """Accuracy (train, test) per epoch and allreduce bytes per epoch."""

    def __init__(self, scheduler, **kw):
        super().__init__(scheduler, **kw)
        self.source = self.empty_source("daskhpc-linear-accuracy", "epoch", "train", "test", "sent")
        self.acc = self.figure("Accuracy per epoch", [("epoch", "@epoch"),
                                                      ("train", "@train{0.0000}"),
                                                      ("test", "@test{0.0000}")],
                               x_axis_label="epoch", y_axis_label="accuracy")
        for key, color in (("train", Category10_10[0]), ("test", Category10_10[1])):
            self.acc.line(x="epoch", y=key, source=self.source, color=color, legend_label=key)
            self.acc.scatter(x="epoch", y=key, source=self.source, color=color, size=6)
        self.acc.legend.location = "bottom_right"
        self.bytes = self.figure("Allreduce bytes sent per epoch (all parts)",
                                 x_axis_label="epoch", y_axis_label="bytes")
        self.bytes.vbar(x="epoch", top="sent", width=0.8, source=self.source)
        self.set_root(EMPTY, "daskhpc-linear-summary", self.acc, self.bytes)

    @log_errors
    def update(self) -> None:
        rows = self.rows("linear", "train_accuracy")
        if self.cleared(rows, self.source):
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
