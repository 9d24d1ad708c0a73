"""What ``fit`` and ``serial_fit`` return: weights, predictions, history, report.

Examples
--------
>>> r = GCNResult(params=[], predictions=None, history=[{"epoch": 0, "train_loss": 1.9,
...               "val_acc": 0.3, "test_acc": 0.31, "time_s": 0.004}], info={"parts": 1})
>>> print(r)
GCNResult(parts=1)
epoch  train loss  val acc  test acc  time ms
    0  1.90000     0.3000   0.3100        4.0
"""

from __future__ import annotations

from daskhpc.report import WorkflowResult

__all__ = ["GCNResult"]


class GCNResult(WorkflowResult):
    """Outcome of a GCN training run.

    Attributes
    ----------
    params : list of numpy.ndarray
        ``[W^1, b^1, ..., W^L, b^L]`` after the last epoch (b^k empty without bias).
    predictions : numpy.ndarray
        Class of every node by the final weights (no dropout).
    logits : numpy.ndarray
        n x classes outputs of the last layer.
    history : list of dict
        Per epoch: ``train_loss`` (the dropout pass), and on evaluated epochs
        ``{train,val,test}_acc``, ``val_loss``, ``test_loss``, ``train_eval_loss`` (weights
        at the start of the epoch, no dropout); ``time_s``; the last row adds
        ``final_*`` (weights after the last epoch).
    info : dict
        The report sections.
    """

    workflow = "gcn"
    COLUMNS = (("epoch", "epoch", "{:>6d}"), ("train_loss", "train loss", "{:<#.6g}"),
               ("train_acc", "train acc", "{:<7.4f}"), ("val_acc", "val acc", "{:<7.4f}"),
               ("test_acc", "test acc", "{:<7.4f}"), ("time_s", "time ms", "{:>8.1f}"),
               ("planned_bytes", "planned B", "{:>10d}"),
               ("measured_bytes", "measured B", "{:>11d}"))
    PLOT = (("train_acc", "val_acc", "test_acc"), ("train_loss",))
    TITLE = ("graph", "parts", "partition_method", "epochs")

    def __init__(self, params=None, predictions=None, history=None, info=None, logits=None):
        super().__init__(info, history)
        self.params = params
        self.predictions = predictions
        self.logits = logits

    @property
    def test_accuracy(self) -> float | None:
        """Test accuracy of the final weights."""
        return self.info.get("quality", {}).get("final_test_acc")

    def _notes(self) -> list[str]:
        q = self.info.get("quality", {})
        out = []
        if "final_test_acc" in q:
            out.append(f"final: train acc {q.get('final_train_acc', float('nan')):.4f}, "
                       f"val acc {q.get('final_val_acc', float('nan')):.4f}, "
                       f"test acc {q['final_test_acc']:.4f}")
        return out + super()._notes()
