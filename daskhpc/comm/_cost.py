"""The alpha-beta message cost model: sending n bytes in one message costs alpha + beta * n.

``alpha`` (latency, s) and ``beta`` (s per byte) come from ``daskhpc info --calibrate``, which
measures them on the current cluster (ping-pong between two workers, least-squares fit).
The defaults are what that command measured on a 2-core LocalCluster over loopback TCP.
"""

from __future__ import annotations

from dataclasses import dataclass

# Measured with `daskhpc info --calibrate` on the 2-core development machine (loopback TCP,
# worker processes): alpha 0.6-1.0 ms, beta 3.5-5.3e-10 s/byte. Dask's per-transfer cost is
# dominated by the get_data round trip and (de)serialisation, not by the wire.
DEFAULT_ALPHA = 8.0e-4
DEFAULT_BETA = 4.5e-10


@dataclass(frozen=True)
class CostModel:
    """Latency ``alpha`` (seconds per message) and inverse bandwidth ``beta`` (s/byte).

    Examples
    --------
    >>> m = CostModel(alpha=1e-3, beta=1e-9)
    >>> m.message(1_000_000)
    0.002
    """

    alpha: float = DEFAULT_ALPHA
    beta: float = DEFAULT_BETA

    def message(self, nbytes: float) -> float:
        """Seconds to send one message of ``nbytes``."""
        return self.alpha + self.beta * nbytes

    def plan_time(self, plan) -> float:
        """Bulk-synchronous estimate of a Plan (see :meth:`Plan.estimate_time`)."""
        return plan.estimate_time(self.alpha, self.beta)

    @classmethod
    def from_config(cls, exchange: str | None = None) -> "CostModel":
        """alpha and beta from ``daskhpc.comm.alpha`` / ``daskhpc.comm.beta`` in
        ``dask.config`` (what ``daskhpc info --calibrate --save`` writes; environment
        variables ``DASK_DASKHPC__COMM__ALPHA`` work too), else the defaults above. With
        ``exchange`` ("graph" or "direct"), the calibration of a Program's messages in that
        mode (``daskhpc.comm.exchange.<mode>``) where there is one.

        Reads dask's configuration only when called: ``daskhpc.comm`` itself stays free
        of dask (a plan on a laptop without it uses the defaults).
        """
        try:
            from daskhpc import _config
        except ImportError:                 # no dask installed
            return cls()
        if exchange is not None:
            fit = _config.get(f"comm.exchange.{exchange}", None)
            if fit:
                return cls(float(fit["alpha"]), float(fit["beta"]))
        return cls(float(_config.get("comm.alpha", DEFAULT_ALPHA)),
                   float(_config.get("comm.beta", DEFAULT_BETA)))

    def as_dict(self) -> dict:
        return {"alpha_s": self.alpha, "beta_s_per_byte": self.beta}
