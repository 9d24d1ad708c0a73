"""What :func:`daskhpc.spgemm.multiply` returns: the value, the batches, the report.

Examples
--------
>>> r = SpgemmResult(value={"nnz": 10}, info={"grid": "1x1x1", "batches": 1,
...                  "quality": {"nnz_c": 10}})
>>> r.report()["quality"]["nnz_c"], r.nbatches
(10, 1)
"""

from __future__ import annotations

from typing import Any

import scipy.sparse as sp

from daskhpc.report import WorkflowResult, new_report

__all__ = ["SpgemmResult", "serial_statement", "reference_name"]


#: the serial reference of ``plus_times``, the one semiring scipy computes
SCIPY = "scipy's product"


def reference_name(semiring: str) -> str:
    """What ``--check-serial`` compares C with: scipy's product for ``plus_times``; for
    another semiring, which scipy does not have, the serial product of the local kernel.

    Examples
    --------
    >>> reference_name("plus_times"), reference_name("min_plus")
    ("scipy's product", 'the serial min_plus product (the local kernel on one cell)')
    """
    if semiring == "plus_times":
        return SCIPY
    return f"the serial {semiring} product (the local kernel on one cell)"


def serial_statement(check: dict) -> str:
    """What ``--check-serial`` compared, in words, with the verdict (the summary's
    ``serial`` line; the numbers are in the section). ``check["reference"]`` names the
    product compared with (default scipy's, :func:`reference_name`).

    Examples
    --------
    >>> from textwrap import fill
    >>> print(fill(serial_statement({"done": True, "identical": True,
    ...     "compared": "structural_nnz, sum", "structural_nnz": 120,
    ...     "structural_nnz_ref": 120, "nnz": 118, "nnz_ref": 118, "sum": 3.0, "sum_ref": 3.0,
    ...     "sum_tolerance": 1e-11}), 80))
    the count of C matches scipy's product: structural nnz 120 = 120 (every entry
    formed, also those summing to 0), sum 3 = 3 to 1e-11; nnz 118 here, 118 in
    scipy's (not compared: exact cancellations may differ)
    >>> print(fill(serial_statement({"done": True, "identical": True, "same_pattern": True,
    ...     "max_abs_diff": 0.0, "tolerance": 2e-12}), 80))
    C matches scipy's product: every value to 2e-12 (1e-12 of its largest |entry|),
    max |diff| 0, the same pattern
    """
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
        What the consumer made of the batches: C (``keep``, ``prune``), ``{"nnz",
        "sum"}`` (``count``), the written paths (``write``), a float (masked sum);
        ``{"saved", "files", "nnz"}`` when ``save=DIR`` wrote C's pieces instead.
    matrix : scipy.sparse.csr_array or None
        C (or the pruned C) when the consumer keeps it; None when ``save=DIR`` wrote it
        (``daskhpc.load(DIR).matrix`` reads it back); a ``dask.array.Array`` with
        ``keep="workers"``.
    pieces : tuple or None
        ``(DIR, descriptor)``: C's pieces written by the workers (``save=DIR``), one
        scipy ``save_npz`` file per batch piece of a cell, whose sum is C.
    grid, nbatches
        ``QxQxL`` and b.
    timeline : dict
        The admission plugin's batch timeline: ``window``, ``batches`` (per batch
        ``admitted``, ``started``, ``finished``, ``consumed``) and ``violations``.
    quality, measured, plan, timing, memory, symbolic, checkpoint : dict
        Sections of the JSON report (docs/cli.md).
    recoveries : list of dict
        The report's ``recovery.recoveries``, one per lost worker the run survived: ``lost``, ``phase`` (``symbolic``,
        ``batches`` or ``gather``), ``attempt``, ``batch`` (the lowest batch in flight),
        ``batches_safe``, ``batches_invalidated``, ``batches_from_checkpoint``, ``rerun``,
        ``cells_moved``, ``new_workers`` and the time lost (``wasted_s``,
        ``invalidated_s``, ``recovery_s``, ``time_lost_s``). Empty: no loss.
    attempts : list of dict
        ``attempt``, ``batches`` submitted, ``completed`` (in order of completion).
    history : list of dict
        Per batch: ``batch``, ``summary``, ``time_s``, planned and measured bytes.
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
        """Keep the result in ``directory``: C as scipy ``save_npz`` pieces whose sum is C
        (``directory/matrix/*.npz``, named with their shapes and SHA-256 in the manifest)
        and the rest as every workflow saves it (docs/cli.md, "Saved results"). Pieces the
        workers wrote are copied when ``directory`` is another; C left on the workers
        (``keep="workers"``) is written there, chunk by chunk; ``daskhpc.load(directory)``
        reads it back."""
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

    def _get(self, key, default):
        return self.info.get(key, default)

    grid = property(lambda self: self._get("grid", ""))
    nbatches = property(lambda self: self._get("batches", 1))
    timeline = property(lambda self: self._get("timeline", {}))
    quality = property(lambda self: self._get("quality", {}))
    measured = property(lambda self: self._get("measured", {}))
    plan = property(lambda self: self._get("plan", {}))
    timing = property(lambda self: self._get("timing", {}))
    memory = property(lambda self: self._get("memory", {}))
    symbolic = property(lambda self: self._get("symbolic", {}))
    recoveries = property(lambda self: self._get("recovery", {}).get("recoveries", []))
    attempts = property(lambda self: self._get("attempts", []))
    checkpoint = property(lambda self: self._get("checkpoint", {}))

    def report(self) -> dict:
        """The full JSON report (empty sections omitted; ``recovery.recoveries`` empty: no
        worker was lost)."""
        info = {k: v for k, v in self.info.items() if v not in ({}, [])}
        return new_report(self.workflow, command=info.pop("command", None), **info)

    def _notes(self) -> list[str]:
        q = self.quality
        out = [", ".join(f"{k}={q[k]:,}" if isinstance(q[k], int) else f"{k}={q[k]:.3g}"
                         for k in ("nnz_c", "flops", "compression_factor") if k in q)]
        saved = self._get("saved", {})
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
