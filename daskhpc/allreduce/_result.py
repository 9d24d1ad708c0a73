"""What an allreduce run returns: every rank's total, the plan, the choice, the report."""

from __future__ import annotations

import numpy as np

from daskhpc.report import WorkflowResult


class AllreduceResult(WorkflowResult):
    """Outcome of an allreduce run.

    Attributes
    ----------
    streams : list of Stream
        Every rank's total over [0, N), when gathered to the client.
    futures : list of distributed.Future
        Every rank's total as a stream payload on the rank's worker (vectors given as
        futures or a Dask Array, or ``gather=False``).
    plan : daskhpc.comm.Plan
        The call's plan (messages, items, bytes per stage).
    choice : dict or None
        The ``auto`` decision: algorithm, predicted seconds, every candidate's prediction.
    history : list of dict
        Per call: ``sent_bytes``, ``messages``, ``items``, ``result_items``, ``time_s``.

    Examples
    --------
    >>> r = AllreduceResult([], info={"parts": 2, "algorithm": "ssar_rec_dbl"},
    ...                     history=[{"call": 0, "sent_bytes": 48, "messages": 2,
    ...                               "result_items": 3, "time_s": 0.001}])
    >>> r.history[0]["sent_bytes"]
    48
    """

    workflow = "allreduce"
    COLUMNS = (("call", "call", "{:>4d}"), ("sent_bytes", "sent B", "{:>8d}"),
               ("messages", "msgs", "{:>5d}"), ("result_items", "result items", "{:>12d}"),
               ("time_s", "time ms", "{:>8.1f}"),
               ("measured_bytes", "measured B", "{:>11d}"))
    PLOT = (("sent_bytes",), ("time_s",))
    TITLE = ("parts", "algorithm")

    def __init__(self, streams, info=None, history=None, plan=None, choice=None, futures=()):
        super().__init__(info, history)
        self.streams, self.plan, self.choice = list(streams), plan, choice
        self.futures = list(futures)

    def _streams(self, n: int | None = None) -> list:
        """The first ``n`` ranks' totals (all: None), gathered if the workers hold them."""
        if not self.streams and self.futures:        # totals left on the workers
            from ._stream import from_payload

            N = int(self.info["N"])
            return [from_payload(p, 0, N)
                    for p in self.futures[0].client.gather(self.futures[:n])]
        return self.streams

    @property
    def values(self) -> list[np.ndarray]:
        """Every rank's total as a dense array (gathered from the workers if they hold them)."""
        return [s.to_dense() for s in self._streams()]

    @property
    def total(self) -> np.ndarray:
        """The total (rank 0's; every rank holds the same bits)."""
        return self._streams(1)[0].to_dense()

    def _notes(self) -> list[str]:
        out = super()._notes()
        if self.choice:
            out.append(f"auto chose {self.choice['algorithm']}: predicted "
                       f"{1e3 * self.choice['predicted_s']:.3f} ms (alpha "
                       f"{self.choice['alpha']:.2e} s, beta {self.choice['beta']:.2e} s/B)")
        return out
