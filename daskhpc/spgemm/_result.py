"""What :func:`daskhpc.spgemm.multiply` returns: the value, the batches, the numbers.

Examples
--------
>>> r = SpgemmResult(value={"nnz": 10}, grid="1x1x1", nbatches=1, quality={"nnz_c": 10})
>>> r.report()["quality"]["nnz_c"]
10
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["SpgemmResult"]


@dataclass
class SpgemmResult:
    """The outcome of a batched SpGEMM run.

    Attributes
    ----------
    value : object
        What the consumer made of the batches: C (``keep``, ``prune``), ``{"nnz",
        "sum"}`` (``count``), the written paths (``write``), a float (masked sum).
    matrix : scipy.sparse.csr_array or None
        C (or the pruned C) when the consumer keeps it.
    grid : str
        ``QxQxL``.
    nbatches : int
        b.
    timeline : dict
        The admission plugin's batch timeline: ``window``, ``batches`` (per batch
        ``admitted``, ``started``, ``finished``, ``consumed``) and ``violations``.
    quality, measured, plan, timing, memory, symbolic : dict
        Sections of the JSON report (see ../shared/CLI.md).
    recoveries : list of dict
        One per lost worker the run survived: ``lost`` (addresses), ``phase``
        (``symbolic``, ``batches`` or ``gather``), ``attempt`` and ``batch`` (the
        lowest batch in flight) where it was noticed, ``batches_safe``,
        ``batches_invalidated`` (done, but their kept blocks died),
        ``batches_from_checkpoint``, ``rerun`` (the next attempt's batches),
        ``cells_moved``, ``new_workers``, and the time lost: ``wasted_s`` (work in
        flight), ``invalidated_s``, ``recovery_s`` (waiting for a replacement,
        re-placing, re-scattering) and their sum ``time_lost_s``. Empty: no loss.
    attempts : list of dict
        ``attempt``, ``batches`` submitted, ``completed`` (in order of completion).
    checkpoint : dict
        With ``checkpoint=DIR``: ``dir``, ``resumed``, ``batches_loaded`` (complete
        in the checkpoint at the start), ``batches_written``, ``batches_run``
        (batch computations of this call) and ``nbatches_from``.
    """

    value: Any = None
    matrix: Any = None
    grid: str = ""
    nbatches: int = 1
    timeline: dict = field(default_factory=dict)
    quality: dict = field(default_factory=dict)
    measured: dict = field(default_factory=dict)
    plan: dict = field(default_factory=dict)
    timing: dict = field(default_factory=dict)
    memory: dict = field(default_factory=dict)
    symbolic: dict = field(default_factory=dict)
    recoveries: list = field(default_factory=list)
    attempts: list = field(default_factory=list)
    checkpoint: dict = field(default_factory=dict)

    def report(self) -> dict:
        """The workflow-specific sections of the JSON report (empty ones omitted,
        except ``recoveries``: an empty list says that no worker was lost)."""
        out = {"grid": self.grid, "batches": self.nbatches, "quality": self.quality,
               "plan": self.plan, "measured": self.measured, "timing": self.timing,
               "memory": self.memory, "symbolic": self.symbolic,
               "timeline": self.timeline, "attempts": self.attempts,
               "checkpoint": self.checkpoint}
        out = {k: v for k, v in out.items() if v not in (None, {}, [])}
        out["recoveries"] = self.recoveries
        return out

    def __repr__(self) -> str:
        q = self.quality
        parts = [f"grid={self.grid}", f"batches={self.nbatches}"]
        for key in ("nnz_c", "flops", "compression_factor"):
            if key in q:
                parts.append(f"{key}={q[key]:,}" if isinstance(q[key], int)
                             else f"{key}={q[key]:.3g}")
        if "run_s" in self.timing:
            parts.append(f"run_s={self.timing['run_s']:.3f}")
        if self.recoveries:
            parts.append(f"recoveries={len(self.recoveries)}")
        return f"SpgemmResult({', '.join(parts)})"

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>"
                       for k, v in {**self.quality, **self.timing}.items())
        return f"<b>{self!r}</b><table>{rows}</table>"
