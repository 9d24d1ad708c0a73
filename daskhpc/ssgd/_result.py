"""What ``fit`` returns: factors, per-epoch history, plan vs measured bytes, the report."""

from __future__ import annotations

import numpy as np

from daskhpc.errors import InputError
from daskhpc.report import WorkflowResult, history_column

#: ``recommend``'s default damping of an item's predicted lift by its training ratings
#: n_i: n_i / (n_i + SHRINK); Koren's lambda_2 of the baseline estimates (KDD 2008)
SHRINK = 25.0


class SSGDResult(WorkflowResult):
    """Outcome of an SSGD run: prints as a table, plots, gives the JSON report.

    Attributes
    ----------
    W, H : numpy.ndarray
        The factors (N x F users, M x F items): rating (i, j) ~ W[i] @ H[j], or with the
        biased model ~ mu + user_bias[i] + item_bias[j] + W[i] @ H[j].
    mu, user_bias, item_bias : float, numpy.ndarray or None
        The biased model's mean training rating, b_u (N) and b_i (M) (None: unbiased).
    history : list of dict
        Per epoch: ``epoch``, ``lr``, ``train_loss``, ``test_rmse`` (where evaluated),
        ``time_s``, and for distributed runs ``planned_bytes`` / ``measured_bytes``.
    info, timeline : dict, list of dict
        The JSON report's sections (:meth:`report`); the stratum-order plugin's steps.

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

    workflow = "ssgd"
    SAVED = ("W", "H", "row_ids", "col_ids", "seen", "clip", "mu", "user_bias", "item_bias")
    #: original ids of the rows (users) and columns (items) where the input named them
    #: (a ratings file, an edge list); None: rows and columns are indices
    row_ids = col_ids = None
    #: the training ratings' pattern (users x items), for ``recommend(exclude_seen=True)``
    seen = None
    #: (lowest, highest) training rating: predictions are clipped to it, as in training
    clip = None
    mu = user_bias = item_bias = None
    COLUMNS = (("epoch", "epoch", "{:>6d}"), ("lr", "lr", "{:<7.4f}"),
               ("train_loss", "train loss", "{:<#.6g}"), ("test_rmse", "test RMSE", "{:<9.4f}"),
               ("time_s", "time ms", "{:>8.1f}"), ("planned_bytes", "planned B", "{:>10d}"),
               ("measured_bytes", "measured B", "{:>11d}"))
    PLOT = (("train_loss",), ("test_rmse",))
    TITLE = ("strategy", "parts", "rank", "epochs")

    def __init__(self, W=None, H=None, history=None, info=None, timeline=None):
        super().__init__(info, history)
        self.W, self.H, self.timeline = W, H, timeline

    train_loss = history_column("train_loss", "The training loss of every epoch.")
    test_rmse = history_column("test_rmse", "The test RMSE of the epochs that measured it.")
    epoch_times = history_column("time_s", "Seconds per epoch.")

    @property
    def biased(self) -> bool:
        """Whether this is the biased model (mu + b_u + b_i + w_u . h_i)."""
        return self.user_bias is not None

    def predict(self, users, items) -> np.ndarray:
        """Predicted ratings of the pairs ``(users[k], items[k])``, clipped to the training range.

        Users and items are named by their original ids when the input had ids, by index
        otherwise; an unknown one is a KeyError.

        Examples
        --------
        >>> r = SSGDResult(np.eye(2), np.eye(2)); r.row_ids = np.array([10, 20])
        >>> r.predict([20, 10], [1, 0]).tolist()
        [1.0, 1.0]
        """
        return self._clip(self._scores(self.index(0, users), self.index(1, items)))

    def _scores(self, u: np.ndarray, i: np.ndarray) -> np.ndarray:
        """Unclipped predictions of row indices u and column indices i."""
        out = np.einsum("if,if->i", self.W[u], self.H[i])
        if self.biased:
            out = self.mu + self.user_bias[u] + self.item_bias[i] + out
        return out

    def _clip(self, out: np.ndarray) -> np.ndarray:
        return np.clip(out, *self.clip) if self.clip is not None else out

    def recommend(self, user, n: int = 10, exclude_seen: bool = True,
                  shrink: float = SHRINK) -> np.ndarray:
        """The ``n`` items of highest predicted rating for ``user`` (original id), best first.

        Parameters
        ----------
        user
            The user's original id (its index when the input had none).
        exclude_seen : bool
            Leave out the items the user rated in training.
        shrink : float
            Items rank by their predicted lift over the user's baseline (the mean prediction
            of the items the user rated) times n_i / (n_i + ``shrink``), n_i the item's
            training ratings (Koren's damping, lambda_2 = 25); 0 ranks by the prediction alone.

        Examples
        --------
        >>> import scipy.sparse as sp
        >>> r = SSGDResult(np.ones((42, 1)), np.array([[3.0], [4.0], [3.5], [2.0]]))
        >>> r.col_ids = np.array(["a", "b", "c", "d"])
        >>> r.seen = sp.csr_array([[1, 0, 0, 0], [1, 1, 1, 1]] + [[1, 0, 1, 0]] * 40)
        >>> r.recommend(0, 2, shrink=0).tolist()      # b: 4.0 from one rating, c: 3.5
        ['b', 'c']
        >>> r.recommend(0, 2).tolist()                # c: 3.5 from 41 ratings
        ['c', 'b']

        References
        ----------
        Y. Koren, "Factorization meets the neighborhood: a multifaceted collaborative
        filtering model", KDD 2008, Sec. 2.1 (the damped baseline estimates).
        """
        [u] = self.index(0, [user])
        scores = self.H @ self.W[u]
        if self.biased:
            scores = self.mu + self.user_bias[u] + self.item_bias + scores
        rated = (self.seen.indices[self.seen.indptr[u]:self.seen.indptr[u + 1]]
                 if self.seen is not None else np.array([], np.int64))
        base = float(scores[rated].mean()) if rated.size else \
            float(self.mu if self.mu is not None else scores.mean())
        scores = self.shrunk(scores, base, shrink)
        if exclude_seen:
            scores[rated] = -np.inf
        return self._best(scores, n)

    def item_counts(self) -> np.ndarray | None:
        """Training ratings per item (column counts of ``seen``; None without it)."""
        if self.seen is None:
            return None
        kept = getattr(self, "_counts", None)      # (the seen it counted, the counts)
        if kept is None or kept[0] is not self.seen:
            kept = self._counts = (self.seen, np.bincount(self.seen.indices,
                                                          minlength=self.seen.shape[1]))
        return kept[1]

    def shrunk(self, scores: np.ndarray, base: float, shrink: float = SHRINK) -> np.ndarray:
        """``base + n_i / (n_i + shrink) * (scores - base)``: what :meth:`recommend` ranks."""
        counts = self.item_counts()
        if not shrink or counts is None:
            return np.array(scores, dtype=np.float64)
        if shrink < 0:
            raise ValueError(f"shrink must be >= 0, not {shrink}")
        return base + counts / (counts + float(shrink)) * (scores - base)

    def _best(self, scores: np.ndarray, n: int) -> np.ndarray:
        """The ``n`` items of highest score, best first, ties by index."""
        n = int(min(n, np.isfinite(scores).sum()))
        top = np.argpartition(-scores, n - 1)[:n] if n else np.array([], np.int64)
        top = top[np.lexsort((top, -scores[top]))]
        return self.col_ids[top] if self.col_ids is not None else top

    def to_dask(self, client=None, chunks: int | None = None) -> tuple:
        """W and H as ``dask.array`` arrays whose row blocks are held by the workers.

        Parameters
        ----------
        client : distributed.Client, optional
            Default: the current client.
        chunks : int, optional
            Rows per block (default: the rows split evenly over the workers).

        Returns
        -------
        (dask.array.Array, dask.array.Array)
            W (users x F) and H (items x F); ``.compute()`` gives ``W``, ``H``.
        """
        import dask.array as da

        if self.W is None:
            raise ValueError("this result has no factors (a plan)")
        if client is None:
            from distributed import get_client

            client = get_client()
        from daskhpc.runtime import worker_addresses

        workers = worker_addresses(client)
        out = []
        for X in (self.W, self.H):
            step = int(chunks or max(1, -(-X.shape[0] // max(1, len(workers)))))
            blocks = []
            for k, a in enumerate(range(0, X.shape[0], step)):
                block = np.ascontiguousarray(X[a:a + step])
                f = client.scatter(block, workers=[workers[k % len(workers)]], hash=False)
                blocks.append(da.from_delayed(f, block.shape, dtype=X.dtype))
            out.append(da.concatenate(blocks, axis=0))
        return out[0], out[1]

    def lookup(self, axis: int, ids) -> tuple[np.ndarray, np.ndarray]:
        """``(indices, known)`` of ``ids`` on ``axis`` (0: users); an unknown one's index is 0."""
        names = self.row_ids if axis == 0 else self.col_ids
        ids = np.atleast_1d(np.asarray(ids))
        size = (self.W if axis == 0 else self.H).shape[0]
        if names is None:
            try:
                idx = ids.astype(np.int64)
                bad = (idx < 0) | (idx >= size) | (idx != ids)
            except (TypeError, ValueError):          # ids that are no numbers at all
                idx, bad = np.zeros(ids.size, np.int64), np.ones(ids.size, bool)
        else:
            order = np.argsort(names, kind="stable")
            try:
                pos = np.searchsorted(names[order], ids).clip(0, size - 1)
                idx = order[pos]
                bad = names[idx] != ids
            except (TypeError, np.exceptions.DTypePromotionError):   # ids of another kind
                idx, bad = np.zeros(ids.size, np.int64), np.ones(ids.size, bool)
        return np.where(bad, 0, idx), ~np.asarray(bad, bool)

    def index(self, axis: int, ids) -> np.ndarray:
        """Indices of ``ids`` on ``axis`` (0: users); an unknown one is a KeyError naming it."""
        what = ("user", "item")[axis]
        ids = np.atleast_1d(np.asarray(ids))
        idx, known = self.lookup(axis, ids)
        bad = ~known
        if np.any(bad):
            raise KeyError(f"unknown {what} {ids.tolist()[int(np.argmax(bad))]!r} (not in "
                           "the training data)")
        return idx

    def _notes(self) -> list[str]:
        q = self.info.get("quality", {})
        out = []
        if "final_test_rmse" in q and "global_mean_rmse" in q:
            out.append(f"final test RMSE {q['final_test_rmse']:.4f} vs global mean "
                       f"{q['global_mean_rmse']:.4f}")
        return out + super()._notes()


def predict_file(result: SSGDResult, path: str) -> dict:
    """``daskhpc predict DIR RATINGS``: predictions of a ratings file's pairs and their RMSE
    (with ``seen``: split into ``train_rmse`` and ``held_out_rmse``)."""
    from daskhpc.io import read_ratings

    got = read_ratings(path)
    maps = got.index_maps or (None, None)
    ids = [got.meta[mode] if maps[axis] is None else maps[axis][got.meta[mode]]
           for axis, mode in enumerate(("rows", "cols"))]
    for axis, what in enumerate(("user", "item")):
        _, known = result.lookup(axis, ids[axis])
        if not known.all():
            k = int(np.argmax(~known))
            name = ids[axis][k:k + 1].tolist()[0]          # a plain int or str
            raise InputError(f"{path}: record {k + 1}: unknown {what} {name!r} (not in the "
                             "training data of this model)")
    pred = result.predict(ids[0], ids[1])
    truth = got.meta["vals"]
    columns = {"user": ids[0], "item": ids[1], "rating": truth, "prediction": pred}
    quality = {"rmse": _rmse(pred - truth)}
    if result.seen is not None:
        trained = _trained(result.seen, result.index(0, ids[0]), result.index(1, ids[1]))
        columns["trained"] = trained.astype(np.int8)
        for name, these in (("train_rmse", trained), ("held_out_rmse", ~trained)):
            if these.any():
                quality[name] = _rmse(pred[these] - truth[these])
    return {"columns": columns, "quality": quality}


def _rmse(err: np.ndarray) -> float:
    return float(np.sqrt(np.mean(err ** 2))) if err.size else float("nan")


def _trained(seen, u: np.ndarray, i: np.ndarray) -> np.ndarray:
    """Whether each pair (u[k], i[k]) is stored in the CSR pattern ``seen``."""
    seen = seen.tocsr() if not hasattr(seen, "indptr") else seen
    key = u.astype(np.int64) * seen.shape[1] + i
    rows = np.repeat(np.arange(seen.shape[0], dtype=np.int64), np.diff(seen.indptr))
    stored = np.sort(rows * seen.shape[1] + seen.indices)
    at = np.searchsorted(stored, key).clip(0, max(stored.size - 1, 0))
    return stored[at] == key if stored.size else np.zeros(key.size, bool)
