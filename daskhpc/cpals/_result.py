"""What a CP-ALS run returns: lambda, the factors, the fit history and the report."""

from __future__ import annotations

import numpy as np

from daskhpc.io import read_tns
from daskhpc.report import WorkflowResult, history_column


class CPResult(WorkflowResult):
    """Outcome of a CP-ALS run: ``X ~ sum_r weights[r] * outer(factors[0][:, r], ...)``.

    Attributes
    ----------
    weights : numpy.ndarray (R,)
        lambda, the column norms of the last normalisation.
    factors : list of numpy.ndarray (I_n x R)
        Normalised factor matrices, one per mode.
    history : list of dict
        Per iteration: ``iteration``, ``fit``, ``time_s`` (and, for distributed runs,
        ``planned_bytes`` / ``measured_bytes``).
    info : dict
        The report's sections (:meth:`report`).

    Examples
    --------
    >>> r = CPResult(np.array([2.0]), [np.ones((2, 1)), np.ones((3, 1)), np.ones((2, 1))],
    ...              history=[{"iteration": 0, "fit": 0.5, "time_s": 0.002}],
    ...              info={"rank": 1, "parts": 2})
    >>> print(r)
    CPResult(parts=2, rank=1)
    iteration  fit       time ms
            0  0.500000      2.0
    >>> r.reconstruct([[0, 1], [2, 0], [1, 1]]).tolist()
    [2.0, 2.0]
    """

    workflow = "cpals"
    SAVED = ("weights", "factors")
    COLUMNS = (("iteration", "iteration", "{:>9d}"), ("fit", "fit", "{:<9.6f}"),
               ("time_s", "time ms", "{:>8.1f}"), ("planned_bytes", "planned B", "{:>10d}"),
               ("measured_bytes", "measured B", "{:>11d}"))
    PLOT = (("fit",), ())
    TITLE = ("grain", "partition_method", "parts", "rank")

    def __init__(self, weights, factors, history=None, info=None):
        super().__init__(info, history)
        self.weights = np.asarray(weights, dtype=np.float64)
        self.factors = [np.asarray(f, dtype=np.float64) for f in factors]

    @property
    def rank(self) -> int:
        return int(self.weights.size)

    fit = history_column("fit", "The fit after every iteration (Tensor Toolbox definition).")
    iteration_times = history_column("time_s", "Seconds per iteration.")

    def to_tensorly(self) -> tuple[np.ndarray, list[np.ndarray]]:
        """``(weights, factors)``: what ``tensorly.cp_tensor.CPTensor`` takes."""
        return self.weights.copy(), [f.copy() for f in self.factors]

    def to_splatt(self, directory) -> list[str]:
        """Write the model as ``splatt cpd`` does: ``mode1.mat`` ... ``modeN.mat`` (``%+0.8e``,
        a row per line) and ``lambda.mat``; returns the paths (9 significant digits: ``save``
        keeps the exact model).

        Examples
        --------
        >>> import tempfile
        >>> r = CPResult([2.0], [np.ones((2, 1)), np.full((3, 1), -0.5)])
        >>> d = tempfile.mkdtemp(); paths = r.to_splatt(d)
        >>> [p.rsplit("/", 1)[1] for p in paths], np.loadtxt(paths[1]).tolist()
        (['mode1.mat', 'mode2.mat', 'lambda.mat'], [-0.5, -0.5, -0.5])
        """
        import os

        os.makedirs(directory, exist_ok=True)
        paths = []
        for m, F in enumerate(self.factors, start=1):
            paths.append(os.path.join(directory, f"mode{m}.mat"))
            np.savetxt(paths[-1], F, fmt="%+0.8e", delimiter=" ")
        paths.append(os.path.join(directory, "lambda.mat"))
        np.savetxt(paths[-1], self.weights, fmt="%e")
        return paths

    def reconstruct(self, coords) -> np.ndarray:
        """Model values at coordinates ``coords`` (N x n, 0-based)."""
        coords = np.asarray(coords, dtype=np.int64)
        if coords.ndim != 2 or coords.shape[0] != len(self.factors):
            raise ValueError(f"coords must have shape ({len(self.factors)}, n), got "
                             f"{coords.shape}")
        prod = np.broadcast_to(self.weights, (coords.shape[1], self.rank)).copy()
        for m, F in enumerate(self.factors):
            prod *= F[coords[m]]
        return prod.sum(axis=1)

    def full(self) -> np.ndarray:
        """The dense model tensor (small shapes only)."""
        letters = "abcdefghijklmnopq"[:len(self.factors)]
        spec = ",".join(f"{c}r" for c in letters) + ",r->" + letters
        return np.einsum(spec, *self.factors, self.weights)


def predict_file(result: CPResult, path: str) -> dict:
    """``daskhpc predict DIR TENSOR.tns``: the model's value at every coordinate of a ``.tns``
    file, their RMSE, and the fit ``1 - ||X - M|| / ||X||`` to the file as the whole tensor
    (``||M||^2 = w^T (*_m A_m^T A_m) w``)."""
    shape = tuple(int(f.shape[0]) for f in result.factors)
    t = read_tns(path, shape=shape).tensor           # refuses coordinates beyond the model
    coords, x = t.coords.astype(np.int64), np.asarray(t.data, np.float64)
    m = result.reconstruct(coords)
    gram = np.ones((result.rank, result.rank))
    for F in result.factors:
        gram *= F.T @ F
    norm_m2 = float(result.weights @ gram @ result.weights)
    norm_x2 = float(x @ x)
    resid2 = max(norm_x2 - 2.0 * float(x @ m) + norm_m2, 0.0)
    fit = 1.0 - np.sqrt(resid2) / np.sqrt(norm_x2) if norm_x2 > 0 else float("nan")
    cols = {f"i{k + 1}": coords[k] + 1 for k in range(coords.shape[0])}  # 1-based, as .tns
    cols.update(value=x, model=m)
    return {"columns": cols,
            "quality": {"fit": float(fit), "rmse": float(np.sqrt(np.mean((x - m) ** 2)))}}
