"""Everything a GCN run is made of, built once: options, the checked graph, the row
partition and the exchange patterns. Shared by ``plan``, ``serial_fit``, ``run_local`` and
``fit``."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from daskhpc._saved import load as load_saved
from daskhpc._workflows import check_parts, checked_options, option
from daskhpc.comm import CostModel, network_model, plan_network, rank_layouts
from daskhpc.errors import InputError

from ._assign import PARTITIONS, WEIGHTS, Assignment, assign
from ._data import Graph, as_graph, random_data_note, undirected_note
from ._layouts import LAYOUTS, epoch_cost
from ._model import init_params
from ._plan import patterns


DTYPES = ("float64", "float32")
ORDERS = ("auto", "aggregate", "transform")


@dataclass
class Options:
    """Run options (the CLI flags of the same names): PyG's GCN example's defaults."""

    layers: tuple = option((16,), "hidden widths d_1,...,d_{L-1} (16: a 2-layer GCN)",
                           type=lambda text: parse_layers(text))
    epochs: int = option(200, "epochs", bounds=(1, None))
    optimizer: str = option("adam", "adam, or sgd (plain gradient descent, eq. (5))",
                            choices=("adam", "sgd"), modes=("run",))
    lr: float = option(0.01, "learning rate", modes=("run",), bounds=(0, None),
                       closed="neither")
    weight_decay: float = option(5e-4, "L2 on layer 1 (weight and bias), as PyG's example",
                                 modes=("run",), bounds=(0, None))
    dropout: float = option(0.5, "dropout", modes=("run",), bounds=(0, 1), closed="left")
    bias: bool = option(True, "layers without bias", flag="--no-bias", modes=("run",))
    order: str = option("auto", "per layer: exchange rows of H (aggregate first, the "
                                "paper's order: d_{k-1} words) or of H W (transform first: "
                                "d_k words); auto transforms first where d_k < d_{k-1}",
                        choices=ORDERS)
    eval_every: int = option(1, "evaluate (no dropout) every N epochs (0: only after the "
                                "last)", modes=("run",), bounds=(0, None))
    partition: str = option("hp", "rows by the column-net hypergraph (hp), the graph model "
                                  "(gp), uniformly random rows as the paper's RP (rp), "
                                  "balanced random (random), or the one the cost model "
                                  "predicts fastest on --network (auto)",
                            choices=(*PARTITIONS, "auto"))
    partitioner: str = option("auto", "hypergraph backend for hp: auto, mtkahypar, kahypar, "
                                      "lp")
    epsilon: float = option(0.03, "allowed imbalance of the rows' nonzeros (the paper: "
                                  "0.01)", bounds=(0, 10), closed="left")
    weights: str = option("nnz", "what a row weighs when hp, gp and random balance the "
                                 "parts: its nonzeros in A_hat (nnz, the paper's) or in A_hat "
                                 "and its feature row (nnz+features: layer 1's sparse "
                                 "features balanced too), or an epoch's measured compute "
                                 "on it (cost: its dense work too)", choices=WEIGHTS)
    symmetrize: bool = option(False, "train on A + A^T (undirected) instead of the exact "
                                     "directed gradient")
    seed: int = option(0, "seed of the weights, dropout and random partitions")
    init: object = option(None, "a saved gcn model to start from (--save DIR, or the "
                                "loaded result): a warm start with its weights (Adam's "
                                "moments start at zero)", metavar="DIR", type=str,
                          modes=("run",))
    dtype: str = option("float64", "floating-point type of features, weights, messages and "
                                   "kernels (float32 halves the bytes exchanged)",
                        choices=DTYPES)
    random_features: int = option(64, "feature width drawn for graphs without node data",
                                  bounds=(1, None))
    random_classes: int = option(8, "classes drawn for graphs without node data",
                                 bounds=(2, None))

    def check(self) -> None:
        try:
            layers = (self.layers,) if isinstance(self.layers, int) else self.layers
            self.layers = tuple(int(d) for d in layers)
        except (TypeError, ValueError):
            raise InputError(f"--layers must be hidden widths like 16 or 32,16, got "
                             f"{self.layers!r}") from None
        if any(d < 1 for d in self.layers):
            raise InputError(f"--layers widths must be at least 1, got {self.layers}")

    def evaluates(self, epoch: int) -> bool:
        """Whether epoch ``epoch`` also runs the evaluation forward pass."""
        e = int(self.eval_every)
        return e > 0 and epoch % e == 0


DEFAULTS = Options()


def parse_layers(text) -> tuple:
    """``"32,16"`` -> ``(32, 16)`` (the ``--layers`` flag)."""
    try:
        return tuple(int(t) for t in str(text).split(",") if t.strip())
    except ValueError:
        raise InputError(f"--layers takes hidden widths like 16 or 32,16, got "
                         f"{text!r}") from None


@dataclass
class CommandOptions(Options):
    """The training options plus the command line's own flags."""

    compare: bool = option(True, "plan only: skip the comparison with random rows (RP)",
                           flag="--no-compare", modes=("plan",))
    minibatch: bool = option(False, "mini-batch training (one sampled batch per step, "
                                    "section 4.3.3)", modes=("run",))
    batch_size: float = option(0.5, "--minibatch: nodes per batch, a fraction (< 1) or a "
                                    "count", modes=("run",))
    steps: int = option(200, "--minibatch: batches drawn (those without a training node are "
                             "skipped)", modes=("run",))
    sampler: str = option("node", "--minibatch: GraphSAINT's node sampler or uniform nodes",
                          choices=("node", "uniform"), modes=("run",))
    shp: bool = option(True, "--minibatch: keep --partition instead of SHP (Algorithm 3)",
                       flag="--no-shp", modes=("run",))
    in_loop: str = option("auto", "run the steps in the workers' event loops (short steps)",
                          choices=("auto", "yes", "no"), modes=("run",))

    def fit_keywords(self) -> dict:
        """``fit``'s keywords: the training options, ``minibatch`` and ``in_loop``."""
        out = {k: getattr(self, k) for k in Options.__dataclass_fields__}
        if self.minibatch:
            size = self.batch_size
            out["minibatch"] = {"batch_size": int(size) if size >= 1 else float(size),
                                "steps": self.steps, "sampler": self.sampler,
                                "shp": self.shp}
        out["in_loop"] = {"auto": "auto", "yes": True, "no": False}[self.in_loop]
        return out


@dataclass(eq=False)
class Setup:
    """The prepared run (see the module docstring)."""

    options: Options
    nparts: int
    graph: Graph
    assignment: Assignment
    timing: dict = field(default_factory=dict)
    _patterns: dict | None = None
    batches: dict | None = None      # mini-batch steps (``_minibatch.attach_batches``)

    @property
    def K(self) -> int:
        return self.nparts

    @property
    def dims(self) -> tuple:
        """(d_0, d_1, ..., d_L): input features, hidden widths, classes."""
        return (int(self.graph.X.shape[1]), *self.options.layers, self.graph.num_classes)

    @property
    def L(self) -> int:
        return len(self.dims) - 1

    @property
    def dtype(self) -> np.dtype:
        """The floating-point type of the run (``Options.dtype``)."""
        return np.dtype(self.options.dtype)

    @property
    def word_bytes(self) -> int:
        """Bytes per exchanged word (8 for float64, 4 for float32): the plans' unit."""
        return self.dtype.itemsize

    @property
    def transform(self) -> tuple:
        """Per layer k = 1..L: whether Y = H W is formed before the exchange (d_k words a row)
        instead of sending H's rows (d_{k-1}, the paper's order); DGL's rule for ``auto``."""
        d, o = self.dims, self.options.order
        return tuple(o == "transform" or (o == "auto" and d[k] < d[k - 1])
                     for k in range(1, len(d)))

    @property
    def widths(self) -> tuple:
        """Words per row of layer k's forward exchange (k = 1..L)."""
        d = self.dims
        return tuple(d[k] if t else d[k - 1] for k, t in zip(range(1, len(d)), self.transform))

    def patterns(self) -> dict:
        """Connectivity sets of the forward (column-net of A_hat) and backward exchanges."""
        if self._patterns is None:
            self._patterns = patterns(self)
        return self._patterns


def validate_input(graph, nparts=None, **options) -> Graph:
    """The options, the graph and ``nparts`` checked before a cluster starts."""
    opts = checked_options(Options, options, "GCN")   # options first: they cost nothing
    g = as_graph(graph, symmetrize=opts.symmetrize, seed=opts.seed,
                 random_features=opts.random_features, random_classes=opts.random_classes)
    if nparts is not None:
        check_parts(nparts, g.n, "nodes")
    return g


def prepare(graph, nparts: int = 1, features=None, labels=None, split=None, *,
            partition_file=None, **options) -> Setup:
    """Check the input and options and build the setup of a run.

    ``graph``, ``nparts`` (K), ``features``, ``labels``, ``split``, ``partition_file`` and
    ``**options`` are :func:`fit`'s.

    Returns
    -------
    Setup
        ``graph``, ``assignment.parts`` (every node's part), ``dims`` and ``timing``: what
        ``fit``, ``serial_fit``, ``local_fit`` and ``plan`` run on.

    Examples
    --------
    >>> import numpy as np
    >>> from daskhpc import gcn
    >>> s = gcn.prepare("cora", 2, partition="rp", epochs=3)
    >>> s.graph.n, np.bincount(s.assignment.parts).size, s.dims
    (2708, 2, (1433, 16, 7))
    """
    opts = checked_options(Options, options, "GCN")
    if opts.partition == "auto":        # the layout the cost model predicts fastest
        return choose(graph, nparts, network_model(plan_network(None)), features, labels,
                      split, partition_file=partition_file, **options)[1]
    K = check_parts(nparts)
    t0 = time.perf_counter()
    g = as_graph(graph, features, labels, split, symmetrize=opts.symmetrize, seed=opts.seed,
                 random_features=opts.random_features, random_classes=opts.random_classes)
    check_parts(K, g.n, "nodes")
    for note in (random_data_note(g.source), undirected_note(g.source)):
        if note:                    # said where the data are made: the user must see it
            print(f"note: {note}", file=sys.stderr)
    t1 = time.perf_counter()
    a = assign(g, K, partition=opts.partition, partitioner=opts.partitioner,
               epsilon=opts.epsilon, seed=opts.seed, partition_file=partition_file,
               weights=opts.weights)
    t2 = time.perf_counter()
    s = Setup(opts, K, g, a, {"read_s": t1 - t0, "partition_s": t2 - t1})
    if opts.init is not None:
        opts.init = warm_params(opts.init, s.dims, opts.bias, s.dtype)
    return s


def warm_params(init, dims, bias: bool, dtype=np.float64) -> list:
    """A warm start's weights, checked against the run's layers and cast to ``dtype``."""
    if isinstance(init, (str, os.PathLike)):
        init = load_saved(init, workflow="gcn")
    params = getattr(init, "params", init)
    want = [p.shape for p in init_params(dims, 0, bias)]
    try:
        got = [np.array(p, dtype) for p in params]
    except (TypeError, ValueError):
        got = []
    if [p.shape for p in got] != want:
        raise InputError(f"init: the saved model's weights have shapes "
                         f"{[p.shape for p in got]}, this run's layers {list(dims)} need "
                         f"{want}")
    return got


def choose(graph, nparts: int, model: CostModel, features=None, labels=None, split=None, *,
           keep: str | None = None, owner=None, hosts=None, partition_file=None, **options):
    """``(name, setup, rows)``: every layout prepared and priced, the fastest (or ``keep``)."""

    options = {k: v for k, v in options.items() if k != "partition"}
    read = {}

    def build(name):
        # the graph is read (or drawn) once: the next layouts take the first one's
        data = (read["graph"], None, None, None) if read else (graph, features, labels, split)
        s = prepare(*data[:1], nparts, *data[1:], partition_file=partition_file,
                    **options, partition=name)
        read["graph"] = s.graph
        return s

    if partition_file is not None:         # a given partition is the only layout
        layouts, keep = {"file": lambda: build("hp")}, "file"
    else:
        layouts = {name: (lambda name=name: build(name)) for name in LAYOUTS}
    return rank_layouts(layouts, lambda s: epoch_cost(s, model, owner, hosts), keep=keep)
