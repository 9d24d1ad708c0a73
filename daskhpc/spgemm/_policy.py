"""Batch admission as a plain object: which batches may run, and when they did.

Batch ``t + w`` is admitted only after batch ``t`` has been consumed, so at most ``w``
batches hold memory at once; the scheduler plugin (:mod:`._plugin`) feeds it events.
"""

from __future__ import annotations


class BatchPolicy:
    """Admit batch ``t + window`` once batch ``t`` has been consumed.

    Parameters
    ----------
    nbatches : int
        b.
    window : int, default 1
        Batches allowed in flight.
    now : float, optional
        Time the run was registered (the first ``window`` batches are admitted then).
    batches : sequence of int, optional
        The batches this run computes, in admission order (default ``0 .. nbatches-1``);
        a recovering run computes only the lost ones, and the window counts positions.

    Examples
    --------
    >>> pol = BatchPolicy(3, window=1)
    >>> pol.started(0, now=1.0); pol.finished(0, now=2.0)
    >>> pol.consumed(0, now=3.0), pol.check()
    ([1], [])
    >>> pol = BatchPolicy(4, window=1, batches=[1, 3])
    >>> pol.admitted(), pol.consumed(1, now=1.0)
    ([1], [3])
    """

    def __init__(self, nbatches: int, window: int = 1, now: float = 0.0, batches=None):
        if nbatches < 1 or window < 1:
            raise ValueError(f"need nbatches >= 1 and window >= 1, got {nbatches}, {window}")
        self.nbatches = int(nbatches)
        self.window = int(window)
        order = list(range(self.nbatches)) if batches is None else [int(t) for t in batches]
        if len(set(order)) != len(order) or any(not 0 <= t < self.nbatches for t in order):
            raise ValueError(f"batches must be distinct numbers in 0..{self.nbatches - 1}, "
                             f"got {order}")
        self.order = order
        self._pos = {t: u for u, t in enumerate(order)}
        self._events = {t: dict.fromkeys(("admitted", "started", "finished", "consumed"))
                        for t in order}
        for t in order[:self.window]:
            self._events[t]["admitted"] = now

    def is_admitted(self, t: int) -> bool:
        return self._events[t]["admitted"] is not None

    def admitted(self) -> list[int]:
        return [t for t in self.order if self.is_admitted(t)]

    def started(self, t: int, now: float) -> None:
        """The first task of batch ``t`` was sent to a worker."""
        if self._events[t]["started"] is None:
            self._events[t]["started"] = now

    def finished(self, t: int, now: float) -> None:
        """The last product task of batch ``t`` (Merge-Fiber) finished."""
        self._events[t]["finished"] = now

    def consumed(self, t: int, now: float) -> list[int]:
        """Batch ``t``'s output was consumed; returns the batches admitted now."""
        self._events[t]["consumed"] = now
        u = self._pos[t] + self.window
        if u < len(self.order) and not self.is_admitted(self.order[u]):
            nxt = self.order[u]
            self._events[nxt]["admitted"] = now
            return [nxt]
        return []

    def done(self) -> bool:
        return all(e["consumed"] is not None for e in self._events.values())

    def timeline(self) -> list[dict]:
        """One record per batch in admission order (scheduler clock; None if not yet)."""
        return [{"batch": t, **self._events[t]} for t in self.order]

    def check(self) -> list[str]:
        """Violations of the admission rule found in the timeline (empty if none)."""
        bad = []
        for u in range(self.window, len(self.order)):
            t, prev = self.order[u], self.order[u - self.window]
            before = self._events[prev]["consumed"]
            for what in ("admitted", "started"):
                at = self._events[t][what]
                if at is not None and (before is None or at < before):
                    bad.append(f"batch {t} {what} at {at} before batch "
                               f"{prev} was consumed ({before})")
        return bad
