"""What ``fit`` returns: factors, per-epoch history, plan vs measured bytes, the report.

:class:`SSGDResult` is a :class:`daskhpc.report.WorkflowResult`: it prints as a table
(``repr``), renders as HTML in notebooks, draws the loss and test RMSE with bokeh
(``plot``) and gives the full JSON report of docs/cli.md (``report``).

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

import numpy as np

from daskhpc.report import WorkflowResult

__all__ = ["SSGDResult"]


class SSGDResult(WorkflowResult):
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

    workflow = "ssgd"
    SAVED = ("W", "H")
    COLUMNS = (("epoch", "epoch", "{:>6d}"), ("lr", "lr", "{:<7.4f}"),
               ("train_loss", "train loss", "{:<#.6g}"), ("test_rmse", "test RMSE", "{:<9.4f}"),
               ("time_s", "time ms", "{:>8.1f}"), ("planned_bytes", "planned B", "{:>10d}"),
               ("measured_bytes", "measured B", "{:>11d}"))
    PLOT = (("train_loss",), ("test_rmse",))
    TITLE = ("strategy", "parts", "rank", "epochs")

    def __init__(self, W=None, H=None, history=None, info=None, timeline=None):
        super().__init__(info, history)
        self.W, self.H, self.timeline = W, H, timeline

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

    def _notes(self) -> list[str]:
        q = self.info.get("quality", {})
        out = []
        if "final_test_rmse" in q and "global_mean_rmse" in q:
            out.append(f"final test RMSE {q['final_test_rmse']:.4f} vs global mean "
                       f"{q['global_mean_rmse']:.4f}")
        return out + super()._notes()
