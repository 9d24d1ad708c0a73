"""What ``fit`` returns: factors, per-epoch history, plan vs measured bytes, the report.

:class:`SSGDResult` prints as a table (``repr``), renders as HTML in notebooks
(``_repr_html_``), draws the loss curve with bokeh (``plot``), and gives the JSON
report of ../shared/CLI.md (``report``).

Examples
--------
>>> r = SSGDResult(W=None, H=None, history=[{"epoch": 0, "lr": 0.02, "train_loss": 5.0,
...                "time_s": 0.01, "planned_bytes": 1024, "measured_bytes": 1315}],
...                info={"strategy": "hc", "parts": 2})
>>> print(r)                                                      # doctest: +ELLIPSIS
SSGDResult(strategy=hc, parts=2)
epoch  lr      train loss  time ms  planned B  measured B
    0  0.0200  5.00000        10.0       1024        1315
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field

import numpy as np

__all__ = ["SSGDResult"]

_COLUMNS = [("epoch", "epoch", "{:>6d}"), ("lr", "lr", "{:<7.4f}"),
            ("train_loss", "train loss", "{:<#.6g}"), ("test_rmse", "test RMSE", "{:<9.4f}"),
            ("time_s", "time ms", "{:>8.1f}"), ("planned_bytes", "planned B", "{:>10d}"),
            ("measured_bytes", "measured B", "{:>11d}")]


@dataclass(eq=False)
class SSGDResult:
    """Outcome of an SSGD run.

    Attributes
    ----------
    W, H : numpy.ndarray
        The factors (N x F users, M x F items): rating (i, j) ~ W[i] @ H[j].
    history : list of dict
        Per epoch: ``epoch``, ``lr``, ``train_loss`` (running objective of the sweep),
        ``test_rmse`` (exact, after the epoch; where evaluated), ``time_s``, and for
        distributed runs ``planned_bytes`` / ``measured_bytes`` of that epoch's sends.
    info : dict
        The JSON report's sections (see :meth:`report`).
    timeline : list of dict, optional
        Steps as the stratum-order plugin recorded them.
    """

    W: np.ndarray | None
    H: np.ndarray | None
    history: list = field(default_factory=list)
    info: dict = field(default_factory=dict)
    timeline: list | None = None

    # -- numbers ----------------------------------------------------------------------
    @property
    def train_loss(self) -> list[float]:
        return [h["train_loss"] for h in self.history]

    @property
    def test_rmse(self) -> list[float]:
        return [h["test_rmse"] for h in self.history if "test_rmse" in h]

    @property
    def epoch_times(self) -> list[float]:
        return [h["time_s"] for h in self.history]

    def predict(self, rows, cols) -> np.ndarray:
        """Predicted ratings W[rows] . H[cols]."""
        return np.einsum("if,if->i", self.W[np.asarray(rows)], self.H[np.asarray(cols)])

    def report(self) -> dict:
        """The JSON report (../shared/CLI.md), ready for ``daskhpc.report.write_report``."""
        from daskhpc.report import new_report

        info = dict(self.info)
        return new_report("ssgd", command=info.pop("command", None), **info)

    # -- display -----------------------------------------------------------------------
    def _fmt(self, h: dict, col) -> str:
        key, _, fmt = col
        v = h.get(key)
        if v is None:
            return ""
        if key == "time_s":
            v = 1000.0 * v
        return fmt.format(int(v) if fmt.endswith("d}") else float(v)).strip()

    def _table(self) -> tuple[list, list[list[str]]]:
        cols = [c for c in _COLUMNS if any(c[0] in h for h in self.history)]
        return cols, [[self._fmt(h, c) for c in cols] for h in self.history]

    def __repr__(self) -> str:
        head = ", ".join(f"{k}={self.info[k]}" for k in ("strategy", "parts", "rank", "epochs")
                         if k in self.info)
        cols, rows = self._table()
        widths = [max([len(c[1])] + [len(r[i]) for r in rows]) for i, c in enumerate(cols)]

        def line(cells):
            return "  ".join(x.rjust(w) if c[2].startswith("{:>") else x.ljust(w)
                            for x, w, c in zip(cells, widths, cols)).rstrip()

        lines = [f"SSGDResult({head})", line([c[1] for c in cols])]
        lines += [line(r) for r in rows]
        q = self.info.get("quality", {})
        if "final_test_rmse" in q and "global_mean_rmse" in q:
            lines.append(f"final test RMSE {q['final_test_rmse']:.4f} vs global mean "
                         f"{q['global_mean_rmse']:.4f}")
        rec = self.info.get("recovery") or {}
        if rec.get("resumed_from_epoch") is not None:
            lines.append(f"resumed from the checkpoint after epoch {rec['resumed_from_epoch']}"
                         " (earlier rows from the checkpoint)")
        for r in rec.get("recoveries", []):
            lines.append(f"lost {', '.join(r['lost'])} after {r['after_s']:.1f} s; "
                         f"restarted from epoch {r['restart_epoch']}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        cols, rows = self._table()
        head = "".join(f"<th>{html.escape(t)}</th>" for _, t, _ in cols)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(x)}</td>" for x in r) + "</tr>"
                       for r in rows)
        title = html.escape(repr(self).splitlines()[0])
        return (f"<div><b>{title}</b><table><thead><tr>{head}</tr></thead>"
                f"<tbody>{body}</tbody></table></div>")

    def plot(self):
        """The training loss (and test RMSE, right axis) per epoch as a bokeh figure.

        Returns
        -------
        bokeh.plotting.figure
            Show it with ``bokeh.plotting.show(fig)`` (or ``bokeh.io.output_notebook()``
            first in Jupyter).
        """
        from bokeh.models import LinearAxis, Range1d
        from bokeh.plotting import figure

        ep = [h["epoch"] for h in self.history]
        fig = figure(title="SSGD", x_axis_label="epoch", y_axis_label="training loss",
                     width=600, height=350)
        fig.line(ep, self.train_loss, legend_label="training loss", line_width=2)
        rm = [(h["epoch"], h["test_rmse"]) for h in self.history if "test_rmse" in h]
        if rm:
            xs, ys = zip(*rm)
            lo, hi = min(ys), max(ys)
            pad = 0.05 * (hi - lo or 1.0)
            fig.extra_y_ranges = {"rmse": Range1d(lo - pad, hi + pad)}
            fig.add_layout(LinearAxis(y_range_name="rmse", axis_label="test RMSE"), "right")
            fig.line(list(xs), list(ys), y_range_name="rmse", color="firebrick",
                     legend_label="test RMSE", line_width=2)
        return fig
