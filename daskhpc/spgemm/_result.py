"""What :func:`daskhpc.spgemm.multiply` returns: the value, the batches, the report."""

from __future__ import annotations

from typing import Any

import scipy.sparse as sp

from daskhpc.report import WorkflowResult, new_report


#: the serial reference of ``plus_times``, the one semiring scipy computes
SCIPY = "scipy's product"


def reference_name(semiring: str) -> str:
    """What ``--check-serial`` compares C with: scipy's product, or the local kernel's."""
    if semiring == "plus_times":
        return SCIPY
    return f"the serial {semiring} product (the local kernel on one cell)"


def serial_statement(check: dict) -> str:
    """What ``--check-serial`` compared, in words, with the verdict."""
    ok = bool(check.get("identical"))
    ref = check.get("reference", SCIPY)
    scipy = ref == SCIPY                # sums that cancel to exactly 0 are dropped
    theirs = "scipy's" if scipy else "the reference's"
    if "compared" in check:                       # --consume count: two numbers
        same = "=" if ok else "vs"
        parts = []
        if "structural_nnz" in check:
            parts.append(f"structural nnz {check['structural_nnz']:,} {same} "
                         f"{check['structural_nnz_ref']:,} (every entry formed"
                         + (", also those summing to 0)" if scipy else ")"))
        else:
            parts.append(f"nnz {check['nnz']:,} {same} {check['nnz_ref']:,}")
        parts.append(f"sum {check['sum']:.6g} {same} {check['sum_ref']:.6g} to "
                     f"{check['sum_tolerance']:.2g}")
        text = (f"the count of C {'matches' if ok else 'DIFFERS from'} {ref}: "
                + ", ".join(parts))
        if "structural_nnz" in check and scipy:
            text += (f"; nnz {check['nnz']:,} here, {check['nnz_ref']:,} in scipy's (not "
                     "compared: exact cancellations may differ)")
        return text
    if "tolerance" not in check:                  # shapes differ
        return (f"C DIFFERS from {ref}: shape {check.get('shape')} vs "
                f"{check.get('shape_serial')}")
    text = (f"C {'matches' if ok else 'DIFFERS from'} {ref}: every value to "
            f"{check['tolerance']:.2g} (1e-12 of its largest |entry|), max |diff| "
            f"{check['max_abs_diff']:.3g}")
    if check.get("same_pattern"):
        return text + ", the same pattern"
    return text + (f"; the patterns differ by entries one side summed to exactly 0 "
                   f"({check.get('only_here', 0):,} only here, "
                   f"{check.get('only_in_serial', 0):,} only in {theirs})")


class SpgemmResult(WorkflowResult):
    """The outcome of a batched SpGEMM run.

    Attributes
    ----------
    value : object
        What the consumer made of the batches: C (``keep``, ``prune``), ``{"nnz", "sum"}``
        (``count``), the written paths (``write``), a float (masked sum), or
        ``{"saved", "files", "nnz"}`` when ``save=DIR`` wrote C's pieces.
    matrix : scipy.sparse.csr_array or None
        C when the consumer keeps it; None when ``save=DIR`` wrote it; a
        ``dask.array.Array`` with ``keep="workers"``.
    pieces : tuple or None
        ``(DIR, descriptor)``: the ``save_npz`` pieces the workers wrote, whose sum is C.
    grid, nbatches
        ``QxQxL`` and b.
    timeline, quality, measured, plan, timing, memory, symbolic, checkpoint : dict
        Sections of the JSON report (docs/cli.md); the timeline is the admission plugin's.
    recoveries, attempts, history : list of dict
        One per lost worker the run survived, per attempt (``batches`` submitted,
        ``completed``) and per batch (``summary``, ``time_s``, planned and measured bytes).

    Examples
    --------
    >>> r = SpgemmResult(value={"nnz": 10}, info={"grid": "1x1x1", "batches": 1,
    ...                  "quality": {"nnz_c": 10}})
    >>> r.report()["quality"]["nnz_c"], r.nbatches
    (10, 1)
    """

    workflow = "spgemm"
    SAVED = ("value", "matrix")
    COLUMNS = (("batch", "batch", "{:>5d}"), ("time_s", "time ms", "{:>8.1f}"),
               ("planned_bytes", "planned B", "{:>10d}"),
               ("measured_bytes", "measured B", "{:>11d}"))
    PLOT = (("time_s",), ("measured_bytes",))
    TITLE = ("grid", "batches")

    def __init__(self, value: Any = None, matrix: Any = None, info: dict | None = None,
                 history: list | None = None):
        super().__init__(info, history)
        self.value, self.matrix = value, matrix

    pieces = None

    def save(self, directory) -> str:
        """Keep the result in ``directory`` (docs/cli.md, "Saved results").

        C is written as ``save_npz`` pieces whose sum is C (copied if the workers wrote them
        elsewhere); ``daskhpc.load(directory)`` reads it back."""
        import json as _json

        from daskhpc._saved import save
        from daskhpc.report import to_json

        desc = self._save_pieces(directory)
        named = {} if desc is None else {
            n: desc for n in self.SAVED if n == "matrix" or (
                self.matrix is not None and getattr(self, n) is self.matrix)}
        return save(self, directory, _json.loads(to_json(self.report())),
                    _json.loads(to_json(self.history)), pieces=named)

    def _save_pieces(self, directory) -> dict | None:
        import os

        from ._saving import copy_pieces, write_chunks, write_whole

        if self.pieces is not None:
            where, desc = self.pieces
            if os.path.abspath(os.fspath(directory)) == where:
                return desc
            return copy_pieces(where, desc, directory)
        if self.matrix is None:
            return None
        if sp.issparse(self.matrix):
            return write_whole(self.matrix, directory)
        return write_chunks(self.matrix, directory)

    grid = property(lambda self: self.info.get("grid", ""))
    nbatches = property(lambda self: self.info.get("batches", 1))
    timeline = property(lambda self: self.info.get("timeline", {}))
    quality = property(lambda self: self.info.get("quality", {}))
    measured = property(lambda self: self.info.get("measured", {}))
    plan = property(lambda self: self.info.get("plan", {}))
    timing = property(lambda self: self.info.get("timing", {}))
    memory = property(lambda self: self.info.get("memory", {}))
    symbolic = property(lambda self: self.info.get("symbolic", {}))
    recoveries = property(lambda self: self.info.get("recovery", {}).get("recoveries", []))
    attempts = property(lambda self: self.info.get("attempts", []))
    checkpoint = property(lambda self: self.info.get("checkpoint", {}))

    def report(self) -> dict:
        """The full JSON report (empty sections omitted)."""
        info = {k: v for k, v in self.info.items() if v not in ({}, [])}
        return new_report(self.workflow, command=info.pop("command", None), **info)

    def _notes(self) -> list[str]:
        q = self.quality
        out = [", ".join(f"{k}={q[k]:,}" if isinstance(q[k], int) else f"{k}={q[k]:.3g}"
                         for k in ("nnz_c", "flops", "compression_factor") if k in q)]
        saved = self.info.get("saved", {})
        if saved:
            from daskhpc.report import format_bytes

            out.append(f"C saved by the workers: {saved['files']} piece(s), "
                       f"{format_bytes(saved['bytes'])}, in {saved['dir']}")
        ck = self.checkpoint
        if ck:
            out.append(f"checkpoint: {ck['dir']}: {len(ck['batches_loaded'])} batch(es) "
                       f"resumed, {ck['batches_run']} computed, "
                       f"{len(ck['batches_written'])} written")
        return [x for x in out if x] + WorkflowResult._notes(self)
