"""An estimator over :func:`~daskhpc.ssgd.fit`: ratings by original id in, predictions out."""

from __future__ import annotations

import copy

import numpy as np

from daskhpc.errors import InputError

from ._result import SHRINK


class MatrixFactorization:
    """Matrix factorisation by stratified SGD (``daskhpc.ssgd.fit``) with original ids.

    Any (user, item) pair is predicted as Surprise's ``SVD`` does: an unknown user or item
    gets the mean rating plus the biases that are known. ``get_params``/``set_params``
    follow scikit-learn's conventions without importing it.

    Parameters
    ----------
    n_factors : int
        F, latent factors (``rank``).
    epochs, lr, reg, biased, reg_bias, init_scale, seed, test_fraction
        As :func:`~daskhpc.ssgd.fit`'s (``biased``: mu + b_u + b_i + p_u . q_i, by default
        with ``init_scale`` std 0.1; ``test_fraction`` 0: train on all ratings).
    client : distributed.Client, optional
        Fit on this cluster; None fits in this process (``serial_fit``, one part).
    nparts, strategy, partition
        As ``fit``'s (K parts, default one per worker); only used with a client.

    Attributes
    ----------
    result_ : SSGDResult
        The fitted model (history, report, factors, ``save``).

    Examples
    --------
    >>> import numpy as np
    >>> from daskhpc.ssgd import MatrixFactorization
    >>> r = np.array([[10, 7, 4.0], [10, 8, 2.0], [20, 7, 5.0], [20, 9, 3.0], [30, 8, 1.0]])
    >>> mf = MatrixFactorization(n_factors=2, epochs=5).fit(r)
    >>> mf.predict([[10, 7], [99, 7]]).shape           # user 99 is unknown: mu + b_i
    (2,)
    """

    def __init__(self, n_factors: int = 100, epochs: int = 20, lr: float = 0.02,
                 reg: float = 0.1, biased: bool = True, reg_bias: float | None = None,
                 client=None, nparts: int | None = None, strategy: str = "hc",
                 partition: str = "random", init_scale: float | None = None, seed: int = 0,
                 test_fraction: float = 0.0):
        given = locals()            # stored unchanged, scikit-learn's convention
        for name in self._PARAMS:
            setattr(self, name, given[name])

    _PARAMS = ("n_factors", "epochs", "lr", "reg", "biased", "reg_bias", "client", "nparts",
               "strategy", "partition", "init_scale", "seed", "test_fraction")

    def get_params(self, deep: bool = True) -> dict:
        """The constructor's parameters by name (scikit-learn's convention)."""
        return {name: getattr(self, name) for name in self._PARAMS}

    def set_params(self, **params) -> MatrixFactorization:
        """Set constructor parameters; an unknown name is a ValueError."""
        for name, value in params.items():
            if name not in self._PARAMS:
                raise ValueError(f"invalid parameter {name!r} for MatrixFactorization; "
                                 f"valid: {', '.join(self._PARAMS)}")
            setattr(self, name, value)
        return self

    def __sklearn_clone__(self) -> MatrixFactorization:
        """scikit-learn's ``clone``: copies of the parameters, the same (live) ``client``."""
        params = {k: v if k == "client" else copy.deepcopy(v)
                  for k, v in self.get_params().items()}
        return type(self)(**params)

    def __repr__(self) -> str:
        default = MatrixFactorization.__init__.__defaults__
        changed = [f"{k}={v!r}" for (k, v), d in zip(self.get_params().items(), default)
                   if v is not d and not (type(v) is type(d) and v == d)]
        return f"MatrixFactorization({', '.join(changed)})"

    def fit(self, ratings) -> MatrixFactorization:
        """Fit on ``ratings``: (user id, item id, rating) rows as an (n, 3) array, a DataFrame
        (its first three columns) or a sequence of triples; ids are kept as given."""
        users, items, vals = _columns(ratings, 3, "ratings")
        try:
            vals = vals.astype(np.float64)
        except (TypeError, ValueError):
            raise InputError("ratings: the third column (the rating) must be numbers") from None
        uid, ui = _ids(users, "user")
        iid, ii = _ids(items, "item")
        data = (ui, ii, vals, (uid.size, iid.size))
        options = dict(rank=int(self.n_factors), epochs=int(self.epochs), lr=self.lr,
                       reg=self.reg, biased=bool(self.biased), reg_bias=self.reg_bias,
                       init_scale=self.init_scale, seed=int(self.seed),
                       test_fraction=float(self.test_fraction), strategy=self.strategy)
        if self.client is None:
            from ._api import serial_fit

            res = serial_fit(data, int(self.nparts or 1), partition="random", **options)
        else:
            from ._api import fit

            res = fit(data, self.nparts, client=self.client, partition=self.partition,
                      **options)
        res.row_ids, res.col_ids = uid, iid
        self.result_ = res
        return self

    def _fitted(self):
        res = getattr(self, "result_", None)
        if res is None:
            raise RuntimeError("this MatrixFactorization is not fitted yet: call fit first")
        return res

    def predict(self, pairs) -> np.ndarray:
        """Predicted ratings of (user id, item id) ``pairs``, clipped to the training range.

        An unknown user or item is predicted as Surprise's ``SVD`` does: mu, plus b_u if the
        user is known and b_i if the item is known."""
        res = self._fitted()
        users, items = _columns(pairs, 2, "pairs")
        u, ku = res.lookup(0, users)
        i, ki = res.lookup(1, items)
        both = ku & ki
        out = np.full(u.size, float(res.mu))
        if res.biased:
            out = out + np.where(ku, res.user_bias[u], 0.0) + np.where(ki, res.item_bias[i], 0.0)
        out[both] = res._scores(u[both], i[both])
        return res._clip(out)

    def recommend(self, user, n: int = 10, exclude_seen: bool = True,
                  shrink: float = SHRINK) -> np.ndarray:
        """The ``n`` item ids of highest predicted rating for ``user``, as
        :meth:`SSGDResult.recommend`; an unknown user gets the items of highest mu + b_i
        (biased model; the unbiased one raises KeyError)."""
        res = self._fitted()
        _, known = res.lookup(0, [user])
        if known[0] or not res.biased:
            return res.recommend(user, n, exclude_seen, shrink)
        return res._best(res.shrunk(res.mu + res.item_bias, res.mu, shrink), n)


def _columns(data, n: int, what: str) -> list[np.ndarray]:
    """The first ``n`` columns of a DataFrame-like, a 2-D array or a sequence of rows."""
    if hasattr(data, "columns") and hasattr(data, "__getitem__") and \
            not isinstance(data, np.ndarray):
        names = list(data.columns)
        if len(names) < n:
            raise InputError(f"{what}: {n} columns needed, the table has {len(names)}")
        return [np.asarray(data[c]) for c in names[:n]]
    a = np.asarray(data, dtype=object) if not isinstance(data, np.ndarray) else data
    if a.ndim != 2 or a.shape[1] < n:
        raise InputError(f"{what}: an (n, {n}) table needed, got shape {a.shape}")
    # a sequence of mixed rows (object array): each column its own type
    return [np.array(a[:, k].tolist()) if a.dtype == object else a[:, k] for k in range(n)]


def _ids(col: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct ids and each entry's index among them."""
    if col.size == 0:
        raise InputError(f"ratings: no {what}s (no ratings)")
    try:
        uniq, inv = np.unique(col, return_inverse=True)
    except TypeError:
        raise InputError(f"ratings: {what} ids of mixed kinds (numbers and strings); "
                         "use one kind") from None
    if uniq.dtype == object:
        uniq = uniq.astype(str)
    elif uniq.dtype.kind == "f" and np.all(np.isfinite(uniq)) and \
            np.array_equal(uniq, np.round(uniq)):
        uniq = uniq.astype(np.int64)       # whole numbers read as floats (an (n, 3) array)
    return uniq, inv.reshape(-1).astype(np.int64)
