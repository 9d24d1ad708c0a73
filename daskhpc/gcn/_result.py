"""What ``fit`` and ``serial_fit`` return: weights, predictions, history, report."""

from __future__ import annotations

import numpy as np

from daskhpc.errors import InputError
from daskhpc.report import WorkflowResult

from ._data import as_graph
from ._model import Csr, features
from ._serial import evaluate


class GCNResult(WorkflowResult):
    """Outcome of a GCN training run: prints as a table, plots, gives the JSON report.

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
        ``{train,val,test}_acc`` and losses (no dropout); ``time_s``; the last row adds
        ``final_*`` (weights after the last epoch).
    info : dict
        The report sections.

    Examples
    --------
    >>> r = GCNResult(params=[], predictions=None, history=[{"epoch": 0, "train_loss": 1.9,
    ...               "val_acc": 0.3, "test_acc": 0.31, "time_s": 0.004}], info={"parts": 1})
    >>> print(r)
    GCNResult(parts=1)
    epoch  train loss  val acc  test acc  time ms
        0  1.90000     0.3000   0.3100        4.0
    """

    workflow = "gcn"
    SAVED = ("params", "predictions", "logits")
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

    def to_pyg_state_dict(self, prefix: str = "conv") -> dict:
        """The weights by the names of PyG's GCN example model (``GCNConv`` layers ``conv1`` ...
        ``convL``): ``convK.lin.weight`` is W^K transposed, ``convK.bias`` is b^K; numpy
        arrays for ``model.load_state_dict``.

        Examples
        --------
        >>> r = GCNResult(params=[np.ones((3, 2)), np.zeros(2), np.ones((2, 4)), np.zeros(0)])
        >>> {k: v.shape for k, v in r.to_pyg_state_dict().items()}
        {'conv1.lin.weight': (2, 3), 'conv1.bias': (2,), 'conv2.lin.weight': (4, 2)}
        """
        out = {}
        for k in range(len(self.params) // 2):
            W, b = self.params[2 * k], self.params[2 * k + 1]
            out[f"{prefix}{k + 1}.lin.weight"] = np.ascontiguousarray(np.asarray(W).T)
            if np.asarray(b).size:
                out[f"{prefix}{k + 1}.bias"] = np.asarray(b).copy()
        return out

    def _notes(self) -> list[str]:
        q = self.info.get("quality", {})
        out = [RANDOM_CAVEAT] if random_caveat(self.info) else []
        if "final_test_acc" in q:
            out.append(f"final: train acc {q.get('final_train_acc', float('nan')):.4f}, "
                       f"val acc {q.get('final_val_acc', float('nan')):.4f}, "
                       f"test acc {q['final_test_acc']:.4f}")
        return out + super()._notes()


#: What every accuracy of a run on drawn node data carries.
RANDOM_CAVEAT = "random node data: the accuracies are not a measure of anything"


def random_caveat(report: dict) -> str:
    """``"; " + RANDOM_CAVEAT`` for a report whose labels were drawn, else ``""``."""
    inp = report.get("input")
    return f"; {RANDOM_CAVEAT}" if isinstance(inp, dict) and inp.get("random_node_data") \
        else ""


def sections(s, command=None, partitioned: bool = True) -> dict:
    """Report sections shared by ``plan``, ``serial_fit`` and ``fit``."""
    o, a, g = s.options, s.assignment, s.graph
    out = {"command": command,
           "input": {**g.source, "shape": [g.n, g.n], "nnz": int(g.A.nnz)},
           "graph": g.name, "parts": s.K, "seed": o.seed, "epochs": o.epochs,
           "layers": list(s.dims), "order": o.order, "optimizer": o.optimizer,
           "symmetrize": o.symmetrize, "dtype": o.dtype}
    if partitioned:
        out.update(partition_method=a.method, partitioner=a.partitioner,
                   objective={"hp": "km1", "gp": "cut"}.get(a.method), partition=dict(a.report))
    out["timing"] = {k: round(v, 6) for k, v in s.timing.items()}
    return out


def best_val(history) -> dict:
    """PyG's example's model selection: the test accuracy at the best validation accuracy."""
    ev = [h for h in history if "val_acc" in h and "test_acc" in h]
    if not ev:
        return {}
    best = max(ev, key=lambda h: h["val_acc"])
    return {"best_val_acc": best["val_acc"], "best_val_epoch": best["epoch"],
            "test_acc_at_best_val": best["test_acc"]}


def quality(s, history, final) -> dict:
    """The report's ``quality`` section: per-epoch numbers, final ones, :func:`best_val`."""
    q = {"train_loss": [h["train_loss"] for h in history]}
    for key in ("val_acc", "test_acc"):
        vals = [h[key] for h in history if key in h]
        if vals:
            q[key] = vals
    q.update(final)
    q.update(best_val(history))
    q["counts"] = {k: int(np.count_nonzero(v)) for k, v in s.graph.masks.items()}
    return q


def predict_file(result: GCNResult, source) -> dict:
    """``daskhpc predict DIR GRAPH``: the saved weights' class of every node of a graph (read
    as ``run gcn`` reads it) and each split's accuracy, by the serial reference's forward
    pass (the run's final accuracies, bit for bit, on its own graph)."""
    rep = result.info
    rnd = (rep.get("input") or {}).get("random_node_data") or {}
    g = as_graph(str(source), symmetrize=bool(rep.get("symmetrize", False)),
                 seed=int(rnd.get("seed", rep.get("seed", 0))),
                 random_features=int(rnd.get("features", 64)),
                 random_classes=int(rnd.get("classes", 8)))
    W = result.params[0::2]
    if g.X.shape[1] != W[0].shape[0]:
        raise InputError(f"{source}: {g.X.shape[1]} node features, the model takes "
                         f"{W[0].shape[0]}")
    order = rep.get("order", "auto")
    transform = tuple(order == "transform" or (order == "auto" and w.shape[1] < w.shape[0])
                      for w in W)
    dt = np.asarray(result.params[0]).dtype        # the run's dtype (float64 or float32)
    Z, _ = evaluate(Csr.of(g.A, dt), features(g.X, dt), result.params, transform, g.y, g.masks,
                    int(g.masks["train"].sum()))
    pred = np.argmax(Z, axis=1)
    quality = {f"{split}_acc": float(np.mean(pred[m] == g.y[m]))
               for split, m in g.masks.items() if m.any()}
    return {"columns": {"node": np.arange(g.n), "label": g.y, "prediction": pred},
            "quality": quality}
