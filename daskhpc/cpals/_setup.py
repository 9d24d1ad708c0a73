"""Everything a run is made of, built once and shared by ``plan``, the serial references
and ``fit``: the validated options, the tensor, its distribution over parts and the
per-mode plans."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import numpy as np

from daskhpc._saved import load
from daskhpc._workflows import check_parts as kit_check_parts
from daskhpc._workflows import checked_options, option
from daskhpc.comm import CostModel, network_model, plan_network, rank_layouts
from daskhpc.errors import InputError

from ._init import given_factors, svd_factors
from ._layouts import LAYOUTS, iteration_cost, layout_name
from ._assign import GRAINS, Distribution, distribute
from ._plan import allreduce_plan, iteration_plan, mode_plans
from ._rows import gram
from ._serial import initial_factors
from ._data import Tensor, as_tensor


@dataclass
class Options:
    """Run options (the CLI flags of the same names): R = 10 as the paper, the Tensor
    Toolbox's stop rule; ``init`` may also be (API only) a list of N arrays ``I_n x R``."""

    rank: int = option(10, "R, components", bounds=(1, None))
    iters: int = option(20, "iterations at most", modes=("run",), bounds=(1, None))
    tol: float = option(1e-4, "stop when the fit changes by less than this (0: run every "
                              "iteration)", modes=("run",), bounds=(0, None))
    grain: str = option("fine", "fine: nonzeros partitioned, fold + expand per mode "
                                "(Algorithm 4); coarse: slices, one expand per mode "
                                "(Algorithm 3)", choices=GRAINS)
    partition: str = option("hp", "hp: hypergraph model (Mt-KaHyPar); random: fine-grain "
                                  "baseline; block: coarse-grain baseline (consecutive slices "
                                  "of equal nonzeros); auto: the grain and partition the "
                                  "cost model predicts fastest on --network",
                            choices=("hp", "random", "block", "auto"))
    partitioner: str = option("auto", "backend for --partition hp: auto (Mt-KaHyPar, or "
                                      "label propagation by size), mtkahypar, lp, kahypar")
    epsilon: float = option(0.03, "allowed imbalance (hp partitions, fine-grain row "
                                  "placement)", bounds=(0, None))
    seed: int = option(0, "seed of the initial factors and of random partitions",
                       bounds=(0, None))
    reg: float = option(0.0, "L2 regularisation: each solve uses (Hadamard of the other "
                             "Grams + reg I)^+ (SPLATT --reg, tensorly l2_reg)", modes=("run",),
                       bounds=(0, None))
    nonnegative: bool = option(False, "nonnegative factors (projected ALS: negative entries of "
                                      "each solve set to 0)", modes=("run",))
    init: object = option("random", "initial factors: random (seeded), svd (leading left "
                                     "singular vectors of each unfolding), or a saved cpals "
                                     "model's directory (--save DIR: warm start)",
                          metavar="random|svd|DIR", type=str, modes=("run",))

    def check(self) -> None:
        """The warm start and ``init`` (the kit checked the declarations)."""
        self.init = _warm_start(self.init)
        if isinstance(self.init, str) and self.init not in INITS:
            raise InputError(f"unknown --init {self.init!r}; choose one of {list(INITS)} or a "
                             "saved cpals model's directory")
        if not isinstance(self.init, (str, list, tuple)):
            raise InputError("init must be 'random', 'svd' or a list of factor matrices, "
                             f"got {type(self.init).__name__}")

    @property
    def init_name(self) -> str:
        """``random``, ``svd`` or ``given`` (for the report)."""
        return self.init if isinstance(self.init, str) else "given"


def _warm_start(init):
    """A saved cpals model as starting factors (weights folded into mode 1); else unchanged."""
    if isinstance(init, (str, os.PathLike)) and str(init) not in INITS \
            and os.path.isdir(init):
        init = load(init, workflow="cpals")
    if hasattr(init, "factors") and hasattr(init, "weights"):
        first = np.asarray(init.factors[0], np.float64) * np.asarray(init.weights, np.float64)
        return [first, *(np.asarray(F, np.float64) for F in init.factors[1:])]
    return init


INITS = ("random", "svd")
DEFAULTS = Options()


@dataclass(eq=False)
class Setup:
    """The prepared run (see the module docstring)."""

    options: Options
    nparts: int
    tensor: Tensor
    dist: Distribution
    plans: list
    timing: dict = field(default_factory=dict)
    _grams: list | None = None
    _start: list | None = None
    _iteration_plan: object = None

    @property
    def K(self) -> int:
        return self.nparts

    @property
    def R(self) -> int:
        return int(self.options.rank)

    @property
    def N(self) -> int:
        return self.tensor.order

    def iteration_plan(self):
        """Point-to-point messages of one iteration (:func:`._plan.iteration_plan`)."""
        if self._iteration_plan is None:
            self._iteration_plan = iteration_plan(self.tensor, self.dist, self.R, self.plans)
        return self._iteration_plan

    def allreduce_plan(self):
        return allreduce_plan(self.K, self.R, self.N)

    def start_factors(self) -> list[np.ndarray] | None:
        """The whole initial factors for ``init`` svd or given; None for the seeded rows."""
        o = self.options
        if o.init_name == "random":
            return None
        if self._start is None:
            t0 = time.perf_counter()
            self._start = svd_factors(self.tensor, self.R, o.seed, o.nonnegative) \
                if o.init_name == "svd" else given_factors(o.init, self.tensor, self.R)
            self.timing["init_s"] = time.perf_counter() - t0
        return self._start

    def initial_grams(self) -> list[np.ndarray]:
        """Grams of the initial factors (every part starts from these)."""
        if self._grams is None:
            start = self.start_factors()
            if start is None:
                start = initial_factors(self.tensor.shape, self.R, self.options.seed)
            self._grams = [gram(U) for U in start]
        return self._grams


def validate_input(data, nparts=None, **options) -> Tensor:
    """The options, the tensor and ``nparts`` checked before a cluster starts."""
    checked_options(Options, options, "CP-ALS")   # options first: they cost nothing
    X = as_tensor(data)
    if nparts is not None:
        check_parts(nparts, X)
    return X


def check_parts(nparts, X: Tensor) -> int:
    """Refuse a part count CP-ALS cannot use."""
    return kit_check_parts(nparts, X.nnz, "nonzeros of the tensor")


def prepare(data, nparts: int, *, partition_file=None, distribution=None, **options) -> Setup:
    """Validate the input and options, distribute the tensor and plan an iteration.

    ``data``, ``nparts`` (K), ``partition_file`` and ``**options`` are :func:`fit`'s;
    ``distribution`` (a resumed run's) replaces partitioning.

    Examples
    --------
    >>> from daskhpc.cpals import as_tensor, prepare
    >>> X = as_tensor(([[0, 1, 2, 0], [1, 2, 0, 0], [2, 0, 1, 0]], [1.0, 2.0, 3.0, 4.0], (3, 3, 3)))
    >>> s = prepare(X, 2, grain="fine", partition="random", rank=4)
    >>> s.nparts, s.options.grain, s.iteration_plan().report()["phases"]
    (2, 'fine', 6)
    """
    opts = checked_options(Options, options, "CP-ALS")
    if opts.partition == "auto" and distribution is None:   # the fastest by the cost model
        return choose(data, nparts, network_model(plan_network(None)),
                      partition_file=partition_file, **options)[1]
    X = as_tensor(data)
    K = check_parts(nparts, X)
    if opts.init_name == "given":
        opts.init = given_factors(opts.init, X, opts.rank)     # checked before partitioning
    t0 = time.perf_counter()
    if distribution is not None:
        d = distribution
        if d.grain != opts.grain or d.nparts != K:
            raise InputError(f"the saved distribution is {d.grain}-grain over {d.nparts} "
                             f"parts, the run {opts.grain}-grain over {K}")
    else:
        d = distribute(X, K, grain=opts.grain, partition=opts.partition,
                       partitioner=opts.partitioner, epsilon=opts.epsilon, seed=opts.seed,
                       partition_file=partition_file)
    t1 = time.perf_counter()
    plans = mode_plans(X, d, opts.rank)
    t2 = time.perf_counter()
    return Setup(opts, K, X, d, plans, {"partition_s": t1 - t0, "plan_s": t2 - t1})


def choose(data, nparts: int, model: CostModel, *, keep: str | None = None, owner=None,
           hosts=None, partition_file=None, **options):
    """``(name, setup, rows)``: every layout prepared and priced, the fastest (or ``keep``)."""

    X = as_tensor(data)                      # read once for every layout
    grain = options.get("grain", "fine")
    options = {k: v for k, v in options.items() if k not in ("grain", "partition")}
    if partition_file is not None:           # a given partition is the only layout
        layouts = {"file": lambda: prepare(X, nparts, partition_file=partition_file,
                                           grain=grain, **options)}
        keep = "file"
    else:
        layouts = {layout_name(g, p): (lambda g=g, p=p: prepare(X, nparts, grain=g,
                                                                partition=p, **options))
                   for g, p in LAYOUTS}
    return rank_layouts(layouts, lambda s: iteration_cost(s, model, owner, hosts), keep=keep)
