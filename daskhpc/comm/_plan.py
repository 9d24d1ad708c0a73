"""The communication Plan: every message a distributed run will send, and its report."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from daskhpc.arrays import unique_sorted

#: Plans of at most this many messages are checked in Python (``Plan._check_messages``).
SMALL = 64


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
    unit, words_per_unit, word_bytes : str, int, int
        What one unit is ("rows"), its words (F for SSGD rows, R for CP-ALS) and the bytes
        of a word (8 for float64).
    words : int array (one per message), optional
        Words per unit of each message, where widths differ (``words_per_unit`` is then
        only the default width shown in the report).
    phase_words : int array (len = nphases), optional
        The same, per phase (converted to ``words``).
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
    words: np.ndarray | None = None
    phase_words: np.ndarray | None = None

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
        top = self._check_messages(m) if m else 0
        self.nphases = max(int(self.nphases if self.nphases is not None else top), top)
        if self.phase_words is not None:
            w = np.asarray(self.phase_words, dtype=np.int64)
            if w.shape != (self.nphases,):
                raise ValueError(f"phase_words needs one entry per phase ({self.nphases}), "
                                 f"got {w.shape}")
            self.words, self.phase_words = w[self.phase], None
        if self.words is not None:
            self.words = np.ascontiguousarray(self.words, dtype=np.int64)
            if self.words.shape != (m,):
                raise ValueError("words needs one entry per message")

    def _check_messages(self, m: int) -> int:
        """Raise on an endpoint outside the parts, a message to itself or a negative
        phase; returns the number of phases. Small plans check in Python (3x faster)."""
        if m <= SMALL:
            src, dst, phase = self.src.tolist(), self.dst.tolist(), self.phase.tolist()
            lo, hi = min(min(src), min(dst)), max(max(src), max(dst))
            itself = any(a == b for a, b in zip(src, dst))
            first, top = min(phase), max(phase)
        else:
            lo = min(self.src.min(), self.dst.min())
            hi = max(self.src.max(), self.dst.max())
            itself = bool(np.any(self.src == self.dst))
            first, top = self.phase.min(), self.phase.max()
        if lo < 0 or hi >= self.nparts:
            raise ValueError(f"message endpoints must lie in [0, {self.nparts})")
        if itself:
            raise ValueError("a part does not send messages to itself")
        if first < 0:
            raise ValueError("phases must be non-negative")
        return int(top) + 1

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
        return cls._joined(plans, offs, nparts, kw)

    @classmethod
    def merge(cls, plans, nparts: int | None = None, **kw) -> "Plan":
        """Plans side by side: their messages in the same phases (union of the messages).

        Examples
        --------
        >>> a = Plan.from_messages(2, [(0, 0, 1, [1])])
        >>> b = Plan.from_messages(2, [(1, 1, 0, [2])])
        >>> Plan.merge([a, b]).phase.tolist(), Plan.concat([a, b]).phase.tolist()
        ([0, 1], [0, 2])
        """
        plans = list(plans)
        kw.setdefault("nphases", max(p.nphases for p in plans))
        return cls._joined(plans, np.zeros(len(plans), np.int64), nparts, kw)

    @classmethod
    def stepped(cls, plans, phases, nphases: int, nparts: int | None = None,
               **kw) -> "Plan":
        """Every message of ``plans[i]`` in phase ``phases[i]`` (``merge`` of each one
        ``rephased``, without a Plan per rephasing)."""
        plans = list(plans)
        kw["nphases"] = int(nphases)
        return cls._joined(plans, None, nparts, kw, phases=phases)

    @classmethod
    def _joined(cls, plans, offs, nparts, kw, phases=None) -> "Plan":
        has_idx = all(p.indices is not None for p in plans)
        # the format of the first plan that has messages (an empty head only carries phases)
        first = next((p for p in plans if p.num_messages), plans[0])
        kw = {"unit": first.unit, "words_per_unit": first.words_per_unit,
              "word_bytes": first.word_bytes, **kw}
        if any(p.word_bytes != kw["word_bytes"] for p in plans if p.num_messages):
            # words of different sizes: count bytes (one byte a word) so sizes stay exact
            kw["word_bytes"] = 1
            kw["words"] = np.concatenate([p.message_words() * p.word_bytes for p in plans])
        elif any(p.words is not None or p.words_per_unit != kw["words_per_unit"]
                 for p in plans):
            kw.setdefault("words", np.concatenate([p.message_words() for p in plans]))
        if phases is None:
            phase = np.concatenate([p.phase + o for p, o in zip(plans, offs)])
        else:
            phase = np.repeat(np.asarray(phases, np.int64), [p.num_messages for p in plans])
        args = dict(nparts=nparts or max(p.nparts for p in plans), phase=phase,
                    src=np.concatenate([p.src for p in plans]),
                    dst=np.concatenate([p.dst for p in plans]),
                    **{"nphases": int(sum(p.nphases for p in plans)), **kw})
        if has_idx:
            args["indices"] = np.concatenate([p.indices for p in plans])
            args["ptr"] = np.concatenate([[0], np.cumsum(np.concatenate([p.volume for p in plans]))])
        else:
            args["volume"] = np.concatenate([p.volume for p in plans])
        return cls(**args)

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
        """Bytes of one unit (in plans with ``phase_words``: of the default width)."""
        return self.words_per_unit * self.word_bytes

    def message_words(self) -> np.ndarray:
        """Words per unit of every message."""
        if self.words is not None:
            return self.words
        return np.full(self.num_messages, self.words_per_unit, dtype=np.int64)

    def message_bytes(self) -> np.ndarray:
        """Planned payload bytes of every message (volume x its width x word bytes)."""
        return self.volume * self.message_words() * self.word_bytes

    def rephased(self, phase: int, nphases: int | None = None) -> "Plan":
        """Every message moved to ``phase`` (a program step that sends them all at once)."""
        return Plan(self.nparts, np.full(self.num_messages, phase, np.int64), self.src,
                    self.dst, self.ptr, self.indices,
                    None if self.indices is not None else self.volume,
                    phase + 1 if nphases is None else nphases, self.unit,
                    self.words_per_unit, self.word_bytes, self.name, dict(self.meta),
                    self.message_words())

    def reversed(self, name: str | None = None) -> "Plan":
        """The same messages in the opposite direction (a fold is an expand reversed).

        Examples
        --------
        >>> p = Plan.from_messages(3, [(0, 0, 1, [4, 5]), (0, 0, 2, [5])])
        >>> [(s, d, i.tolist()) for _, s, d, i in p.reversed().messages()]
        [(1, 0, [4, 5]), (2, 0, [5])]
        """
        return Plan(self.nparts, self.phase, self.dst, self.src, self.ptr, self.indices,
                    None if self.indices is not None else self.volume, self.nphases,
                    self.unit, self.words_per_unit, self.word_bytes,
                    self.name if name is None else name, dict(self.meta), self.words)

    def placed(self, owner, nworkers: int | None = None, *, broadcast: bool = False) -> "Plan":
        """The plan between ``nworkers`` workers (default ``max(owner) + 1``), volume only,
        when part p lives on worker ``owner[p]``.

        Messages within a worker are dropped; the others are bundled as the runtime sends
        them, one per (phase, sending worker, receiving worker). With ``broadcast`` a
        message is a key the receiver fetches once for all its parts (SpGEMM's block
        broadcasts): those of one (phase, source part, receiving worker) count once.

        Examples
        --------
        >>> p = Plan.from_messages(3, [(0, 0, 1, [4, 5]), (0, 0, 2, [6]), (0, 2, 1, [7])])
        >>> w = p.placed([0, 1, 1])
        >>> w.src.tolist(), w.dst.tolist(), w.volume.tolist()
        ([0], [1], [3])
        """
        owner = np.asarray(owner, dtype=np.int64)
        k = int(nworkers if nworkers is not None else (owner.max() + 1 if owner.size else 0))
        sw, dw = owner[self.src], owner[self.dst]
        sel = np.flatnonzero(sw != dw)
        if broadcast and sel.size:
            key = np.stack([self.phase[sel], self.src[sel], dw[sel]], axis=1)
            _, first = np.unique(key, axis=0, return_index=True)
            sel = sel[np.sort(first)]
        fetches = int(sel.size)     # before bundling: one per message (per key, broadcast)
        key = (self.phase[sel] * k + sw[sel]) * k + dw[sel]
        # sorting, not np.unique's hash table (slow on millions of distinct keys)
        groups, inv = unique_sorted(key, return_inverse=True)
        # bundled units may differ in width: the bundle carries their words (one unit of
        # as many words), so bytes stay exact
        words = np.bincount(inv, weights=self.volume[sel] * self.message_words()[sel],
                            minlength=groups.size)
        vol = np.bincount(inv, weights=self.volume[sel], minlength=groups.size)
        phase, rest = np.divmod(groups, k * k) if k else (groups, groups)
        src, dst = np.divmod(rest, k) if k else (rest, rest)
        vol = np.rint(vol).astype(np.int64)
        per_unit = np.divide(np.rint(words), np.maximum(vol, 1))
        uniform = bool(np.all(per_unit == np.rint(per_unit)))
        plan = Plan(k, phase, src, dst, volume=vol if uniform else np.rint(words).astype(np.int64),
                    nphases=self.nphases, unit=self.unit if uniform else "words",
                    words_per_unit=self.words_per_unit if uniform else 1,
                    word_bytes=self.word_bytes, name=f"{self.name} on workers".strip(),
                    words=np.rint(per_unit).astype(np.int64) if uniform else None,
                    meta={"fetches": fetches})
        return plan

    def bytes_matrix(self) -> np.ndarray:
        """``nparts x nparts`` planned bytes from row part to column part."""
        return self._summed(self.nparts, self.src, self.dst, self.message_bytes())

    def _summed(self, nrows: int, rows, cols, values) -> np.ndarray:
        """(nrows, nparts) table of a per-message quantity summed at ``(rows, cols)``."""
        out = np.zeros((nrows, self.nparts), dtype=np.int64)
        np.add.at(out, (rows, cols), values)
        return out

    def _per_phase_part(self, values) -> np.ndarray:
        """(nphases, nparts) table of a per-message quantity summed by sender."""
        return self._summed(self.nphases, self.phase, self.src, values)

    def send_volume(self) -> np.ndarray:
        """(nphases, nparts): units each part sends in each phase."""
        return self._per_phase_part(self.volume)

    def send_messages(self) -> np.ndarray:
        """(nphases, nparts): messages each part sends in each phase."""
        return self._per_phase_part(np.ones_like(self.volume))

    def recv_volume(self) -> np.ndarray:
        """(nphases, nparts): units each part receives in each phase."""
        return self._summed(self.nphases, self.phase, self.dst, self.volume)

    def comm_matrix(self) -> np.ndarray:
        """K x K units sent from row part to column part over the whole plan."""
        return self._summed(self.nparts, self.src, self.dst, self.volume)

    def report(self) -> dict:
        """The ``plan`` section of the JSON report, in units (SSGD paper, section VI).

        ``tot``: summed over all messages; ``max``: the largest total one part sends;
        ``sum_max``: per phase the largest per-part send, summed over phases (the
        bulk-synchronous critical path); ``max_max``: the largest per-part send in any
        single phase; each of volume (``_vol``) and messages (``_msgs``).
        """
        vol, msg = self.send_volume(), self.send_messages()
        per_part_vol, per_part_msg = vol.sum(axis=0), msg.sum(axis=0)
        phase_max_vol = vol.max(axis=1) if vol.size else np.zeros(0, np.int64)
        phase_max_msg = msg.max(axis=1) if msg.size else np.zeros(0, np.int64)

        def top(a):
            return int(a.max()) if a.size else 0

        return {"tot_vol": int(self.volume.sum()), "max_vol": top(per_part_vol),
                "avg_vol": float(per_part_vol.mean()) if self.nparts else 0.0,
                "sum_max_vol": int(phase_max_vol.sum()), "max_max_vol": top(phase_max_vol),
                "tot_msgs": self.num_messages, "max_msgs": top(per_part_msg),
                "avg_msgs": float(per_part_msg.mean()) if self.nparts else 0.0,
                "sum_max_msgs": int(phase_max_msg.sum()), "max_max_msgs": top(phase_max_msg),
                "phases": int(self.nphases), "unit": self.unit,
                "words_per_unit": int(self.words_per_unit), "word_bytes": int(self.word_bytes),
                "planned_bytes": int(self.message_bytes().sum())}

    def per_phase(self) -> dict:
        """Per-phase maxima and totals (for plots and the dashboard)."""
        vol, msg = self.send_volume(), self.send_messages()
        return {"max_vol": vol.max(axis=1).tolist() if vol.size else [],
                "max_msgs": msg.max(axis=1).tolist() if msg.size else [],
                "tot_vol": vol.sum(axis=1).tolist(), "tot_msgs": msg.sum(axis=1).tolist()}

    def estimate_time(self, alpha: float, beta: float) -> float:
        """Alpha-beta time, phase by phase: each phase costs the slowest part's ``alpha *
        messages + beta * bytes``, summed over the phases (bulk-synchronous)."""
        per_part = alpha * self.send_messages() + beta * self._per_phase_part(self.message_bytes())
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
        for a in (self.phase, self.src, self.dst, self.volume, self.message_words()):
            d.update(a.tobytes())
        if self.indices is not None:
            d.update(self.indices.tobytes())
        return ("daskhpc.Plan", self.nparts, self.nphases, self.words_per_unit, d.hexdigest())
