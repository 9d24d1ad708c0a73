"""The Hypergraph: nets stored as CSR pins, vertex weights with several constraints, net costs."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from daskhpc.arrays import unique_sorted


@dataclass(eq=False)
class Hypergraph:
    """A hypergraph with CSR pins, multi-constraint vertex weights and net costs.

    Parameters
    ----------
    num_vertices : int
        Number of vertices ``|V|``; isolated vertices (in no net) are allowed.
    net_ptr : array of int64, shape (num_nets + 1,)
        Net ``n`` has pins ``pins[net_ptr[n]:net_ptr[n+1]]``. Empty nets are allowed.
    pins : array of int64
        Vertex ids in ``[0, num_vertices)``; a vertex appears at most once per net.
    vertex_weights : array of int64, shape (num_vertices, C), optional
        ``C`` balance constraints (one column per constraint). Default: unit weights.
        A 1-D array is taken as one constraint.
    net_costs : array of int64, shape (num_nets,), optional
        ``c[n]`` in the cutsize definitions. Default: 1.
    name : str
        Which model built it (for reports).

    Examples
    --------
    >>> h = Hypergraph.from_nets(4, [[0, 1], [1, 2, 3], [3]])
    >>> h.num_nets, h.num_pins, h.num_constraints
    (3, 6, 1)
    """

    num_vertices: int
    net_ptr: np.ndarray
    pins: np.ndarray
    vertex_weights: np.ndarray | None = None
    net_costs: np.ndarray | None = None
    name: str = ""
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        self.num_vertices = int(self.num_vertices)
        self.net_ptr = np.ascontiguousarray(self.net_ptr, dtype=np.int64)
        self.pins = np.ascontiguousarray(self.pins, dtype=np.int64)
        if self.net_ptr.ndim != 1 or self.net_ptr.size == 0 or self.net_ptr[0] != 0:
            raise ValueError("net_ptr must be a 1-D array starting at 0")
        if np.any(np.diff(self.net_ptr) < 0) or self.net_ptr[-1] != self.pins.size:
            raise ValueError("net_ptr must be non-decreasing and end at len(pins)")
        if self.pins.size and (self.pins.min() < 0 or self.pins.max() >= self.num_vertices):
            raise ValueError(f"pins must lie in [0, {self.num_vertices})")
        if self.vertex_weights is None:
            self.vertex_weights = np.ones((self.num_vertices, 1), dtype=np.int64)
        w = np.asarray(self.vertex_weights)
        if w.ndim == 1:
            w = w[:, None]
        if w.shape[0] != self.num_vertices:
            raise ValueError(f"vertex_weights has {w.shape[0]} rows for {self.num_vertices} vertices")
        if np.any(w < 0):
            raise ValueError("vertex weights must be non-negative")
        self.vertex_weights = np.ascontiguousarray(w, dtype=np.int64)
        if self.net_costs is None:
            self.net_costs = np.ones(self.num_nets, dtype=np.int64)
        self.net_costs = np.ascontiguousarray(self.net_costs, dtype=np.int64)
        if self.net_costs.shape != (self.num_nets,):
            raise ValueError(f"net_costs must have shape ({self.num_nets},)")

    @classmethod
    def from_nets(cls, num_vertices, nets, vertex_weights=None, net_costs=None, name=""):
        """Build from a list of pin lists (small cases and tests)."""
        sizes = np.fromiter((len(n) for n in nets), dtype=np.int64, count=len(nets))
        net_ptr = np.concatenate([[0], np.cumsum(sizes)])
        pins = np.fromiter((v for n in nets for v in n), dtype=np.int64, count=int(net_ptr[-1]))
        return cls(num_vertices, net_ptr, pins, vertex_weights, net_costs, name)

    @classmethod
    def from_incidence(cls, net_of_pin, vertex_of_pin, num_nets, num_vertices, **kw):
        """Build from (net, vertex) pairs; duplicate pairs are merged."""
        net_of_pin = np.asarray(net_of_pin, dtype=np.int64)
        vertex_of_pin = np.asarray(vertex_of_pin, dtype=np.int64)
        key = unique_sorted(net_of_pin * np.int64(num_vertices) + vertex_of_pin)
        nets, verts = np.divmod(key, np.int64(max(num_vertices, 1)))
        net_ptr = np.zeros(num_nets + 1, dtype=np.int64)
        np.cumsum(np.bincount(nets, minlength=num_nets), out=net_ptr[1:])
        return cls(num_vertices, net_ptr, verts, **kw)

    @property
    def num_nets(self) -> int:
        return self.net_ptr.size - 1

    @property
    def num_pins(self) -> int:
        return int(self.pins.size)

    @property
    def num_constraints(self) -> int:
        return self.vertex_weights.shape[1]

    @property
    def net_sizes(self) -> np.ndarray:
        return np.diff(self.net_ptr)

    def net_of_pin(self) -> np.ndarray:
        """Net id of every pin (the expanded ``net_ptr``)."""
        return np.repeat(np.arange(self.num_nets, dtype=np.int64), self.net_sizes)

    def total_weight(self) -> np.ndarray:
        return self.vertex_weights.sum(axis=0)

    def nets(self, n: int) -> np.ndarray:
        """Pins of net ``n``."""
        return self.pins[self.net_ptr[n] : self.net_ptr[n + 1]]

    def with_net_costs(self, costs) -> "Hypergraph":
        """The same hypergraph with other net costs (e.g. F for SOED, R for CP-ALS)."""
        costs = np.broadcast_to(np.asarray(costs, dtype=np.int64), (self.num_nets,)).copy()
        return Hypergraph(self.num_vertices, self.net_ptr, self.pins, self.vertex_weights,
                          costs, self.name, dict(self.meta))

    def subhypergraph(self, vertices: np.ndarray) -> tuple["Hypergraph", np.ndarray]:
        """Vertex-induced sub-hypergraph with cut-net splitting: the sub-hypergraph
        (vertices renumbered, nets without pins dropped) and the ids of the nets it kept."""
        vertices = np.asarray(vertices, dtype=np.int64)
        local = np.full(self.num_vertices, -1, dtype=np.int64)
        local[vertices] = np.arange(vertices.size)
        keep_pin = local[self.pins] >= 0
        net_of_pin = self.net_of_pin()[keep_pin]
        counts = np.bincount(net_of_pin, minlength=self.num_nets)
        kept = np.flatnonzero(counts > 0)
        net_ptr = np.zeros(kept.size + 1, dtype=np.int64)
        np.cumsum(counts[kept], out=net_ptr[1:])
        sub = Hypergraph(vertices.size, net_ptr, local[self.pins[keep_pin]],
                         self.vertex_weights[vertices], self.net_costs[kept], self.name)
        return sub, kept

    def __repr__(self):
        return (f"Hypergraph({self.name or 'unnamed'}: {self.num_vertices} vertices, "
                f"{self.num_nets} nets, {self.num_pins} pins, {self.num_constraints} constraint(s))")

    def __dask_tokenize__(self):
        digest = hashlib.sha1()
        for a in (self.net_ptr, self.pins, self.vertex_weights, self.net_costs):
            digest.update(np.ascontiguousarray(a).tobytes())
        return ("daskhpc.Hypergraph", self.num_vertices, digest.hexdigest())
