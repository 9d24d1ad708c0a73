"""What a CP-ALS checkpoint holds besides the frame's per-iteration part files: the
distribution, written once beside the manifest and read back on resume, so a resumed
run uses the same parts even where the partitioner is not deterministic."""

from __future__ import annotations

import os

import numpy as np

from daskhpc.errors import InputError

from ._assign import Distribution
from ._data import Tensor

DISTRIBUTION = "distribution.npz"


def write_distribution(d: Distribution, path: str) -> str:
    """Write ``d`` (grain, method, partitioner, owners per mode, nonzero parts) to ``path``."""
    from daskhpc.runtime import save_arrays

    arrays = {f"owners{m}": np.asarray(o, np.int64) for m, o in enumerate(d.owners)}
    if d.nnz_parts is not None:
        arrays["nnz_parts"] = np.asarray(d.nnz_parts, np.int64)
    return save_arrays(path, grain=np.array(d.grain), method=np.array(d.method),
                       partitioner=np.array(d.partitioner or ""),
                       nparts=np.array(d.nparts), **arrays)


def save_distribution(s, ck) -> None:
    """The checkpoint's ``opened`` hook: write the distribution once."""
    if not os.path.exists(ck.extra(DISTRIBUTION)):
        write_distribution(s.dist, ck.extra(DISTRIBUTION))


def load_distribution(path: str, X: Tensor, nparts: int) -> Distribution:
    """The distribution saved at ``path``, checked against the tensor and part count."""
    from daskhpc.runtime import load_arrays

    z = load_arrays(path)
    K = int(z["nparts"])
    if K != int(nparts):
        raise InputError(f"{path}: the checkpoint's run has {K} parts, not {nparts}; "
                         f"resume with --parts {K}")
    owners = [z[f"owners{m}"] for m in range(X.order) if f"owners{m}" in z]
    if [o.size for o in owners] != list(X.shape):
        raise InputError(f"{path}: the saved distribution does not fit a tensor of shape "
                         f"{X.shape}")
    d = Distribution(str(z["grain"]), str(z["method"]), K, owners,
                     nnz_parts=z.get("nnz_parts"), partitioner=str(z["partitioner"]) or None)
    d.meta["loaded_from"] = path
    return d
