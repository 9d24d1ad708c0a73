"""The communication Plan: every message a distributed run will send, and its report.

A message is (phase, source part, destination part, indices): in phase ``t`` part ``s``
sends the units ``indices`` (rows of a factor or feature matrix, or nonzeros) to part
``d``. Messages are stored as flat arrays (CSR over messages), so a Plan for K = 1024 parts
and millions of rows stays cheap, and every metric is a vectorised reduction.

Metrics (SSGD paper, section VI; the other papers use the same words):

* tot vol / tot msgs: summed over all messages.
* max vol / max msgs: the largest total that one part sends over the whole plan.
* sum-max vol / sum-max msgs: per phase, the largest per-part send; summed over phases
  (the bulk-synchronous critical path).
* max-max vol / max-max msgs: the largest per-part send in any single phase.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(eq=False)
class Plan:
    """Messages as flat arrays; message m sends ``indices[ptr[m]:ptr[m+1]]``.

    Parameters
    ----------
    nparts : int
        K, the number of parts (senders and receivers are in ``[0, K)``).
    phase, src, dst : int arrays, one entry per message
    ptr : int array (len = messages + 1), optional
        CSR pointer into ``indices``; omit both to give only ``volume`` per message (plans
        too large to list every row).
    indices : int array, optional
    volume : int array, optional
        Units per message; derived from ``ptr`` when indices are given.
    nphases : int, optional
        Number of phases (some may send nothing); default ``phase.max() + 1``.
    unit : str
        What one unit is ("rows", "nonzeros").
    words_per_unit : int
        Words per unit (F for SSGD rows, R for CP-ALS, 1 for nonzeros + index words...).
    word_bytes : int
        Bytes per word (8 for float64).
    name : str

    Examples
    --------
    >>> p = Plan.from_messages(3, [(0, 0, 1, [4, 5]), (0, 2, 1, [6]), (1, 1, 0, [4])],
    ...                        words_per_unit=16)
    >>> r = p.report()
    >>> r["tot_vol"], r["max_vol"], r["sum_max_vol"], r["tot_msgs"], r["sum_max_msgs"]
    (4, 2, 3, 3, 2)
    """

    nparts: int
    phase: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    ptr: np.ndarray | None = None
    indices: np.ndarray | None = None
    volume: np.ndarray | None = None
    nphases: int | None = None
    unit: str = "rows"
    words_per_unit: int = 1
    word_bytes: int = 8
    name: str = ""
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        self.nparts = int(self.nparts)
        self.phase = np.ascontiguousarray(self.phase, dtype=np.int64)
        self.src = np.ascontiguousarray(self.src, dtype=np.int64)
        self.dst = np.ascontiguousarray(self.dst, dtype=np.int64)
        m = self.phase.size
        if self.src.shape != (m,) or self.dst.shape != (m,):
            raise ValueError("phase, src and dst must have one entry per message")
        if self.indices is not None:
            self.ptr = np.ascontiguousarray(self.ptr, dtype=np.int64)
            self.indices = np.ascontiguousarray(self.indices, dtype=np.int64)
            if self.ptr.shape != (m + 1,) or self.ptr[-1] != self.indices.size:
                raise ValueError("ptr must have messages + 1 entries ending at len(indices)")
            derived = np.diff(self.ptr)
            if self.volume is not None and not np.array_equal(self.volume, derived):
                raise ValueError("volume disagrees with the indices")
            self.volume = derived
        elif self.volume is None:
            raise ValueError("give indices (with ptr) or a volume per message")
        self.volume = np.ascontiguousarray(self.volume, dtype=np.int64)
        if m:
            if min(self.src.min(), self.dst.min()) < 0 or max(self.src.max(), self.dst.max()) >= self.nparts:
                raise ValueError(f"message endpoints must lie in [0, {self.nparts})")
            if np.any(self.src == self.dst):
                raise ValueError("a part does not send messages to itself")
            if self.phase.min() < 0:
                raise ValueError("phases must be non-negative")
        top = int(self.phase.max()) + 1 if m else 0
        self.nphases = max(int(self.nphases if self.nphases is not None else top), top)

    # -- construction -----------------------------------------------------
    @classmethod
    def from_messages(cls, nparts: int, messages, **kw) -> "Plan":
        """From an iterable of ``(phase, src, dst, indices)`` tuples (small plans, tests)."""
        messages = list(messages)
        lens = [len(m[3]) for m in messages]
        ptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        idx = np.concatenate([np.asarray(m[3], dtype=np.int64) for m in messages]) \
            if messages else np.zeros(0, np.int64)
        cols = np.array([m[:3] for m in messages], dtype=np.int64).reshape(-1, 3)
        return cls(nparts, cols[:, 0], cols[:, 1], cols[:, 2], ptr, idx, **kw)

    @classmethod
    def concat(cls, plans, nparts: int | None = None, **kw) -> "Plan":
        """Plans one after another: phases of the second follow those of the first."""
        plans = list(plans)
        offs = np.cumsum([0] + [p.nphases for p in plans[:-1]])
        has_idx = all(p.indices is not None for p in plans)
        first = plans[0]
        kw = {"unit": first.unit, "words_per_unit": first.words_per_unit,
              "word_bytes": first.word_bytes, **kw}
        args = dict(
            nparts=nparts or max(p.nparts for p in plans),
            phase=np.concatenate([p.phase + o for p, o in zip(plans, offs)]),
            src=np.concatenate([p.src for p in plans]),
            dst=np.concatenate([p.dst for p in plans]),
            nphases=int(sum(p.nphases for p in plans)), **kw)
        if has_idx:
            args["indices"] = np.concatenate([p.indices for p in plans])
            args["ptr"] = np.concatenate([[0], np.cumsum(np.concatenate([p.volume for p in plans]))])
        else:
            args["volume"] = np.concatenate([p.volume for p in plans])
        return cls(**args)

    # -- access -------------------------------------------------------------
    @property
    def num_messages(self) -> int:
        return int(self.phase.size)

    def message(self, m: int) -> tuple[int, int, int, np.ndarray | None]:
        """(phase, src, dst, indices) of message m."""
        idx = None if self.indices is None else self.indices[self.ptr[m] : self.ptr[m + 1]]
        return int(self.phase[m]), int(self.src[m]), int(self.dst[m]), idx

    def messages(self, phase: int | None = None):
        """Iterate (phase, src, dst, indices), optionally of one phase only."""
        sel = range(self.num_messages) if phase is None else np.flatnonzero(self.phase == phase)
        for m in sel:
            yield self.message(int(m))

    @property
    def unit_bytes(self) -> int:
        return self.words_per_unit * self.word_bytes

    # -- metrics ------------------------------------------------------------
    def _per_phase_part(self, values) -> np.ndarray:
        """(nphases, nparts) table of a per-message quantity summed by sender."""
        out = np.zeros((self.nphases, self.nparts), dtype=np.int64)
        np.add.at(out, (self.phase, self.src), values)
        return out

    def send_volume(self) -> np.ndarray:
        """(nphases, nparts): units each part sends in each phase."""
        return self._per_phase_part(self.volume)

    def send_messages(self) -> np.ndarray:
        """(nphases, nparts): messages each part sends in each phase."""
        return self._per_phase_part(np.ones_like(self.volume))

    def recv_volume(self) -> np.ndarray:
        """(nphases, nparts): units each part receives in each phase."""
        out = np.zeros((self.nphases, self.nparts), dtype=np.int64)
        np.add.at(out, (self.phase, self.dst), self.volume)
        return out

    def comm_matrix(self) -> np.ndarray:
        """K x K units sent from row part to column part over the whole plan."""
        out = np.zeros((self.nparts, self.nparts), dtype=np.int64)
        np.add.at(out, (self.src, self.dst), self.volume)
        return out

    def report(self) -> dict:
        """The ``plan`` section of the JSON report (units, not words; see ``words_per_unit``)."""
        vol, msg = self.send_volume(), self.send_messages()
        per_part_vol, per_part_msg = vol.sum(axis=0), msg.sum(axis=0)
        phase_max_vol = vol.max(axis=1) if vol.size else np.zeros(0, np.int64)
        phase_max_msg = msg.max(axis=1) if msg.size else np.zeros(0, np.int64)

        def top(a):
            return int(a.max()) if a.size else 0

        return {
            "tot_vol": int(self.volume.sum()),
            "max_vol": top(per_part_vol),
            "avg_vol": float(per_part_vol.mean()) if self.nparts else 0.0,
            "sum_max_vol": int(phase_max_vol.sum()),
            "max_max_vol": top(phase_max_vol),
            "tot_msgs": self.num_messages,
            "max_msgs": top(per_part_msg),
            "avg_msgs": float(per_part_msg.mean()) if self.nparts else 0.0,
            "sum_max_msgs": int(phase_max_msg.sum()),
            "max_max_msgs": top(phase_max_msg),
            "phases": int(self.nphases),
            "unit": self.unit,
            "words_per_unit": int(self.words_per_unit),
            "word_bytes": int(self.word_bytes),
            "planned_bytes": int(self.volume.sum()) * self.unit_bytes,
        }

    def per_phase(self) -> dict:
        """Per-phase maxima and totals (for plots and the dashboard)."""
        vol, msg = self.send_volume(), self.send_messages()
        return {"max_vol": vol.max(axis=1).tolist() if vol.size else [],
                "max_msgs": msg.max(axis=1).tolist() if msg.size else [],
                "tot_vol": vol.sum(axis=1).tolist(), "tot_msgs": msg.sum(axis=1).tolist()}

    def estimate_time(self, alpha: float, beta: float) -> float:
        """Alpha-beta time of the plan, phase by phase (bulk-synchronous).

        Each phase costs ``max over parts of (alpha * messages_p + beta * bytes_p)``: a part
        pays latency per message and bandwidth per byte it sends, and the phase ends when the
        slowest part is done. The sum over phases is the estimate.
        """
        per_part = alpha * self.send_messages() + beta * self.unit_bytes * self.send_volume()
        return float(per_part.max(axis=1).sum()) if per_part.size else 0.0

    def __repr__(self):
        r = self.report()
        return (f"Plan({self.name or 'unnamed'}: K={self.nparts}, {r['phases']} phases, "
                f"{r['tot_msgs']} messages, {r['tot_vol']} {self.unit} "
                f"x {self.words_per_unit} words; sum-max vol {r['sum_max_vol']}, "
                f"max-max msgs {r['max_max_msgs']})")

    def table(self) -> str:
        """The report as an aligned two-column table."""
        r = self.report()
        width = max(len(k) for k in r)
        return "\n".join(f"{k:<{width}}  {v}" for k, v in r.items())

    def __dask_tokenize__(self):
        import hashlib

        d = hashlib.sha1()
        for a in (self.phase, self.src, self.dst, self.volume):
            d.update(a.tobytes())
        if self.indices is not None:
            d.update(self.indices.tobytes())
        return ("daskhpc.Plan", self.nparts, self.nphases, self.words_per_unit, d.hexdigest())
