"""Everything a run is made of, built once on the client and shared by the serial
reference, the distributed driver and ``plan``: options, split, partition, strata, the
run's message plan and the ratings of every block."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np

from daskhpc._narrow import counts, narrow_values
from daskhpc._workflows import checked_options, option
from daskhpc.comm import CostModel, network_model, plan_network, rank_layouts
from daskhpc.errors import InputError

from ._assign import Assignment, assign, partition_report
from ._input import load
from ._layouts import LAYOUTS, epoch_cost
from ._plan import STRATEGIES, Layout
from ._data import Ratings, check_parts, placeholder, split
from ._runplan import RunPlan
from ._strata import RingStrata


@dataclass
class Options:
    """Run options (the CLI flags of the same names).

    ``lr`` and ``reg`` beat the global mean on ml-latest-small by over 10 % test RMSE in 20
    epochs (docs/ssgd.md); ``biased=True``: W and H get a last column of biases."""

    @property
    def width(self) -> int:
        """Columns of W and H: F, plus the bias column of the biased model."""
        return int(self.rank) + int(bool(self.biased))

    @property
    def bias_reg(self) -> float:
        """The biases' regularisation (``reg_bias``, or ``reg``)."""
        return float(self.reg if self.reg_bias is None else self.reg_bias)

    rank: int = option(16, "F, latent factors", bounds=(1, None))
    epochs: int = option(20, "SGD epochs", bounds=(1, None))
    strategy: str = option("hc", "communication: dense blocks (dsgd), P2P d-gap rows (p2p), "
                                 "Hold-and-Combine (hc)", choices=STRATEGIES)
    partition: str = option("hp", "row partition: hypergraph, SOED objective (hp), seeded "
                                  "balanced random (random), or the one the cost model "
                                  "predicts fastest on --network (auto)",
                            choices=("hp", "random", "auto"))
    partitioner: str = option("auto", "hypergraph partitioner for --partition hp: auto "
                                      "(Mt-KaHyPar, or label propagation where Mt-KaHyPar "
                                      "would take minutes), mtkahypar, kahypar, lp")
    epsilon: float = option(0.03, "allowed nonzero imbalance of the row blocks",
                            bounds=(0, None))
    strata: str = option("ring", "ring strata with a fixed seed, or a new ring seed every "
                                 "epoch", choices=("ring", "random"))
    ring_seed: int = option(0, "seed of the ring")
    lr: float = option(0.02, "initial learning rate", bounds=(0, None), closed="neither")
    reg: float = option(0.1, "L2 regularisation of the factors", bounds=(0, None))
    biased: bool = option(False, "the biased model mu + b_u + b_i + w_u.h_i (Koren; Surprise's "
                                 "SVD): every exchanged H row carries its bias (one word)")
    reg_bias: float | None = option(None, "L2 regularisation of the biases (--biased; "
                                          "default: --reg)", type=float, bounds=(0, None))
    init_scale: float | None = option(None, "initial factors U[0, s) (default: 2 sqrt(mean "
                                            "rating / F), so that w.h starts near the mean); "
                                            "--biased: U[-s/2, s/2) (default s = 0.35, std 0.1)",
                                      type=float)
    test_fraction: float = option(0.1, "ratings held out for the test RMSE", bounds=(0, 1),
                                  closed="left")
    eval_every: int | None = option(1, "test RMSE every N epochs (0: after the last one "
                                       "only)", modes=("run",), bounds=(0, None))  # None: never
    seed: int = option(0, "seed of the initial factors, the split and random partitions")
    method: str = option("bitwise", "d-gap rows by Algorithm 2 (bitwise) or the "
                                    "connectivity sets (the same rows)", flag="--d-gap",
                         choices=("bitwise", "connectivity"))
    shuffle: bool = option(True, "visit a block's ratings in their stored order every epoch, "
                                 "as CESSGD built with -DNO_SHUFFLE and Surprise's SVD do "
                                 "(default: a seeded random order per epoch and block, the "
                                 "paper's)", flag="--no-shuffle")
    keep_empty: bool = option(False, "do not drop empty rows and columns: a matrix that has "
                                     "any is refused (by default they are dropped, with a "
                                     "note)")
    init: object = option(None, "a saved ssgd model to start from (--save DIR, or the "
                                "loaded result): a warm start; users and items it does not "
                                "know start seeded", metavar="DIR", type=str, modes=("run",))
    order_plugin: bool = option(True, "do not register the stratum-order scheduler plugin",
                                flag="--no-order-plugin", modes=("run",))
    format: str | None = option(None, cli=False)   # reader format (the common --format)


DEFAULTS = Options()

#: Ratings :meth:`Setup.blocks` and :meth:`Setup.block_ratings` scan at a time
BLOCKS_CHUNK = 1 << 18

#: The biased model's default initial factors U[-s/2, s/2): standard deviation 0.1
#: (s = 0.2 sqrt 3), Surprise's ``init_std_dev``.
BIASED_INIT_SCALE = 0.2 * np.sqrt(3.0)


@dataclass(eq=False)
class Setup:
    """The prepared run: see the module docstring."""

    options: Options
    nparts: int
    ratings: Ratings
    train: Ratings
    test: Ratings
    assignment: Assignment
    layout: Layout
    strata: RingStrata
    runplan: RunPlan
    init_scale: float
    clip: tuple[float, float]
    timing: dict = field(default_factory=dict)
    #: original id (1-based line/row number for files without ids) of every row and
    #: column of ``ratings``, after empty ones were dropped: what errors and results name
    index_maps: tuple = (None, None)
    _blocks: tuple | None = None
    epoch0: int = 0                  # epochs done before this setup's first one
    start: tuple | None = None       # (W, H) after epoch0 epochs; None: seeded initial
    #: a Dask collection's ratings on the workers (``_collect.Values``): ``train.vals`` and
    #: ``test.vals`` are then placeholders, and the parts get their ratings there
    values: object = None

    @property
    def K(self) -> int:
        return self.nparts

    @property
    def E(self) -> int:
        """Epochs this setup runs (the run's epochs minus those done before)."""
        return self.options.epochs - self.epoch0

    def resumed(self, epoch0: int, W: np.ndarray, H: np.ndarray) -> Setup:
        """The rest of the run from W and H after ``epoch0`` epochs, equal bit for bit to the
        uninterrupted run (strata, learning rates and orders depend on the run's epoch number)."""
        o = self.options
        if not 0 <= epoch0 < o.epochs:
            raise ValueError(f"cannot resume after epoch {epoch0} of {o.epochs}")
        if W.shape != (self.train.shape[0], o.width) or H.shape != (self.train.shape[1], o.width):
            raise InputError(f"checkpoint factors of shapes {W.shape} and {H.shape} do not "
                             f"fit a {self.train.shape} matrix at rank {o.rank}"
                             + (" with biases" if o.biased else ""))
        strata = self.strata.shifted(epoch0 - self.epoch0)
        rp = RunPlan.build(self.layout, strata, o.strategy, o.epochs - epoch0, o.width,
                           test=self.test, eval_every=o.eval_every, method=o.method,
                           epoch0=epoch0, test_pins=self.runplan.test_pins)
        return replace(self, strata=strata, runplan=rp, epoch0=int(epoch0),
                       start=(W, H), timing=dict(self.timing))

    @property
    def mu(self) -> float:
        """The global mean of the training ratings (the biased model's mu)."""
        if self.values is not None:   # computed on the keeper, from the same array
            return float(self.values.stats["mean"])
        return float(self.train.mean())

    @property
    def bias(self) -> tuple[float, float] | None:
        """``(reg_bias, mu)`` of the biased model (what the kernels take), or None."""
        return (self.options.bias_reg, self.mu) if self.options.biased else None

    def blocks(self) -> np.ndarray:
        """``ptr``: part p's ratings of column block b are ``ptr[p * K + b]:ptr[p * K + b + 1]``
        in :meth:`block_ratings`' order (counted a chunk at a time: no position a rating)."""
        if self._blocks is None:
            K, t, a, count = self.K, self.train, self.assignment, np.zeros(self.K**2, np.int64)
            for sl in (slice(lo, lo + BLOCKS_CHUNK) for lo in range(0, t.nnz, BLOCKS_CHUNK)):
                count += np.bincount(a.row_parts[t.rows[sl]] * K + a.col_blocks[t.cols[sl]],
                                     minlength=K * K)
            self._blocks = np.concatenate([[0], np.cumsum(count)])
        return self._blocks

    def block_ratings(self, p: int, local=(None, None), kinds: str = "rcv") -> tuple:
        """Part p's training ratings of every column block in the matrix's order (the serial
        one), a chunk at a time: per kind of ``kinds`` the blocks' rows (``r``), columns (``c``;
        both through the lookup tables ``local`` if given) or values (``v``; float32 if exact)."""
        K, t, a = self.K, self.train, self.assignment
        sizes = np.diff(self.blocks()[p * K:(p + 1) * K + 1])
        made = [{"r": (t.rows, local[0]), "c": (t.cols, local[1]), "v": (t.vals, None)}[k]
                for k in kinds]
        out = [[np.empty(n, (x if m is None else m).dtype) for n in sizes] for x, m in made]
        at, of_p = np.zeros(K, np.int64), a.row_parts == p         # a byte a row
        cb = a.col_blocks.astype(np.uint16 if K <= 1 << 16 else np.int64)   # a radix sort
        for lo in range(0, t.nnz, BLOCKS_CHUNK):
            mine = np.flatnonzero(of_p[t.rows[lo:lo + BLOCKS_CHUNK]]) + lo
            blk = cb[t.cols[mine]]
            order = np.argsort(blk, kind="stable")
            c = np.bincount(blk, minlength=K)
            start = np.concatenate([[0], np.cumsum(c)])
            for b in np.flatnonzero(c):
                sel = mine[order[start[b]:start[b + 1]]]
                for dst, (x, m) in zip(out, made):
                    dst[b][at[b]:at[b] + c[b]] = x[sel] if m is None else m[x[sel]]
            at += c
        return tuple([narrow_values(v) for v in x] if k == "v" else x for k, x in zip(kinds, out))

    def test_of(self, p: int) -> np.ndarray:
        """Positions in ``test`` of part p's test ratings, in order (a chunk at a time)."""
        rp, t = self.assignment.row_parts, self.test
        return np.concatenate([np.flatnonzero(rp[t.rows[lo:lo + BLOCKS_CHUNK]] == p) + lo
                               for lo in range(0, t.nnz, BLOCKS_CHUNK)] + [np.zeros(0, int)])


def prepare(data, nparts: int, *, partition_file=None, **options) -> Setup:
    """Validate the input and options and build the setup of a run.

    ``data``, ``nparts`` (K), ``partition_file`` and ``**options`` are :func:`fit`'s;
    ``data`` may also be the ``Input`` the CLI's check read.

    Returns
    -------
    Setup
        ``ratings``, ``train``/``test``, ``assignment`` (``row_parts``, ``col_blocks``),
        ``strata``, ``runplan`` and ``timing``: what ``fit``, ``serial_fit`` and ``plan`` run on.

    Examples
    --------
    >>> from daskhpc import datasets, ssgd
    >>> s = ssgd.prepare(datasets.ratings(), 2, partition="random", test_fraction=0.0)
    >>> s.ratings.nnz, s.assignment.row_parts.size == s.ratings.shape[0]
    (100836, True)
    """
    opts = checked_options(Options, options, "SSGD")
    if opts.partition == "auto":        # the layout the cost model predicts fastest
        return choose(data, nparts, network_model(plan_network(None)),
                      partition_file=partition_file, **options)[1]
    inp = load(data, format=opts.format, keep_empty=opts.keep_empty)
    ratings, maps = inp.ratings, inp.index_maps
    check_parts(nparts, ratings)
    K = int(nparts)
    stats = spread = None
    if ratings.on_workers:         # a DataFrame: ids and ratings stay on the workers
        train, test, stats = inp.values.split(ratings, opts.test_fraction, opts.seed)
        row_nnz = inp.values.train_rows()
    else:
        train, test = split(ratings, opts.test_fraction, opts.seed)
        row_nnz = counts(train.rows, train.shape[0])
        if inp.values is not None:     # a dask.array: its ratings stay on the workers
            stats = inp.values.hold_out(opts.test_fraction, opts.seed)
    t0 = time.perf_counter()
    # a hypergraph of a DataFrame's ratings needs every pin on the client
    ids = inp.values.train_ids() if train.on_workers and opts.partition == "hp" and \
        partition_file is None else None
    a = assign(train if ids is None else Ratings(*ids, placeholder(train.nnz), train.shape),
               K, partition=opts.partition, partitioner=opts.partitioner,
               rank=opts.rank, epsilon=opts.epsilon, seed=opts.seed,
               partition_file=partition_file, source=inp, row_nnz=row_nnz)
    del ids
    t1 = time.perf_counter()
    if train.on_workers:
        spread = inp.values.pins(a.row_parts, a.col_blocks, K)
    lay = Layout.build(train.rows, train.cols, row_parts=a.row_parts,
                       col_blocks=a.col_blocks, nparts=K, shape=train.shape,
                       pins=None if spread is None else spread["train"])
    a.report = partition_report(a, row_nnz, lay.pins_col, opts.rank)
    strata = RingStrata(K, opts.strata, opts.ring_seed, opts.seed)
    # words per moved H row: the factors, and the bias with the biased model
    rp = RunPlan.build(lay, strata, opts.strategy, opts.epochs, opts.width,
                       test=test, eval_every=opts.eval_every, method=opts.method,
                       test_pins=None if spread is None else spread["test"])
    t2 = time.perf_counter()
    mean = train.mean() if stats is None else stats["mean"]
    scale = opts.init_scale if opts.init_scale is not None else BIASED_INIT_SCALE if \
        opts.biased else 2.0 * np.sqrt(max(mean, 1e-3) / opts.rank)
    clip = (float(train.vals.min()), float(train.vals.max())) if stats is None else \
        tuple(stats["clip"])
    s = Setup(opts, K, ratings, train, test, a, lay, strata, rp, float(scale), clip,
              {"partition_s": t1 - t0, "plan_s": t2 - t1}, index_maps=maps,
              values=inp.values)
    if spread is not None:       # block sizes only: the blocks are made on the workers
        s._blocks = np.concatenate([[0], np.cumsum(spread["blocks"])])
    return s if opts.init is None else s.resumed(0, *warm_start(s, opts.init))


def warm_start(s: Setup, init) -> tuple[np.ndarray, np.ndarray]:
    """The W and H of a warm start: the saved rows by original id, seeded ones for the rest."""
    import os

    from ._kernels import initial_rows

    if isinstance(init, (str, os.PathLike)):
        from daskhpc._saved import load as load_saved

        init = load_saved(init, workflow="ssgd")
    o = s.options
    if not (hasattr(init, "W") and hasattr(init, "lookup")):
        raise InputError(f"init must be a saved ssgd model (a --save directory or its "
                         f"result), got {type(init).__name__}")
    if init.W.shape[1] != o.width or bool(init.biased) != bool(o.biased):
        raise InputError(f"init: the saved model has {init.W.shape[1]} columns "
                         f"({'biased' if init.biased else 'unbiased'}); this run needs "
                         f"{o.width} ({'biased' if o.biased else 'unbiased'}, rank {o.rank})")
    out = []
    for axis, (n, saved) in enumerate(zip(s.train.shape, (init.W, init.H))):
        X = initial_rows(o.seed, axis, np.arange(n), o.rank, s.init_scale, o.biased)
        names = s.index_maps[axis]
        ids = np.arange(n) if names is None else names
        idx, known = init.lookup(axis, ids)
        X[known] = saved[idx[known]]
        out.append(X)
    return out[0], out[1]


def choose(data, nparts: int, model: CostModel, *, keep: str | None = None, owner=None,
           hosts=None, partition_file=None, **options):
    """``(name, setup, rows)``: every layout prepared and priced, the fastest (or ``keep``)."""
    options = {k: v for k, v in options.items() if k != "partition"}
    # read once: every layout prepares the same ratings
    data = load(data, format=options.get("format"),
                keep_empty=bool(options.get("keep_empty", False)))
    if partition_file is not None:     # a given partition is the only layout
        keep = "file"
        layouts = {"file": lambda: prepare(data, nparts, partition_file=partition_file,
                                           **options)}
    else:
        layouts = {name: (lambda name=name: prepare(data, nparts, **{**options,
                                                                     "partition": name}))
                   for name in LAYOUTS}
    return rank_layouts(layouts, lambda s: epoch_cost(s, model, owner, hosts), keep=keep)
