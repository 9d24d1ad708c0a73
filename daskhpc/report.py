"""The JSON report of every command (contract: ../shared/CLI.md) and the result base class.

Every workflow's result derives from :class:`WorkflowResult`: ``report()`` is always the
full report (the fixed head, top-level plan totals, ``measured``, ``timing``,
``quality``, ``serial_check``; keys that do not apply are omitted, never filled with
zeros), ``summary()`` the few lines the CLI prints, ``repr`` a table of the per-iteration
history, ``_repr_html_`` the same in notebooks and ``plot()`` a bokeh figure of it.

No dask here.

Examples
--------
>>> r = WorkflowResult({"input": {"path": "x.tns", "shape": [3, 3, 3], "nnz": 3},
...                     "parts": 2, "quality": {"fit": 0.5}},
...                    history=[{"iteration": 0, "fit": 0.5, "time_s": 0.01}])
>>> r.report()["quality"], r.report()["parts"]
({'fit': 0.5}, 2)
>>> print(r)
WorkflowResult(parts=2)
iteration  fit     time ms
        0  0.5000     10.0
"""

from __future__ import annotations

import html
import json
import shlex
import sys

import numpy as np

from daskhpc import __version__

__all__ = ["WorkflowResult", "new_report", "to_json", "write_report", "summarize",
           "compare_arrays", "bytes_side_by_side", "PLANNED_BYTES"]

#: The one meaning of ``planned_bytes`` in a report, a history row and the dashboard.
PLANNED_BYTES = (
    "bytes the plan sends between workers: the workflow's comm.Plan projected on the run's "
    "workers (Plan.placed: messages between parts of one worker cost nothing), over the run "
    "(measured.planned_bytes) or one unit (a history row's planned_bytes); measured bytes "
    "are what the workers wrote to the wire over the same span")

#: Sections that hold a part-level ``comm.Plan.report()`` (every part its own worker).
PLAN_SECTIONS = ("plan", "run_plan", "eval_plan")

#: Report sections in the order of ../shared/CLI.md (others follow).
SECTIONS = ("input", "parts", "partitioner", "objective", "seed", "partition", "plan",
            "measured", "timing", "quality", "serial_check")


def new_report(workflow: str, command: list[str] | str | None = None, **sections) -> dict:
    """A report with the fixed head (workflow, version, command) and the given sections."""
    if command is None:
        command = ["daskhpc", *sys.argv[1:]]
    cmd = command if isinstance(command, str) else shlex.join(command)
    report = {"workflow": workflow, "version": __version__, "command": cmd}
    sections = _one_planned_bytes(sections)
    ordered = [k for k in SECTIONS if k in sections] + [k for k in sections if k not in SECTIONS]
    report.update({k: sections[k] for k in ordered if sections[k] is not None})
    return report


def _one_planned_bytes(sections: dict) -> dict:
    """A run's report keeps ``planned_bytes`` for :data:`PLANNED_BYTES` only.

    Next to measured bytes, the part-level totals of the plan sections (a
    ``comm.Plan.report()``: between parts, one epoch or the whole run) are named
    ``part_bytes``: with several parts on a worker they are not what the wire carries.
    A plan-only report (no ``measured``) keeps the plan's ``planned_bytes``: there every
    part is its own worker and the two meanings coincide."""
    measured = sections.get("measured")
    if not (isinstance(measured, dict) and "planned_bytes" in measured):
        return sections
    out = dict(sections)
    for name in PLAN_SECTIONS:
        sec = out.get(name)
        if isinstance(sec, dict) and "planned_bytes" in sec:
            out[name] = {("part_bytes" if k == "planned_bytes" else k): v
                         for k, v in sec.items()}
    return out


def bytes_side_by_side(measured: dict, history: list, unit: str = "unit") -> dict:
    """Planned and measured bytes between workers per run and per unit (one definition,
    :data:`PLANNED_BYTES`), for the ``measured`` section of a run's report.

    Parameters
    ----------
    measured : dict
        The frame's ``measured`` (``planned_bytes``, ``inter_worker_bytes``).
    history : list of dict
        Rows with ``planned_bytes`` / ``measured_bytes`` per unit.
    unit : str
        What a unit is (``epoch``, ``iteration``, ``batch``).

    Returns
    -------
    dict
        ``{"per_run": {"planned_bytes", "measured_bytes", "ratio"}, "per_unit": {"unit",
        "planned_bytes": [...], "measured_bytes": [...]}}`` (keys without data omitted).

    Examples
    --------
    >>> bytes_side_by_side({"planned_bytes": 200, "inter_worker_bytes": 210},
    ...                    [{"planned_bytes": 100, "measured_bytes": 104},
    ...                     {"planned_bytes": 100, "measured_bytes": 106}], "epoch")
    {'per_run': {'planned_bytes': 200, 'measured_bytes': 210, 'ratio': 1.05}, 'per_unit': {'unit': 'epoch', 'planned_bytes': [100, 100], 'measured_bytes': [104, 106]}}
    """
    out: dict = {}
    if "planned_bytes" in measured and "inter_worker_bytes" in measured:
        p, m = int(measured["planned_bytes"]), int(measured["inter_worker_bytes"])
        out["per_run"] = {"planned_bytes": p, "measured_bytes": m,
                          **({"ratio": round(m / p, 4)} if p else {})}
    rows = [h for h in history or () if "planned_bytes" in h and "measured_bytes" in h]
    if rows:
        out["per_unit"] = {"unit": unit, "planned_bytes": [int(h["planned_bytes"]) for h in rows],
                           "measured_bytes": [int(h["measured_bytes"]) for h in rows]}
    return out


def _plain(obj):
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _plain(obj.tolist())
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    return obj


def to_json(report: dict) -> str:
    return json.dumps(_plain(report), indent=2)


def write_report(report: dict, path) -> None:
    """Write ``report`` as JSON to ``path`` (``-`` for standard output)."""
    text = to_json(report) + "\n"
    if str(path) == "-":
        sys.stdout.write(text)
        return
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def compare_arrays(pairs, *, rtol: float | None = None) -> dict:
    """The ``serial_check`` section: are the distributed arrays the serial ones?

    Parameters
    ----------
    pairs : iterable of (array, array)
        (distributed, serial reference).
    rtol : float, optional
        Where the arithmetic differs (another summation order), the stated tolerance:
        ``within_tolerance`` says whether every pair agrees to it, relative to the
        reference's largest magnitude.

    Examples
    --------
    >>> import numpy as np
    >>> compare_arrays([(np.ones(3), np.ones(3))])
    {'done': True, 'identical': True, 'max_abs_diff': 0.0}
    >>> compare_arrays([(np.ones(2), np.ones(2) + 1e-12)], rtol=1e-9)["within_tolerance"]
    True
    """
    same, diff, ok = True, 0.0, True
    for a, b in pairs:
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            return {"done": True, "identical": False, "max_abs_diff": float("inf"),
                    **({"within_tolerance": False, "rtol": rtol} if rtol is not None else {})}
        same = same and bool(np.array_equal(a, b))
        d = float(np.max(np.abs(a - b), initial=0.0)) if a.size else 0.0
        diff = max(diff, d)
        if rtol is not None:
            scale = float(np.max(np.abs(b), initial=0.0)) if b.size else 0.0
            ok = ok and d <= rtol * max(scale, np.finfo(float).tiny)
    out = {"done": True, "identical": same, "max_abs_diff": diff}
    if rtol is not None:
        out.update(within_tolerance=bool(ok), rtol=rtol)
    return out


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def summarize(report: dict) -> str:
    """Human-readable lines for a report: what ran, planned vs measured, quality, check."""
    lines = []
    inp = report.get("input")
    head = str(report.get("workflow"))
    if isinstance(inp, dict) and "shape" in inp:
        where = inp.get("path", "")
        head += f": {where} {tuple(inp['shape'])}, nnz {inp.get('nnz')}"
    if "parts" in report:
        head += f", {report['parts']} parts"
    lines.append(head)
    for section in ("partition", "plan", "measured", "timing", "quality", "serial_check",
                    "recovery"):
        values = report.get(section)
        if not isinstance(values, dict):
            continue
        flat = {k: v for k, v in values.items() if isinstance(v, (int, float, str, bool))}
        if flat:
            lines.append(f"{section}: " + ", ".join(f"{k}={_fmt(v)}" for k, v in flat.items()))
    recs = report.get("recoveries") or (report.get("recovery") or {}).get("recoveries") or []
    for r in recs:
        again = r.get("rerun") if r.get("rerun") is not None else r.get("restart")
        lines.append(f"recovered: lost {', '.join(r['lost'])}; ran again from {again}; "
                     f"{r.get('time_lost_s', 0.0):.2f} s lost")
    ck = report.get("checkpoint")
    if isinstance(ck, dict) and "dir" in ck:
        lines.append("checkpoint: " + ", ".join(f"{k}={_fmt(v)}" for k, v in ck.items()
                                                if not isinstance(v, (dict, list))))
    return "\n".join(lines)


class WorkflowResult:
    """The outcome of a workflow run: report sections and a per-iteration history.

    Parameters
    ----------
    info : dict
        Report sections (``input``, ``parts``, ``partition``, ``plan``, ``measured``,
        ``timing``, ``quality``, ``serial_check``, workflow-specific ones, and
        ``command``).
    history : list of dict, optional
        One row per iteration (epoch, batch): whatever the workflow records, usually
        with ``time_s`` and, for distributed runs, ``planned_bytes``/``measured_bytes``.

    Subclasses set :attr:`workflow`, :attr:`COLUMNS` (history columns shown by ``repr``:
    ``(key, title, format)``) and :attr:`PLOT` (keys drawn by ``plot``: left axis, then
    right axis), and add their own attributes (factors, predictions, ...).
    """

    workflow = "workflow"
    #: (history key, column title, format); columns absent from every row are skipped.
    COLUMNS: tuple = (("iteration", "iteration", "{:>9d}"), ("epoch", "epoch", "{:>6d}"),
                      ("fit", "fit", "{:<8.4f}"), ("loss", "loss", "{:<#.6g}"),
                      ("time_s", "time ms", "{:>8.1f}"),
                      ("planned_bytes", "planned B", "{:>10d}"),
                      ("measured_bytes", "measured B", "{:>11d}"))
    #: history keys drawn by :meth:`plot`: (left axis keys, right axis keys)
    PLOT: tuple = (("fit", "loss"), ())
    #: report keys shown in the title line of ``repr``
    TITLE: tuple = ("parts",)
    #: what one history row is (``measured.bytes.per_unit.unit`` in the report; by default
    #: the first of epoch/iteration/batch the rows carry)
    UNIT: str = "unit"

    def __init__(self, info: dict | None = None, history: list | None = None):
        self.info = dict(info or {})
        self.history = list(history or [])

    # -- the report ----------------------------------------------------------------------
    def report(self) -> dict:
        """The full JSON report of ../shared/CLI.md (``daskhpc.report.write_report`` writes it)."""
        info = dict(self.info)
        measured = info.get("measured")
        if isinstance(measured, dict) and "planned_bytes" in measured and \
                "bytes" not in measured:
            unit = self.UNIT if self.UNIT != "unit" or not self.history else next(
                (k for k in ("epoch", "iteration", "batch") if k in self.history[0]), "unit")
            side = bytes_side_by_side(measured, self.history, unit)
            if side:
                info["measured"] = {**measured, "bytes": side}
        return new_report(self.workflow, command=info.pop("command", None), **info)

    def summary(self) -> str:
        """The lines the CLI prints after a run or a plan."""
        return summarize(self.report())

    # -- display -------------------------------------------------------------------------
    def _cell(self, row: dict, col) -> str:
        key, _, fmt = col
        v = row.get(key)
        if v is None:
            return ""
        if key == "time_s":
            v = 1000.0 * v
        return fmt.format(int(v) if fmt.endswith("d}") else float(v)).strip()

    def _table(self):
        cols = [c for c in self.COLUMNS if any(c[0] in h for h in self.history)]
        return cols, [[self._cell(h, c) for c in cols] for h in self.history]

    def _title(self) -> str:
        head = ", ".join(f"{k}={self.info[k]}" for k in self.TITLE if k in self.info)
        return f"{type(self).__name__}({head})"

    def _notes(self) -> list[str]:
        """Lines under the table (subclasses add theirs)."""
        out = []
        rec = self.info.get("recovery") or {}
        if rec.get("resumed_from") is not None:
            out.append(f"resumed from the checkpoint after iteration {rec['resumed_from']}")
        for r in rec.get("recoveries", []):
            out.append(f"lost {', '.join(r['lost'])} after {r.get('after_s', 0):.1f} s; "
                       f"restarted from {r.get('restart', '?')}")
        check = self.info.get("serial_check")
        if isinstance(check, dict) and check.get("done"):
            out.append(f"serial check: identical={check.get('identical')}, max abs diff "
                       f"{check.get('max_abs_diff', 0.0):.3g}")
        return out

    def __repr__(self) -> str:
        cols, rows = self._table()
        widths = [max([len(c[1])] + [len(r[i]) for r in rows]) for i, c in enumerate(cols)]

        def line(cells):
            return "  ".join(x.rjust(w) if c[2].startswith("{:>") else x.ljust(w)
                             for x, w, c in zip(cells, widths, cols)).rstrip()

        out = [self._title()]
        if cols:
            out += [line([c[1] for c in cols])] + [line(r) for r in rows]
        return "\n".join(out + self._notes())

    def _repr_html_(self) -> str:
        cols, rows = self._table()
        head = "".join(f"<th>{html.escape(t)}</th>" for _, t, _ in cols)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(x)}</td>" for x in r) + "</tr>"
                       for r in rows)
        notes = "".join(f"<div>{html.escape(n)}</div>" for n in self._notes())
        return (f"<div><b>{html.escape(self._title())}</b><table><thead><tr>{head}</tr>"
                f"</thead><tbody>{body}</tbody></table>{notes}</div>")

    def plot(self):
        """The history as a bokeh figure (left-axis keys, and right-axis keys if any).

        Returns
        -------
        bokeh.plotting.figure
            Show it with ``bokeh.plotting.show(fig)`` (``bokeh.io.output_notebook()`` first
            in Jupyter).
        """
        from bokeh.models import LinearAxis, Range1d
        from bokeh.plotting import figure

        xkey = next((k for k in ("iteration", "epoch", "batch") if self.history and
                     k in self.history[0]), None)
        xs = [h.get(xkey, i) for i, h in enumerate(self.history)]
        left, right = self.PLOT
        left = [k for k in left if any(k in h for h in self.history)]
        right = [k for k in right if any(k in h for h in self.history)]
        fig = figure(title=self._title(), x_axis_label=xkey or "step",
                     y_axis_label=", ".join(left), width=600, height=350)
        colors = ("navy", "firebrick", "darkgreen", "darkorange")
        for i, key in enumerate(left):
            pts = [(x, h[key]) for x, h in zip(xs, self.history) if key in h]
            fig.line([p[0] for p in pts], [p[1] for p in pts], legend_label=key,
                     line_width=2, color=colors[i % 4])
        if right:
            vals = [h[k] for h in self.history for k in right if k in h]
            lo, hi = min(vals), max(vals)
            pad = 0.05 * (hi - lo or 1.0)
            fig.extra_y_ranges = {"right": Range1d(lo - pad, hi + pad)}
            fig.add_layout(LinearAxis(y_range_name="right", axis_label=", ".join(right)),
                           "right")
            for i, key in enumerate(right):
                pts = [(x, h[key]) for x, h in zip(xs, self.history) if key in h]
                fig.line([p[0] for p in pts], [p[1] for p in pts], y_range_name="right",
                         legend_label=key, line_width=2, color=colors[(i + len(left)) % 4])
        return fig
