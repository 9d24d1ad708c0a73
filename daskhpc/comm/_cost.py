"""The cost model: what a message, and a bulk-synchronous step, costs on a network.

One message of n bytes costs ``alpha + beta * n``; a bulk-synchronous step (Valiant's BSP,
``w + g h + l``) costs ``sum_t (floor + max_w compute_tw + max_h link_th)`` over its
phases: the busiest worker's compute and the busiest host's link (docs/architecture.md,
"comm"). No dask here.

Examples
--------
Two hosts, one part each: part 0 computes 1e6 flops, then sends 1 MB to part 1.

>>> import numpy as np
>>> from daskhpc.comm import Plan
>>> p = Plan.from_messages(2, [(0, 0, 1, np.arange(1000))], words_per_unit=125)
>>> m = CostModel(alpha=1e-5, beta=1e-9, flop_s=1e-9)
>>> c = m.step(p, load=[1e6, 0])
>>> round(c.compute_s, 6), round(c.comm_s, 6), round(c.seconds, 6)
(0.001, 0.00101, 0.00201)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import ClassVar

import numpy as np

# Measured with `daskhpc info --calibrate` on the 2-core development machine (loopback TCP,
# worker processes): alpha 0.6-1.0 ms, beta 3.5-5.3e-10 s/byte. Dask's per-transfer cost is
# dominated by the get_data round trip and (de)serialisation, not by the wire.
DEFAULT_ALPHA = 8.0e-4
DEFAULT_BETA = 4.5e-10
# scipy's CSR x dense (16 columns; 200,000 rows, 400,000 nonzeros: out of cache) on one
# core of the same machine, under load: 3.9-5.6e-9 s per flop (a multiply-add is 2
# flops; `kernel_flop_seconds` in daskhpc.runtime), about 3e-9 on a quieter machine.
DEFAULT_FLOP_S = 3.0e-9
# numpy's BLAS matmul of a (20,000 x 64) by (64 x 16) block (GCN's H W shape class) on one
# core of the same machine: 0.2-0.4 ns a flop, 10-35x the sparse kernel's rate.
DEFAULT_DENSE_FLOP_S = 3.0e-10
# The sparse kernel with its operands in a core's cache (2,000 rows, 16,000 nonzeros: 0.7
# MB) on the same core: 0.17-0.20 ns a flop, 6-10x out of cache; its L2 holds 1 MiB.
DEFAULT_CACHE_FLOP_S = 3.0e-10
DEFAULT_CACHE_BYTES = 1 << 20


@dataclass(frozen=True)
class CostModel:
    """A network and a core: what a message and a bulk-synchronous step cost.

    Parameters
    ----------
    alpha, beta : float
        Seconds per message, and per byte, over a host's link.
    flop_s, dense_flop_s : float
        Seconds per unit of load (a flop of the workflow's sparse kernels), and per flop of
        a dense (BLAS) product, on one worker while every worker computes (as a
        calibration times it: workers may share cores).
    cache_flop_s, cache_bytes : float
        Seconds per unit of sparse load where the part's working set (the bytes its kernel
        touches in the phase) is at most ``cache_bytes`` (a core's cache), likewise.
    fan_beta : float
        Seconds per byte over a host's link in a phase in which it exchanges with several
        other hosts at once (all-to-all; at least ``beta``).
    memory_beta, floor_s : float
        Seconds per byte between two workers of one host (0: free); seconds every phase
        costs however little it does (the runtime's barrier).
    duplex : bool
        A link sends and receives at once (the busier direction counts), else they add up.
    name : str
        Where the numbers come from (a profile's name, ``calibrated``, ``default``).

    Examples
    --------
    >>> m = CostModel(alpha=1e-3, beta=1e-9)
    >>> m.message(1_000_000)
    0.002
    """

    alpha: float = DEFAULT_ALPHA
    beta: float = DEFAULT_BETA
    flop_s: float = DEFAULT_FLOP_S
    memory_beta: float = 0.0
    duplex: bool = False
    name: str = "default"
    dense_flop_s: float = DEFAULT_DENSE_FLOP_S
    floor_s: float = 0.0
    cache_flop_s: float = DEFAULT_CACHE_FLOP_S
    cache_bytes: float = DEFAULT_CACHE_BYTES
    fan_beta: float = 0.0
    #: What a calibration measures besides alpha, beta and duplex (saved, loaded, and in
    #: ``dask.config``'s ``daskhpc.comm`` with dashes)
    RATES: ClassVar[tuple] = ("flop_s", "dense_flop_s", "floor_s", "cache_flop_s",
                              "cache_bytes", "fan_beta")

    def message(self, nbytes: float) -> float:
        """Seconds to send one message of ``nbytes``."""
        return self.alpha + self.beta * nbytes

    def plan_time(self, plan) -> float:
        """The per-part alpha-beta estimate of a Plan (see :meth:`Plan.estimate_time`)."""
        return plan.estimate_time(self.alpha, self.beta)

    def step(self, plan, load=None, *, owner=None, hosts=None,
             broadcast: bool = False, dense_load=None, working_set=None) -> StepCost:
        """Predicted seconds of one bulk-synchronous step: ``plan``'s messages after
        ``load``'s compute, parts placed on workers and workers on hosts.

        Parameters
        ----------
        plan : Plan or None
            The step's messages over K parts, its phases the step's (None: no messages).
        load, dense_load : array, optional
            Flops per part of sparse (``flop_s``) and dense (``dense_flop_s``) products:
            ``(K,)`` before the first phase, or ``(nphases, K)`` (``[t, p]`` before phase t).
        working_set : array, optional
            Bytes per part its sparse kernel touches, shaped as ``load``: at most
            ``cache_bytes`` prices ``load`` at ``cache_flop_s``.
        owner, hosts : sequence, optional
            Worker of every part (default: part p on worker p) and host of every worker
            (hashable labels; default: a host each).
        broadcast : bool
            Messages are keys a worker fetches once for all its parts (:meth:`Plan.placed`).

        Returns
        -------
        StepCost
        """
        K = plan.nparts if plan is not None else np.asarray(load).shape[-1]
        owner = np.arange(K) if owner is None else np.asarray(owner, dtype=np.int64)
        if owner.shape != (K,):
            raise ValueError(f"owner needs one worker per part ({K}), got {owner.shape}")
        nworkers = int(owner.max()) + 1 if K else 0
        host_of = _host_index(hosts, nworkers)
        nhosts = int(host_of.max()) + 1 if host_of.size else 0
        nphases = int(plan.nphases) if plan is not None else 1
        work = _phase_load(load, nphases, K)
        fits = (_phase_load(working_set, work.shape[0], K)[:work.shape[0]] <= self.cache_bytes
                if working_set is not None else False)
        work = work * np.where(fits, self.cache_flop_s, self.flop_s)
        if dense_load is not None:
            dense = _phase_load(dense_load, nphases, K) * self.dense_flop_s
            rows = max(work.shape[0], dense.shape[0])
            work = _pad(work, rows) + _pad(dense, rows)
        nphases = max(nphases, work.shape[0])
        # busiest worker per phase: its parts compute one after another
        per_worker = np.zeros((nphases, nworkers))
        np.add.at(per_worker, (slice(None), owner), work[:nphases] if work.size else 0.0)
        compute = per_worker.max(axis=1) if nworkers else np.zeros(nphases)
        sent_b, recv_b, sent_m, recv_m, memory, fan_out, fan_in = (
            np.zeros((nphases, nhosts)) for _ in range(7))
        if plan is not None and plan.num_messages:
            w = plan.placed(owner, nworkers, broadcast=broadcast)  # bundled per worker pair
            hs, hd = host_of[w.src], host_of[w.dst]
            b = w.message_bytes().astype(float)
            away = hs != hd
            for table, at, values in ((sent_b, hs, b), (recv_b, hd, b),
                                      (sent_m, hs, 1.0), (recv_m, hd, 1.0)):
                vals = np.broadcast_to(values, b.shape)[away]
                np.add.at(table, (w.phase[away], at[away]), vals)
            np.add.at(memory, (w.phase[~away], hs[~away]), b[~away] * self.memory_beta)
            # hosts a host sends to, and receives from, in a phase
            t, s, d = np.unique(np.stack([w.phase, hs, hd])[:, away], axis=1)
            np.add.at(fan_out, (t, s), 1)
            np.add.at(fan_in, (t, d), 1)
        # all to all: flows from or to several hosts share a link worse than one flow does
        fan_beta = max(self.beta, self.fan_beta)
        send = self.alpha * sent_m + np.where(fan_out > 1, fan_beta, self.beta) * sent_b
        recv = self.alpha * recv_m + np.where(fan_in > 1, fan_beta, self.beta) * recv_b
        link = np.maximum(send, recv) if self.duplex else send + recv
        per_host = link + memory
        comm = per_host.max(axis=1) if nhosts else np.zeros(nphases)
        comm = comm + self.floor_s          # the phase's barrier, counted with its traffic
        host_bytes = (sent_b + recv_b).sum(axis=0)
        return StepCost(seconds=float((compute + comm).sum()),
                        compute_s=float(compute.sum()), comm_s=float(comm.sum()),
                        phase_s=(compute + comm).tolist(),
                        host_link_bytes=[int(x) for x in host_bytes],
                        host_link_messages=[int(x) for x in (sent_m + recv_m).sum(axis=0)],
                        busiest_host=int(np.argmax(host_bytes)) if nhosts else -1)

    def allreduce(self, nbytes: float, nparts: int) -> float:
        """Seconds of a dense recursive-doubling allreduce of ``nbytes`` over ``nparts``
        hosts: ceil(log2 P) rounds of the whole vector each way, and a floor a round.

        Examples
        --------
        >>> CostModel(alpha=1.0, beta=0.01).allreduce(100, 8)
        12.0
        """
        rounds = int(np.ceil(np.log2(nparts))) if nparts > 1 else 0
        return rounds * ((1 if self.duplex else 2) * self.message(nbytes) + self.floor_s)

    def replace(self, **changes) -> CostModel:
        """A copy with ``changes`` (e.g. another ``flop_s``)."""
        return CostModel(**{**asdict(self), **changes})

    def fill(self, given: dict) -> dict:
        """``given`` with this model's ``alpha``, ``beta`` and ``floor`` where it lacks them."""
        mine = {"alpha": self.alpha, "beta": self.beta, "floor": self.floor_s}
        return {**given, **{k: v for k, v in mine.items() if given.get(k) is None}}

    def as_dict(self) -> dict:
        return {"name": self.name, "alpha_s": self.alpha, "beta_s_per_byte": self.beta,
                "flop_s": self.flop_s, "dense_flop_s": self.dense_flop_s,
                "memory_beta_s_per_byte": self.memory_beta, "duplex": self.duplex,
                "floor_s": self.floor_s, "cache_flop_s": self.cache_flop_s,
                "cache_bytes": self.cache_bytes, "fan_beta_s_per_byte": self.fan_beta}

    @classmethod
    def from_config(cls, exchange: str | None = None) -> CostModel:
        """The model in ``dask.config``'s ``daskhpc.comm`` (what ``daskhpc info --calibrate
        --save`` writes; ``exchange``: that mode's fit where there is one), else the
        defaults. Imports dask only when called: ``daskhpc.comm`` stays free of it."""
        try:
            from daskhpc import _config
        except ImportError:                 # no dask installed
            return cls()

        rates = {k: float(_config.get("comm." + k.replace("_", "-"), None) or getattr(cls, k))
                 for k in cls.RATES}
        if exchange is not None:
            fit = _config.get(f"comm.exchange.{exchange}", None)
            if fit:
                return cls(float(fit["alpha"]), float(fit["beta"]), name="calibrated", **rates)
        return cls(float(_config.get("comm.alpha", DEFAULT_ALPHA)),
                   float(_config.get("comm.beta", DEFAULT_BETA)), name="config", **rates)


@dataclass
class StepCost:
    """The prediction of one step (:meth:`CostModel.step`): ``seconds = compute_s + comm_s``,
    each summed over phases (the busiest worker's compute, the busiest host's traffic);
    ``phase_s`` per phase; ``host_link_bytes`` and ``host_link_messages`` per host (sent
    plus received, other hosts only); ``busiest_host`` carries the most bytes (-1: none)."""

    seconds: float
    compute_s: float
    comm_s: float
    phase_s: list = field(default_factory=list)
    host_link_bytes: list = field(default_factory=list)
    host_link_messages: list = field(default_factory=list)
    busiest_host: int = -1

    def then(self, other: StepCost) -> StepCost:
        """This step followed by ``other`` (its phases after these; links add up).

        Examples
        --------
        >>> a = StepCost(3.0, 1.0, 2.0, [3.0], [10, 0], [1, 0], 0)
        >>> b = StepCost(1.0, 0.0, 1.0, [1.0], [0, 20], [0, 1], 1)
        >>> c = a.then(b)
        >>> c.seconds, c.host_link_bytes, c.busiest_host
        (4.0, [10, 20], 1)
        """
        n = max(len(self.host_link_bytes), len(other.host_link_bytes))

        def add(x, y):
            return [int(u + v) for u, v in zip(x + [0] * (n - len(x)), y + [0] * (n - len(y)))]

        link = add(self.host_link_bytes, other.host_link_bytes)
        return StepCost(self.seconds + other.seconds, self.compute_s + other.compute_s,
                        self.comm_s + other.comm_s, self.phase_s + other.phase_s, link,
                        add(self.host_link_messages, other.host_link_messages),
                        int(np.argmax(link)) if link else -1)

    def plus_comm(self, seconds: float) -> StepCost:
        """This step with ``seconds`` more communication (a collective outside the plan)."""
        return StepCost(self.seconds + seconds, self.compute_s, self.comm_s + seconds,
                        self.phase_s + [seconds], self.host_link_bytes,
                        self.host_link_messages, self.busiest_host)

    def section(self, model: CostModel) -> dict:
        """A report's ``plan`` section: the prediction and the network it was priced on."""
        return {"predicted_s_per_step": self.seconds,
                "prediction": {**self.as_dict(), "network": model.as_dict()}}

    def as_dict(self) -> dict:
        """The numbers a report keeps (not the per-phase list)."""
        return {"predicted_s_per_step": self.seconds, "compute_s": self.compute_s,
                "comm_s": self.comm_s, "busiest_host": self.busiest_host,
                "busiest_host_link_bytes": max(self.host_link_bytes, default=0),
                "phases": len(self.phase_s)}


def rank_layouts(candidates: dict, price, keep: str | None = None):
    """Build every candidate layout, price it, and rank them fastest first.

    Parameters
    ----------
    candidates : dict
        ``{name: build()}``: a callable per layout, returning what ``price`` takes (a
        workflow's prepared setup).
    price : callable
        ``price(built) -> StepCost``.
    keep : str, optional
        The layout whose build to return (default: the fastest).

    Returns
    -------
    (str, object, list of dict)
        The kept layout's name and build, and a row per layout (``as_dict``), fastest first.

    Examples
    --------
    >>> m = CostModel(alpha=0.0, beta=0.0, flop_s=1.0)
    >>> name, _, rows = rank_layouts({"a": lambda: [3, 1], "b": lambda: [2, 2]},
    ...                              lambda load: m.step(None, load))
    >>> name, [(r["layout"], r["predicted_s_per_step"]) for r in rows]
    ('b', [('b', 2.0), ('a', 3.0)])
    """
    built, rows = {}, []
    for name, build in candidates.items():
        built[name] = build()
        cost = price(built[name])
        rows.append({"layout": name, **cost.as_dict()})
    rows.sort(key=lambda r: r["predicted_s_per_step"])
    chosen = keep if keep is not None else rows[0]["layout"]
    return chosen, built[chosen], rows


def _host_index(hosts, nworkers: int) -> np.ndarray:
    """Host index (0, 1, ... in order of first appearance) of every worker."""
    if hosts is None:
        return np.arange(nworkers, dtype=np.int64)
    hosts = list(hosts)
    if len(hosts) < nworkers:
        raise ValueError(f"hosts names {len(hosts)} workers, the parts use {nworkers}")
    index: dict = {}
    return np.array([index.setdefault(h, len(index)) for h in hosts[:nworkers]],
                    dtype=np.int64)


def _pad(a: np.ndarray, rows: int) -> np.ndarray:
    """``a`` with zero rows appended up to ``rows``."""
    return np.pad(a, ((0, max(rows - a.shape[0], 0)), (0, 0)))


def _phase_load(load, nphases: int, K: int) -> np.ndarray:
    """``load`` as a (phases, K) array of floats (a (K,) load in phase 0)."""
    if load is None:
        return np.zeros((nphases, K))
    a = np.asarray(load, dtype=float)
    if a.ndim == 1:
        if a.shape != (K,):
            raise ValueError(f"load needs one entry per part ({K}), got {a.shape}")
        return _pad(a[None], nphases)
    if a.ndim != 2 or a.shape[1] != K:
        raise ValueError(f"load must be (K,) or (phases, K) with K = {K}, got {a.shape}")
    return _pad(a, nphases)       # phases without compute
