"""The GCN panel of the daskhpc dashboard: accuracy per split and the training loss per
epoch, from the history rows the frame publishes (topic ``history``)."""

from __future__ import annotations

from bokeh.models import HoverTool
from daskhpc._dask_internals import log_errors

from daskhpc.dashboard import Component, update_source

SPLITS = (("train_acc", "train", "navy"), ("val_acc", "validation", "darkorange"),
          ("test_acc", "test", "firebrick"))
KEYS = ("epoch", "train_acc", "val_acc", "test_acc", "train_loss", "val_loss", "time_ms")


def curves(state) -> dict:
    """The columns the panel draws from the current GCN run's history (NaN: not evaluated)."""
    nan = float("nan")
    out: dict = {k: [] for k in KEYS}
    if state is None or state.run.get("workflow") != "gcn":
        return out
    for r in state.history:
        out["epoch"].append(int(r.get("epoch", r.get("unit", len(out["epoch"])))))
        for k in KEYS[1:-1]:
            v = r.get(k)
            out[k].append(float(v) if v is not None else nan)
        t = r.get("time_s")
        out["time_ms"].append(1000.0 * t if t is not None else nan)
    return out


class AccuracyCurve(Component):
    """Accuracy per split and the training loss per epoch of the current GCN run."""

    def __init__(self, scheduler, **kw):
        super().__init__(scheduler, **kw)
        self.source = self.empty_source("daskhpc-gcn", *KEYS)
        tools = "xwheel_zoom,xpan,save,reset"
        self.acc = self.figure("GCN accuracy (no dropout, weights at the epoch's start)",
                               x_axis_label="epoch", y_axis_label="accuracy", tools=tools)
        for key, label, color in SPLITS:
            self.acc.line("epoch", key, source=self.source, legend_label=label,
                          line_width=2, color=color)
        self.acc.legend.location = "bottom_right"
        self.loss = self.figure("training loss (dropout pass) per epoch",
                                x_axis_label="epoch", y_axis_label="loss", tools=tools)
        self.loss.line("epoch", "train_loss", source=self.source, line_width=2,
                       color="black", legend_label="train")
        self.loss.line("epoch", "val_loss", source=self.source, line_width=2,
                       color="darkorange", legend_label="validation")
        for fig in (self.acc, self.loss):
            fig.add_tools(HoverTool(tooltips=[("epoch", "@epoch"), ("train", "@train_acc"),
                                              ("val", "@val_acc"), ("test", "@test_acc"),
                                              ("loss", "@train_loss"),
                                              ("time", "@time_ms{0.0} ms")]))
        self.set_root("<i>No GCN run yet.</i>", "daskhpc-gcn-summary", self.acc, self.loss)

    @log_errors
    def update(self) -> None:
        data = curves(self.state)
        if not data["epoch"]:
            return
        n = len(data["epoch"])
        update_source(self.source, {**data, "total": [n] * n})
        last = {k: data[k][-1] for k in KEYS}
        ev = [i for i in range(n) if data["val_acc"][i] == data["val_acc"][i]]
        text = f"<b>GCN</b>: {n} epochs, training loss {last['train_loss']:.4f}"
        if ev:
            i = ev[-1]
            text += (f"; epoch {data['epoch'][i]}: validation accuracy "
                     f"{data['val_acc'][i]:.4f}, test {data['test_acc'][i]:.4f}")
        self.summary.text = text


#: page key -> (panel, title): ``/individual-daskhpc-gcn``
PANELS = {"gcn": (AccuracyCurve, "GCN accuracy")}
