"""Everything a training run is made of, built once: data, parts, batches, calls, plans.

Part p visits its rows in epoch e in the order ``perm(e, p)``, B a step (Algorithm 1).
Without Top-k every call's algorithm and exact plan follow from the data; with Top-k
one algorithm (from k) and the dense-bound plan.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field, replace

import numpy as np

from daskhpc import datasets
from daskhpc.allreduce import (ALGORITHMS, CANDIDATES, DEFAULT_GROUP, Format, call_plan,
                               choose, cost_model, dense_bound_plan, make)
from daskhpc._saved import load as load_saved
from daskhpc._workflows import check_parts, checked_options, option
from daskhpc.errors import InputError

from ._data import LinearData, load
from ._kernels import LOSSES, batch_features
from ._update import PENALTIES, SCHEDULES, curvature, row_weights

#: ``--batch auto``: the least B (Renggli's mini-batch, and every B with one part)
MIN_BATCH = 8
#: ``--batch auto``: at least this many steps (updates) per part and epoch: fewer, larger
#: steps lose accuracy per epoch (docs/linear.md)
AUTO_STEPS = 256
#: ``--batch auto``: seconds per stored entry of a batch's rows (margins, gradient and
#: update; measured: docs/linear.md)
ENTRY_S = 45e-9


@dataclass
class Options:
    """Training options (the CLI flags of the same names); defaults: docs/linear.md."""

    loss: str = option("log", "log (logistic regression) or hinge (linear SVM)",
                       choices=tuple(LOSSES))
    batch: int | str = option("auto", "B, rows per part and iteration, or auto: rows "
                                      "that cost what the allreduce costs (docs/linear.md)",
                              metavar="B|auto", type=lambda v: parse_batch(v))
    epochs: int = option(5, "epochs (at most, with --tol)", bounds=(1, None))
    tol: float | None = option(None, "stop once the training objective has not gone below "
                                     "its best by tol for --n-iter-no-change epochs in a "
                                     "row (scikit-learn's rule); default: every epoch runs",
                               type=float, bounds=(0, None))
    n_iter_no_change: int = option(5, "epochs without improvement that stop a run with "
                                      "--tol", metavar="N", bounds=(1, None))
    learning_rate: str = option("optimal", "per-sample step size after t rows: optimal "
                                           "1/(reg (t0 + t)), constant lr, invscaling "
                                           "lr/(t+1)^power_t (docs/linear.md)",
                                choices=SCHEDULES)
    lr: float = option(0.5, "eta0, the per-sample step size of --learning-rate constant "
                            "and invscaling", bounds=(0, None), closed="neither")
    power_t: float = option(0.5, "exponent of --learning-rate invscaling", bounds=(0, None))
    reg: float = option(1e-4, "alpha, the regularisation strength, applied by every part to "
                              "its copy of w", bounds=(0, None))
    penalty: str = option("l2", "the regulariser: l2, l1 (a cumulative proximal step: "
                                "exact zeros) or elasticnet (--l1-ratio of it L1)",
                          choices=PENALTIES)
    l1_ratio: float = option(0.15, "the L1 share of --penalty elasticnet (scikit-learn's)",
                             bounds=(0, 1))
    class_weight: str | dict | None = option(
        None, "weights of the rows' losses per label: 'balanced' (n / (classes x count)) "
              "or 'LABEL:W,LABEL:W' (others 1); default: all 1", metavar="balanced|L:W,...",
        type=lambda v: parse_class_weight(v))
    topk: int | str | None = option(None, "Top-k SGD: k (exact Top-k, Algorithm 2) or "
                                          "'approx' (section 2.4.1, with --k); default: "
                                          "the full sparse gradient",
                                    type=lambda v: parse_topk(v))
    k: int | None = option(None, "expected items of --topk approx", type=int,
                           bounds=(1, None))
    error_feedback: bool = option(True, "Top-k without the residual (for comparison)",
                                  flag="--no-error-feedback")
    allreduce: str = option("auto", "the sparse allreduce of the gradients: auto (the "
                                    "least modelled time) or an algorithm",
                            choices=("auto", *sorted(ALGORITHMS)))
    group: int = option(DEFAULT_GROUP, "ranks per sparse group of dsar_early_switch")
    alpha: float | None = option(None, "seconds per message for --allreduce auto (default: "
                                       "the calibrated or built-in cost model)", type=float)
    beta: float | None = option(None, "seconds per byte for --allreduce auto (default: the "
                                      "calibrated or built-in cost model)", type=float)
    floor: float | None = option(None, "seconds every step costs for --allreduce auto "
                                       "(default: calibrated, else 0)", type=float)
    init: object = option(None, "a saved linear model to start from (--save DIR): a warm "
                                "start with its weights", metavar="DIR", type=str,
                          modes=("run",))
    fit_intercept: bool = option(True, cli=False)
    #: L of the step cap (``_update.curvature`` of the training rows; None: computed)
    curvature: float | None = option(None, cli=False)
    seed: int = option(0, "seed of the row shares and the batches")
    n_features: int | None = option(None, "the width of the training and test data "
                                          "(default: the training file's)", type=int,
                                  bounds=(1, None))

    def check(self) -> None:
        """What the declarations cannot say (the kit checked them)."""
        self.batch = parse_batch(self.batch)
        if self.learning_rate == "optimal" and not self.reg > 0:
            raise InputError("--learning-rate optimal needs --reg > 0 (its steps are "
                             "1 / (reg (t0 + t))); choose another schedule for --reg 0")
        cw = self.class_weight
        if isinstance(cw, str):
            self.class_weight = cw = parse_class_weight(cw)
        if cw is not None and cw != "balanced":
            if not isinstance(cw, dict):
                raise InputError(f"--class-weight must be 'balanced', a dict or None, got "
                                 f"{cw!r}")
            for label, weight in cw.items():
                if not (isinstance(weight, (int, float, np.integer, np.floating))
                        and np.isfinite(weight) and weight >= 0):
                    raise InputError(f"--class-weight: the weight of {label!r} must be a "
                                     f"number >= 0, got {weight!r}")
        t = self.topk
        if t is not None and t != "approx" and not (isinstance(t, (int, np.integer)) and t >= 1):
            raise InputError(f"--topk must be a positive integer or 'approx', got {t!r}")
        if t == "approx" and self.k is None:
            raise InputError("--topk approx needs --k, the expected number of items")


def parse_class_weight(value):
    """``--class-weight``: ``balanced`` or ``LABEL:W,LABEL:W`` (numeric labels as numbers)."""
    if value is None or value == "balanced" or isinstance(value, dict):
        return value
    out = {}
    for item in str(value).split(","):
        label, sep, weight = item.rpartition(":")
        try:
            if not sep or not label.strip():
                raise ValueError
            w = float(weight)
        except ValueError:
            raise InputError(f"--class-weight must be 'balanced' or LABEL:WEIGHT,..., got "
                             f"{value!r}") from None
        try:
            key = float(label)
        except ValueError:
            key = label.strip()
        out[key] = w
    return out


def parse_batch(value):
    """``--batch``: a positive integer or ``auto``."""
    if value == "auto":
        return value
    try:
        B = int(value)
    except (TypeError, ValueError):
        raise InputError(f"--batch must be a positive integer or 'auto', got {value!r}") \
            from None
    if B < 1 or B != float(value):
        raise InputError(f"--batch must be a positive integer or 'auto', got {value!r}")
    return B


def auto_batch(part_rows: int, entries_per_row: float, P: int, width: int, isize: int,
               cost, group: int) -> dict:
    """The batch of ``--batch auto`` and why (the report's ``batch_auto``).

    The B at which a step's rows (``ENTRY_S`` per stored entry) cost its modelled
    allreduce, at most 1/``AUTO_STEPS`` of a part's rows, at least ``MIN_BATCH``; one
    part has no allreduce to amortise: ``MIN_BATCH``."""
    cap = max(MIN_BATCH, math.ceil(part_rows / AUTO_STEPS))
    out = {"rule": f"min(rows per part / {AUTO_STEPS}, allreduce / row), "
                   f"at least {MIN_BATCH}", "steps_cap": cap}
    if P == 1:
        return {**out, "batch": MIN_BATCH, "allreduce_s": 0.0, "row_s": None}
    row_s = max(entries_per_row, 1.0) * ENTRY_S
    k = min(cap * entries_per_row, width)           # the union of the cap's rows, at most
    ar = choose(P, width, k, isize, cost, group=group, candidates=CANDIDATES)
    by_cost = math.ceil(ar["predicted_s"] / row_s)
    return {**out, "batch": int(max(MIN_BATCH, min(cap, by_cost))),
            "allreduce_s": ar["predicted_s"], "row_s": row_s, "cost_batch": by_cost}


def parse_topk(value):
    """``--topk``: an integer k or ``approx``."""
    if value is None or value == "approx":
        return value
    try:
        return int(value)
    except ValueError:
        raise InputError(f"--topk must be an integer or 'approx', got {value!r}") from None


@dataclass
class CommandOptions(Options):
    """The training options and the test file."""

    test: str | None = option(None, "LIBSVM test file (a9a.t): test loss and accuracy "
                                    "after every epoch", metavar="FILE")

    def fit_keywords(self, read=None) -> dict:
        """``fit``'s keywords; with ``read`` (what ``check`` read) no test file is named again."""
        out = {k: getattr(self, k) for k in Options.__dataclass_fields__}
        test = None if self.test is None or read is not None else datasets.resolve(self.test)
        return dict(out, test=test)


@dataclass(eq=False)
class Setup:
    """The prepared run: see the module docstring."""

    options: Options
    nparts: int
    data: LinearData
    rows: list                        # per part: global row ids it owns
    test_rows: list                   # per part: test rows it evaluates
    T: int                            # iterations per epoch
    fmt: Format
    cost: object
    timing: dict = field(default_factory=dict)
    _calls: dict = field(default_factory=dict)
    _algos: dict = field(default_factory=dict)

    weights: np.ndarray | None = None   # per training row: the class weight of its label
    w0: np.ndarray | None = None        # a warm start's weights (K N), else zeros
    batch_auto: dict | None = None      # how --batch auto chose B (auto_batch)

    @property
    def N(self) -> int:
        """Model length of one class (features + intercept)."""
        return int(self.data.X.shape[1])

    @property
    def K(self) -> int:
        """Models trained: 1 (binary) or one per class (one-vs-rest)."""
        return self.data.nclasses

    @property
    def width(self) -> int:
        """Length of the allreduced vector: the K models, class-major."""
        return self.K * self.N

    @property
    def k(self) -> int | None:
        o = self.options
        return None if o.topk is None else int(o.k if o.topk == "approx" else o.topk)

    def _of_epoch(self, kind: str, e: int, p: int, make):
        """``make()`` cached for epoch e only (its row orders, its batches' feature sets)."""
        key = (kind, e, p)
        if key not in self._algos:
            self._algos = {k: v for k, v in self._algos.items()
                           if not (k[0] == kind and k[1] != e)}
            self._algos[key] = make()
        return self._algos[key]

    def _perm(self, e: int, p: int) -> np.ndarray:
        return self._of_epoch("perm", e, p, lambda: permutation(self.options.seed, e, p,
                                                                self.rows[p].size))

    def _features(self, e: int, p: int):
        X = self.data.X
        return self._of_epoch("features", e, p, lambda: batch_features(
            X.indptr, X.indices, self.rows[p][self._perm(e, p)], self.options.batch, self.T,
            X.shape[1]))

    def algo(self, name: str):
        if name not in self._algos:
            self._algos[name] = make(name, self.nparts, self.width, self.fmt,
                                     self.options.group)
        return self._algos[name]

    def calls(self, e: int) -> list[tuple]:
        """Per iteration of epoch e: (algorithm, plan, choice or None)."""
        if e not in self._calls:
            self._calls[e] = [self._call(e, i) for i in range(self.T)]
        return self._calls[e]

    def planned_bytes(self, e: int) -> int:
        """Payload bytes the plans of epoch e's calls send (one product over all its messages)."""
        plans = [p for _, p, _ in self.calls(e)]
        vol = np.concatenate([p.volume for p in plans])
        words = np.concatenate([p.message_words() * p.word_bytes for p in plans])
        return int(vol @ words)

    def _call(self, e: int, i: int):
        o, P = self.options, self.nparts
        if self.k is not None:           # Top-k: k items per part (in expectation)
            choice = self._choose(min(self.k, self.width)) if o.allreduce == "auto" else None
            name = choice["algorithm"] if choice else o.allreduce
            key = ("bound", name)
            if key not in self._algos:
                self._algos[key] = dense_bound_plan(self.algo(name))
            return self.algo(name), self._algos[key], choice
        sets = []
        for p in range(P):
            ptr, feats = self._features(e, p)
            idx = feats[ptr[i]:ptr[i + 1]]
            if self.K > 1:          # the union once per class block (_kernels)
                idx = np.concatenate([idx + np.uint32(k * self.N) for k in range(self.K)])
            sets.append(idx)
        # a fixed algorithm on a given network is priced too (the plan's prediction)
        priced = o.allreduce == "auto" or (o.alpha is not None and o.beta is not None)
        choice = self._choose(max(s.size for s in sets)) if priced else None
        name = choice["algorithm"] if o.allreduce == "auto" else o.allreduce
        algo = self.algo(name)
        if P == 1:         # nothing is sent: every call's plan is the same, made once
            key = ("one part", name)
            if key not in self._algos:
                self._algos[key] = call_plan(algo, sets)
            return algo, self._algos[key], choice
        return algo, call_plan(algo, sets), choice

    def _choose(self, k):
        key = ("choice", int(k))
        if key not in self._algos:
            self._algos[key] = choose(self.nparts, self.width, k, self.fmt.isize, self.cost,
                                      group=self.options.group, candidates=CANDIDATES)
        return self._algos[key]


def permutation(seed: int, epoch: int, part: int, n: int) -> np.ndarray:
    """Part ``part``'s visiting order of its n rows in ``epoch`` (Algorithm 1, line 3)."""
    return np.random.default_rng([int(seed), 17, int(epoch), int(part)]).permutation(n)


def validate_input(X, nparts=None, *, test=None, **options) -> LinearData:
    """The options, data and ``nparts`` checked before a cluster starts: the :class:`LinearData`."""
    opts = checked_options(Options, options, "linear")   # options first: they cost nothing
    data = load(X, None, test, fit_intercept=opts.fit_intercept, n_features=opts.n_features)
    check_parts(1 if nparts is None else nparts, data.X.shape[0], "rows")
    row_weights(opts.class_weight, data.y, data.classes, data.nclasses)   # labels known
    return data


def prepare(X, y=None, nparts: int = 4, *, test=None, **options) -> Setup:
    """Validate data and options (as :func:`~daskhpc.linear.fit_local`) and set up the calls."""
    opts = checked_options(Options, options, "linear")
    t0 = time.perf_counter()
    data = load(X, y, test, fit_intercept=opts.fit_intercept, n_features=opts.n_features)
    return setup_of(opts, data, nparts, t0)


def setup_of(opts: Options, data: LinearData, nparts, t0: float) -> Setup:
    """The Setup of checked options and loaded data (``prepare``'s second half)."""
    P = check_parts(1 if nparts is None else nparts, data.X.shape[0], "rows")
    M = data.X.shape[0]
    perm = np.random.default_rng([int(opts.seed), 3]).permutation(M)
    rows = [np.sort(c) for c in np.array_split(perm, P)]
    nt = 0 if data.X_test is None else data.X_test.shape[0]
    test_rows = np.array_split(np.arange(nt), P)
    fmt = Format(np.float64)
    cost = cost_model(opts.alpha, opts.beta, opts.floor)
    chosen = None
    if opts.batch == "auto":
        K = data.nclasses
        chosen = auto_batch(max(r.size for r in rows), K * data.X.nnz / max(M, 1), P,
                            K * data.X.shape[1], fmt.isize, cost, opts.group)
        opts = replace(opts, batch=chosen["batch"])
    if opts.curvature is None:     # (a Dask collection's: from its pieces, _collect)
        opts = replace(opts, curvature=curvature(data.X))
    T = math.ceil(max(r.size for r in rows) / opts.batch)
    s = Setup(opts, P, data, rows, test_rows, T, fmt, cost, batch_auto=chosen)
    s.weights = row_weights(opts.class_weight, data.y, data.classes, data.nclasses)
    if opts.init is not None:
        s.w0 = warm_weights(opts.init, data.classes, s.K * s.N)
    s.timing["prepare_s"] = time.perf_counter() - t0
    return s


def warm_weights(init, classes, size: int) -> np.ndarray:
    """A warm start's weights (a saved linear model's, class-major), or an InputError."""
    if isinstance(init, (str, os.PathLike)):
        init = load_saved(init, workflow="linear")
    w = getattr(init, "w", None)
    if w is None:
        raise InputError(f"init must be a saved linear model (a --save directory or its "
                         f"result), got {type(init).__name__}")
    got = np.asarray(getattr(init, "classes_", classes))
    if got.shape != np.asarray(classes).shape or np.any(got != classes):
        raise InputError(f"init: the saved model's classes {got.tolist()} are not this "
                         f"data's {np.asarray(classes).tolist()}")
    w = np.array(w, np.float64).ravel()
    if w.size != size:
        raise InputError(f"init: the saved model has {w.size} weights, this run needs "
                         f"{size} (features and intercept as in training)")
    return w
