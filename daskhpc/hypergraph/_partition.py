"""`partition()`: one entry point over a registry of partitioner backends (imported only
when used: ``mtkahypar`` / ``kahypar`` load native libraries), and its result."""

from __future__ import annotations

import hashlib
import importlib
import time
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from daskhpc.errors import InputError

from ._auto import choose_partitioner
from ._hypergraph import Hypergraph
from ._metrics import metrics as _metrics
from ._partfile import read_part_file

OBJECTIVES = ("km1", "soed", "cut")

# name -> "module:function"; a workflow or user can add entries with register_partitioner().
_BACKENDS: dict[str, str] = {
    "mtkahypar": "daskhpc.hypergraph._mtkahypar:partition_mtkahypar",
    "kahypar": "daskhpc.hypergraph._kahypar:partition_kahypar",
    "random": "daskhpc.hypergraph._simple:partition_random",
    "block": "daskhpc.hypergraph._simple:partition_block",
    "graph": "daskhpc.hypergraph._graphpart:partition_graph",
    "lp": "daskhpc.hypergraph._refine:partition_lp",
}
# Not a backend: partition(h, K, "auto") picks one of the above (see _auto.py).
AUTO = "auto"

#: Partitions of Mt-KaHyPar's deterministic preset kept per process (the newest
#: ``MEMO_SIZE``): a notebook's second fit of the same data does not partition again.
MEMO_SIZE = 8
_MEMO: OrderedDict = OrderedDict()


def register_partitioner(name: str, target) -> None:
    """Add a backend: ``target`` is a callable or a ``"module:function"`` string."""
    _BACKENDS[name] = target


def partitioners() -> list[str]:
    """Names of the registered backends (``partition`` also takes ``"auto"``)."""
    return sorted(_BACKENDS)


def _resolve(name: str):
    try:
        target = _BACKENDS[name]
    except KeyError:
        raise InputError(f"unknown partitioner {name!r}; choose one of {partitioners()}") from None
    if callable(target):
        return target
    module, func = target.split(":")
    return getattr(importlib.import_module(module), func)


@dataclass(eq=False)
class Partition:
    """A K-way vertex partition and how it was made.

    ``parts[v]`` is the part of vertex v. :meth:`metrics` computes the cut metrics on the
    hypergraph it was made for; :meth:`save` writes one part id per line.

    Examples
    --------
    >>> h = Hypergraph.from_nets(4, [[0, 1], [1, 2, 3], [3]])
    >>> p = partition(h, 2, partitioner="block")
    >>> p.parts.tolist(), p.metrics()["km1"]
    ([0, 0, 1, 1], 1)
    """

    parts: np.ndarray
    nparts: int
    partitioner: str = "given"
    objective: str | None = None
    epsilon: float | None = None
    seed: int | None = None
    hypergraph: Hypergraph | None = field(default=None, repr=False)
    time_s: float = 0.0
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        self.parts = np.ascontiguousarray(self.parts, dtype=np.int64)
        self._metrics = None

    def metrics(self, hypergraph: Hypergraph | None = None) -> dict:
        """Cut, km1, SOED, connectivity, part weights and imbalance (see ``_metrics``)."""
        h = hypergraph if hypergraph is not None else self.hypergraph
        if h is None:
            raise ValueError("this partition has no hypergraph; pass one to metrics()")
        if hypergraph is not None:
            return _metrics(h, self.parts, self.nparts, self.epsilon)
        if self._metrics is None:
            self._metrics = _metrics(h, self.parts, self.nparts, self.epsilon)
        return self._metrics

    def report(self) -> dict:
        """The ``partition`` section of the JSON report."""
        m = self.metrics()
        out = {k: m[k] for k in ("imbalance", "km1", "soed", "cut")}
        out["imbalance_per_constraint"] = m["imbalance_per_constraint"]
        if "auto" in self.meta:
            out["auto"] = {k: self.meta["auto"][k] for k in ("backend", "options", "rule")}
        if "balanced" in m:
            out.update(epsilon=m["epsilon"], balanced=m["balanced"],
                       balance_possible=m["balance_possible"])
            if m["balance_notes"]:
                out["balance_notes"] = m["balance_notes"]
        return out

    def save(self, path) -> None:
        """One part id per line, in vertex order (the format ``--partition-file`` reads)."""
        np.savetxt(path, self.parts, fmt="%d")

    @classmethod
    def load(cls, path, nparts: int | None = None, num_vertices: int | None = None) -> "Partition":
        """Read a file written by :meth:`save` (or by PaToH / KaHyPar: one id per line)."""
        parts = read_part_file(path, num_vertices=num_vertices, nparts=nparts)
        return cls(parts, int(nparts or (parts.max() + 1 if parts.size else 1)), "file",
                   meta={"path": str(path)})

    def part_sizes(self) -> np.ndarray:
        return np.bincount(self.parts, minlength=self.nparts)

    def __repr__(self):
        head = (f"Partition({self.nparts} parts by {self.partitioner}"
                f"{', ' + self.objective if self.objective else ''}, {self.parts.size} vertices")
        if self.hypergraph is None:
            return head + ")"
        m = self.metrics()
        return (head + f"; km1={m['km1']} soed={m['soed']} cut={m['cut']} "
                f"imbalance={m['imbalance']:.3f})")

    def __dask_tokenize__(self):
        return ("daskhpc.Partition", self.nparts, hashlib.sha1(self.parts.tobytes()).hexdigest())


def _trivial(h: Hypergraph, nparts: int, allow_empty: bool) -> np.ndarray | None:
    """Answer the cases no backend should see: K = 1 and K >= |V|."""
    if nparts < 1:
        raise InputError(f"the number of parts must be at least 1, got {nparts}")
    if h.num_vertices == 0:
        raise InputError("cannot partition a hypergraph with no vertices")
    if nparts == 1:
        return np.zeros(h.num_vertices, dtype=np.int64)
    if nparts > h.num_vertices and not allow_empty:
        raise InputError(
            f"more parts ({nparts}) than vertices ({h.num_vertices}): every part would not "
            "get a vertex; use fewer parts (or allow_empty=True)")
    if nparts >= h.num_vertices:
        return np.arange(h.num_vertices, dtype=np.int64)
    return None


def partition(h: Hypergraph, nparts: int, partitioner: str = "mtkahypar", *,
              objective: str = "km1", epsilon: float = 0.03, seed: int = 0, threads: int = 1,
              allow_empty: bool = False, memo: bool = True, **options) -> Partition:
    """Partition ``h`` into ``nparts`` parts with the named backend.

    Parameters
    ----------
    h : Hypergraph
    nparts : int
        K. More parts than vertices is an error unless ``allow_empty`` (then one vertex per part).
    partitioner : {"mtkahypar", "kahypar", "random", "block", "graph", "lp", "auto"}
        ``random`` and ``block`` ignore the objective; ``kahypar`` optimises SOED through the
        recursive-bisection net-cost scheme of the SSGD paper (section V); ``graph``
        partitions the clique-expanded or given graph (``graph=`` a symmetric scipy matrix);
        ``lp`` refines a random partition by label propagation; ``auto`` chooses Mt-KaHyPar
        (deterministic or default preset) or ``lp`` by the instance's size (``_auto.py``):
        the result's ``partitioner`` is the chosen backend and ``meta["auto"]`` says why.
    objective : {"km1", "soed", "cut"}
    epsilon : float
        Allowed imbalance: every part weighs at most ``(1 + eps) * ceil(W / K)``.
    seed, threads : int
    memo : bool
        Reuse this process's last ``MEMO_SIZE`` deterministic Mt-KaHyPar results
        (``meta["memo"]`` says so).
    options
        Backend specific (``preset`` for Mt-KaHyPar, ``graph`` for the graph backend, ...).

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from daskhpc.hypergraph import column_net
    >>> A = sp.random_array((200, 300), density=0.02, random_state=0, format="csr")
    >>> p = partition(column_net(A), 4, "random", seed=1)
    >>> int(p.part_sizes().sum())
    200
    """
    if objective not in OBJECTIVES:
        raise InputError(f"unknown objective {objective!r}; choose one of {list(OBJECTIVES)}")
    meta = {}
    if partitioner == AUTO:
        meta["auto"] = choose_partitioner(h, nparts)
        partitioner = meta["auto"]["backend"]
        options = {**meta["auto"]["options"], **options}  # explicit options win
    backend = _resolve(partitioner)
    t0 = time.perf_counter()
    parts = _trivial(h, nparts, allow_empty)
    key = _memo_key(h, nparts, partitioner, objective, epsilon, seed, threads, options) \
        if parts is None and memo else None
    if key is not None and key in _MEMO:
        _MEMO.move_to_end(key)
        parts, took = _MEMO[key]
        meta["memo"] = {"partition_s": took}     # this process partitioned it before
        return Partition(parts.copy(), nparts, partitioner, objective, epsilon, seed, h,
                         time.perf_counter() - t0, meta)
    if parts is None:
        parts = np.asarray(backend(h, nparts, objective=objective, epsilon=epsilon, seed=seed,
                                   threads=threads, **options), dtype=np.int64)
    elapsed = time.perf_counter() - t0
    if parts.shape != (h.num_vertices,) or (parts.size and (parts.min() < 0 or parts.max() >= nparts)):
        raise RuntimeError(f"partitioner {partitioner!r} returned an invalid partition")
    if key is not None:
        _MEMO[key] = (parts.copy(), elapsed)
        while len(_MEMO) > MEMO_SIZE:
            _MEMO.popitem(last=False)
    return Partition(parts, nparts, partitioner, objective, epsilon, seed, h, elapsed, meta)


def _memo_key(h: Hypergraph, nparts, partitioner, objective, epsilon, seed, threads,
              options) -> tuple | None:
    """The memo's key of a deterministic Mt-KaHyPar call (None: not memoised): a digest of
    everything the backend reads of ``h``, and every argument."""
    if partitioner != "mtkahypar" or options.get("preset", "deterministic") != "deterministic" \
            or any(not isinstance(v, (str, int, float, bool)) for v in options.values()):
        return None
    d = hashlib.blake2b(digest_size=16)
    for a in (h.net_ptr, h.pins, h.vertex_weights, h.net_costs):
        d.update(str(a.shape).encode())
        d.update(np.ascontiguousarray(a).tobytes())
    return (h.num_vertices, d.hexdigest(), int(nparts), objective, float(epsilon), int(seed),
            int(threads), tuple(sorted(options.items())))
