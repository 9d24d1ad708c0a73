"""A graph given as a PyTorch Geometric ``Data`` object, duck-typed (torch is not
imported), mapped onto what a Planetoid npz gives.

Row i of A lists ``edge_index[0]`` where ``edge_index[1] == i`` (PyG's
``source_to_target`` flow; only the pattern counts). Without ``x`` or ``y`` ``_data``
draws seeded node data; without masks the split is ``class_split`` over labeled nodes."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from daskhpc.datasets import class_split
from daskhpc.errors import InputError

MASKS = (("train", "train_mask"), ("val", "val_mask"), ("test", "test_mask"))


def is_pyg_data(obj) -> bool:
    """Whether ``obj`` looks like a ``torch_geometric.data.Data`` (has ``edge_index``)."""
    if isinstance(obj, (str, bytes)) or sp.issparse(obj):
        return False
    try:
        return getattr(obj, "edge_index", None) is not None
    except Exception:           # a property that raises: not a graph we can read
        return False


def _array(t, what: str):
    """A tensor or array as numpy, a sparse tensor as scipy CSR; None stays None."""
    if t is None:
        return None
    try:
        if getattr(t, "is_sparse", False):                  # torch COO
            t = t.detach().coalesce()
            idx, val = _array(t.indices(), what), _array(t.values(), what)
            return sp.csr_array((val, (idx[0], idx[1])), shape=tuple(t.shape))
        if getattr(t, "is_sparse_csr", False):              # torch CSR
            t = t.detach()
            return sp.csr_array((_array(t.values(), what), _array(t.col_indices(), what),
                                 _array(t.crow_indices(), what)), shape=tuple(t.shape))
        if hasattr(t, "detach"):
            t = t.detach()
        if hasattr(t, "cpu"):
            t = t.cpu()
        if hasattr(t, "numpy"):
            t = t.numpy()
        return np.asarray(t)
    except (TypeError, ValueError, RuntimeError) as e:
        raise InputError(f"the Data's {what}: cannot read it as an array ({e})") from None


def _num_nodes(data, x, y, ei) -> int:
    for a in (x, y):
        if a is not None and a.ndim >= 1:
            return int(a.shape[0])
    n = getattr(data, "num_nodes", None)
    if n is not None:
        return int(n)
    return int(ei.max()) + 1 if ei.size else 0


def _masks(data, n):
    """(train, val, test) bool arrays, or None when the Data has no mask at all."""
    got = {name: _array(getattr(data, attr, None), attr) for name, attr in MASKS}
    if all(m is None for m in got.values()):
        return None
    out = []
    for (name, attr) in MASKS:
        m = got[name]
        if m is None:
            out.append(np.zeros(n, bool))
            continue
        if m.ndim == 2 and m.shape[0] == n:
            raise InputError(f"the Data's {attr} has shape {tuple(m.shape)}: one column per "
                             f"split; pass one (data.{attr} = data.{attr}[:, 0])")
        if m.dtype != bool or m.shape != (n,):
            raise InputError(f"the Data's {attr} must be a bool tensor of {n} entries (one "
                             f"per node), got {m.dtype} of shape {tuple(m.shape)}")
        out.append(m)
    return tuple(out)


def _labeled_split(y, seed: int):
    """The split of a Data without masks: ``class_split`` over the labeled nodes."""
    yf = y.astype(np.float64)
    lab = np.flatnonzero(~np.isnan(yf) & (yf >= 0))
    return tuple(lab[s] for s in class_split(y[lab], 20, min(500, lab.size // 4),
                                             min(1000, lab.size // 2), seed=seed))


def from_pyg(data, seed: int = 0):
    """(adjacency, features or None, labels or None, split or None, source) of a PyG ``Data``."""
    ei = _array(data.edge_index, "edge_index")
    if sp.issparse(ei) or ei.ndim != 2 or ei.shape[0] != 2 or \
            (ei.size and not np.issubdtype(ei.dtype, np.integer)):
        raise InputError(f"the Data's edge_index must be 2 x E node ids (integers), got "
                         f"{getattr(ei, 'dtype', '?')} of shape {tuple(ei.shape)}")
    x = _array(getattr(data, "x", None), "x")
    y = _array(getattr(data, "y", None), "y")
    if y is not None and y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]                                        # OGB: N x 1
    if y is not None and y.ndim != 1:
        raise InputError(f"the Data's y has shape {tuple(y.shape)}: one label per node "
                         "(N, or N x 1) is needed (multi-label targets are not supported)")
    n = _num_nodes(data, x, y, ei)
    ei = ei.astype(np.int64, copy=False)
    bad = np.flatnonzero((ei < 0) | (ei >= n)) if ei.size else np.zeros(0, np.int64)
    if bad.size:
        col = int(bad[0] % ei.shape[1])
        raise InputError(f"the Data's edge_index column {col} names node "
                         f"{int(ei.flat[bad[0]])}, outside [0, {n}) ({n} nodes)")
    A = sp.csr_array((np.ones(ei.shape[1]), (ei[1], ei[0])), shape=(n, n))
    src = {"name": "pyg", "pyg": {"nodes": n, "edges": int(ei.shape[1]),
                                  "x": x is not None}}
    if x is not None and not sp.issparse(x):
        if x.ndim != 2:
            raise InputError(f"the Data's x must be N x F, got shape {tuple(x.shape)}")
        x = sp.csr_array(x)       # the nonzeros, without a dense float64 copy
    if y is None:                 # structure only: _data draws the node data
        src["pyg"]["split"] = "drawn"
        return A, x, None, None, src
    split = _masks(data, n)
    src["pyg"]["split"] = "masks" if split is not None else "class_split"
    if split is None:
        split = _labeled_split(y, seed)
    return A, x, y, split, src
