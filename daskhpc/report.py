"""The JSON report of every command (contract: docs/cli.md) and the result base class.

Every workflow's result derives from :class:`WorkflowResult`: ``report()`` is the full
report (keys that do not apply are omitted, never filled with zeros), ``summary()`` the few
lines the CLI prints, ``repr`` (and ``_repr_html_`` in notebooks) a table of the history and
``plot()`` a bokeh figure of it. No dask here.

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

from daskhpc._version import __version__

__all__ = ["WorkflowResult", "new_report", "to_json", "write_report", "summarize",
           "summary_line", "format_bytes", "already_complete", "unavailable", "ratio_or_none",
           "compare_arrays", "bytes_side_by_side", "PLANNED_BYTES", "rerun_text",
           "run_sections", "history_column"]

#: The one meaning of ``planned_bytes`` in a report, a history row and the dashboard.
PLANNED_BYTES = (
    "bytes the plan sends between workers: the workflow's comm.Plan projected on the run's "
    "workers (Plan.placed: messages between parts of one worker cost nothing), over the run "
    "(measured.planned_bytes) or one unit (a history row's planned_bytes); measured bytes "
    "are what the workers wrote to the wire over the same span")

#: Sections that hold a part-level ``comm.Plan.report()`` (every part its own worker).
PLAN_SECTIONS = ("plan", "run_plan", "eval_plan")

#: Report sections in the order of docs/cli.md (others follow).
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
    """A run's report keeps ``planned_bytes`` for :data:`PLANNED_BYTES` only: beside
    ``measured``, the plan sections' part-level totals become ``part_bytes`` (with several parts
    on a worker they are not what the wire carries; a plan-only report keeps the name)."""
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

    ``measured`` is the frame's (``planned_bytes``, ``inter_worker_bytes``); ``history`` rows
    carry ``planned_bytes`` / ``measured_bytes``; ``unit`` is what a row is (``epoch``,
    ``iteration``, ``batch``). Keys without data are omitted.

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


def run_sections(info: dict, out, nparts: int, *, cost: dict | None = None,
                 layouts=None) -> dict:
    """``info`` (a workflow's own sections) with those every run on the workflow frame
    reports, from the frame's outcome ``out`` (``runtime.run_job``): ``measured`` (and
    ``parts_per_worker``), ``timing`` (``run_s``, ``setup_s``, ``per_iteration_s``),
    ``execution``, ``placement`` (part -> worker) and ``recovery``; ``cost`` (the placed
    prediction, ``LayoutCost.section``) joins ``plan``, ``layouts`` (ranked) is kept."""
    owner = [out.placement.worker(p) for p in range(nparts)]
    info["measured"] = {**out.measured, "parts_per_worker": nparts / len(set(owner))}
    info.setdefault("timing", {}).update(
        {k: out.timing.get(k) for k in ("run_s", "setup_s", "per_iteration_s")})
    info["execution"] = dict(out.execution)
    info["placement"] = {str(p): w for p, w in enumerate(owner)}
    info["recovery"] = dict(out.recovery)
    if cost is not None:
        info.setdefault("plan", {}).update(cost)
    if layouts:
        info["layouts"] = layouts
    return info


def _plain(obj):
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, (np.ndarray, np.generic)):      # numpy scalars as Python's
        return _plain(obj.tolist())
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
    """The ``serial_check`` section: are the distributed arrays of ``pairs`` (distributed,
    serial reference) the serial ones? Where the arithmetic differs (another summation order),
    ``within_tolerance`` says whether every pair agrees to ``rtol``, relative to the
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


def unavailable(section: dict, key: str, reason: str) -> dict:
    """Record that figure ``key`` of a report section cannot be computed, and why.

    ``section[key]`` becomes None (the JSON omits it) and ``section["unavailable"][key]``
    the reason; :func:`summarize` prints ``n/a (reason)`` in its place.

    Examples
    --------
    >>> q = {"rmse": 0.5}
    >>> unavailable(q, "improvement", "the baseline's error is 0")
    {'rmse': 0.5, 'improvement': None, 'unavailable': {'improvement': "the baseline's error is 0"}}
    >>> print(summarize({"workflow": "x", "quality": q}))
    x
      quality    rmse 0.5, improvement n/a (the baseline's error is 0)
    """
    section[key] = None
    section.setdefault("unavailable", {})[key] = reason
    return section


def ratio_or_none(num, den):
    """``num / den`` as a float, or None where ``den`` is 0 (or not finite).

    Examples
    --------
    >>> ratio_or_none(3, 2), ratio_or_none(1.0, 0.0)
    (1.5, None)
    """
    den = float(den)
    if den == 0.0 or not np.isfinite(den):
        return None
    return float(num) / den


def _fmt(v) -> str:
    if isinstance(v, (float, np.floating)):
        return f"{v:.4g}"
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return _count(v)
    return str(v)


def summarize(report: dict) -> str:
    """A few human lines for a report (the full one is the JSON): what ran, planned vs
    measured, quality, serial check.

    Examples
    --------
    >>> print(summarize({"workflow": "x", "input": {"path": "/d/a.mtx", "shape": [2, 3],
    ...                  "nnz": 4}, "parts": 2, "timing": {"run_s": 0.5},
    ...                  "measured": {"planned_bytes": 2000, "planned_messages": 4,
    ...                               "inter_worker_bytes": 2100,
    ...                               "inter_worker_messages": 4},
    ...                  "serial_check": {"done": True, "identical": True}}))
    x: a.mtx, 2 x 3, 4 nonzeros, 2 parts
      traffic    planned 2 kB in 4 messages, measured 2.1 kB in 4 (1.05x the plan)
      time       run 0.50 s
      serial     identical to the serial reference
    """
    lines = [_headline(report)]
    done = already_complete(report)
    for label, text in (("resumed", _complete_line(done, report)),
                        ("partition", _partition_line(report.get("partition"),
                                                       report.get("parts"))),
                        ("plan", _plan_line(report)),
                        ("traffic", "" if done else _traffic_line(report.get("measured"))),
                        ("time", _time_line(report.get("timing"))),
                        ("execution", "one worker: steps run in one loop, no exchange"
                         if (report.get("execution") or {}).get("single_worker") else ""),
                        ("steps", _steps_line(report.get("execution"))),
                        ("quality", _quality_line(report.get("quality"))),
                        ("model", _model_line(report.get("quality"))),
                        ("serial", _serial_line(report.get("serial_check")))):
        if text:
            lines.append(summary_line(label, text))
    for r in (report.get("recovery") or {}).get("recoveries") or []:
        lines.append(summary_line("recovered", f"lost {', '.join(r['lost'])}; ran again "
                                  f"{rerun_text(r)}; {r.get('time_lost_s', 0.0):.2f} s lost"))
    saved = report.get("saved")
    if isinstance(saved, dict) and saved.get("dir"):
        lines.append(summary_line("saved", f"the result (model, history, report) in "
                                           f"{saved['dir']}: daskhpc.load reads it back"))
    ck = report.get("checkpoint")
    if isinstance(ck, dict) and "dir" in ck:
        more = ", ".join(f"{k.replace('_', ' ')} {_fmt(v)}" for k, v in ck.items()
                         if k != "dir" and isinstance(v, (int, float, str, bool)))
        lines.append(summary_line("checkpoint", ck["dir"] + (f" ({more})" if more else "")))
    return "\n".join(lines)


def rerun_text(rec: dict) -> str:
    """What a recovery ran again, as ranges and a count.

    Examples
    --------
    >>> rerun_text({"rerun": [[479, 2999]], "rerun_count": 2521, "unit_name": "iterations"})
    '479-2999 (2,521 iterations)'
    >>> rerun_text({"rerun": "symbolic"})
    'symbolic'
    """
    again = rec.get("rerun")
    if not isinstance(again, list):
        return str(again if again is not None else rec.get("restart"))
    if not again:
        return "nothing"
    runs = [f"{a}-{b}" if b != a else f"{a}" for a, b in again[:4]]
    more = f", ... ({len(again) - 4} more runs)" if len(again) > 4 else ""
    count = rec.get("rerun_count")
    return ", ".join(runs) + more + (f" ({count:,} {rec.get('unit_name') or 'units'})"
                                     if count is not None else "")


def _steps_line(execution) -> str:
    """Where the busiest worker's step time went per unit (``execution["steps"]``), and the
    others' longest wait."""
    sp = execution.get("steps") if isinstance(execution, dict) else None
    if not isinstance(sp, dict) or not sp.get("per_worker") or not sp.get("units"):
        return ""
    n, workers = sp["units"], list(sp["per_worker"].values())
    unit = str(execution.get("units") or "unit")
    unit = unit[:-1] if unit.endswith("s") else unit
    busy = max(workers, key=lambda v: v["compute_s"] + (v.get("send_s") or 0.0))
    line = (f"per {unit} on the busiest of {len(workers)} worker"
            f"{'s' if len(workers) != 1 else ''}: compute {_seconds(busy['compute_s'] / n)}")
    if len(workers) == 1 or busy.get("wait_s") is None:    # (no exchange timed)
        return line
    line += f", wait {_seconds(busy['wait_s'] / n)}, send {_seconds(busy['send_s'] / n)}"
    rest = [v.get("wait_s") or 0.0 for v in workers if v is not busy]
    line += f" (the others wait up to {_seconds(max(rest) / n)})"
    on = sp.get("waited_for")
    return line + (f"; waited for most: {on}" if on and sp.get("waited_for_s") else "")


def already_complete(report: dict) -> dict | None:
    """``{"units", "unit_name"}`` when a resumed run found every unit in its checkpoint
    (the frame's ``recovery.already_complete``; spgemm keeps it in ``checkpoint``)."""
    for key in ("recovery", "checkpoint"):
        sec = report.get(key)
        if isinstance(sec, dict) and isinstance(sec.get("already_complete"), dict):
            return sec["already_complete"]
    return None


def _complete_line(done, report: dict) -> str:
    """The line of a resumed run whose checkpoint held every unit ('' otherwise)."""
    if not done:
        return ""
    n, name = done["units"], done.get("unit_name", "units")
    one = "batch" if name == "batches" else name.removesuffix("s")
    return (f"already complete at {one} {n}: the checkpoint holds all {n} {name}, nothing "
            "ran (the numbers below are the saved ones)")


def prediction_lines(report: dict) -> list[str]:
    """The cost model's lines: every layout's predicted time per step, and a run's prediction
    beside its measured median."""
    plan = report.get("plan")
    if not isinstance(plan, dict) or "predicted_s_per_step" not in plan:
        return []
    net = ((plan.get("prediction") or {}).get("network") or {}).get("name", "?")
    lines = []
    rows = report.get("layouts") or []
    if rows:
        shown = ", ".join(f"{r['layout']} {_seconds(r['predicted_s_per_step'])}" for r in rows)
        lines.append(summary_line("layouts", f"predicted per step on {net}: {shown}"))
    steps = (report.get("timing") or {}).get("per_iteration_s")
    if isinstance(steps, list) and steps:
        pred = plan.get("prediction") or {}
        text = f"{_seconds(plan['predicted_s_per_step'])} per step on {net}"
        if "compute_s" in pred:
            text += (f" (compute {_seconds(pred['compute_s'])}, "
                     f"communication {_seconds(pred['comm_s'])})")
        lines.append(summary_line("predicted", text + f"; measured median "
                                  f"{_seconds(float(np.median(steps)))}"))
    return lines


def summary_line(label: str, text: str) -> str:
    """One line of :func:`summarize`'s block (a workflow's ``summary`` adds its own)."""
    return f"  {label:<10} {text}"


def _headline(report: dict) -> str:
    head = str(report.get("workflow"))
    inp = report.get("input")
    if isinstance(inp, dict) and "shape" in inp:
        name = str(inp.get("path") or inp.get("name") or "").rsplit("/", 1)[-1]
        shape = " x ".join(str(n) for n in inp["shape"])
        head += f": {name + ', ' if name else ''}{shape}"
        if inp.get("nnz") is not None:
            head += f", {_count(inp['nnz'])} nonzeros"
    if "parts" in report:
        head += f", {report['parts']} parts"
    return head


def _partition_line(p, parts=None) -> str:
    if not isinstance(p, dict):
        return ""
    bits = [str(p[k]) for k in ("partitioner", "method") if isinstance(p.get(k), str)]
    for k in ("km1", "soed", "cut"):
        if isinstance(p.get(k), (int, np.integer)):
            bits.append(f"{k} {_count(p[k])}")
            break                      # one cut metric is enough here; the JSON has all
    if isinstance(p.get("imbalance"), (int, float)):
        bits.append(f"imbalance {100 * p['imbalance']:.1f}%{_imbalance_why(p, parts)}")
    if p.get("balanced") is False:
        bits.append("NOT balanced")
    return ", ".join(bits)


#: A lower bound on the imbalance below this is not worth a word.
IMBALANCE_WORTH_SAYING = 0.03


def _imbalance_why(p: dict, parts=None) -> str:
    """Why no partition could make the imbalance small (the section's ``imbalance_lower_bound``
    and ``imbalance_bound``), or '' when the bound is not worth a word."""
    low, b = p.get("imbalance_lower_bound"), p.get("imbalance_bound")
    if not isinstance(low, (int, float)) or not isinstance(b, dict) or \
            low <= max(IMBALANCE_WORTH_SAYING, p.get("epsilon") or 0.0):
        return ""
    v, w = b.get("vertex", "vertex"), b.get("weight", "weight")
    why = (f"the heaviest {v} has {_count(b['heaviest'])} {w} where an even part has "
           f"{b['even_part']:,.0f}")
    if isinstance(parts, int) and isinstance(b.get("vertices"), int) and parts > b["vertices"]:
        why = f"{_count(parts)} parts for {_count(b['vertices'])} {v}s, and {why}"
    return f" (no partition can do better than {100 * low:.1f}%: {why})"


def _plan_line(report: dict) -> str:
    """The plan's totals (a plan-only report; a run shows its traffic instead)."""
    p = report.get("plan")
    if not isinstance(p, dict) or isinstance(report.get("measured"), dict) \
            or "tot_vol" not in p:
        return ""
    unit = p.get("unit", "units")
    text = (f"{_count(p['tot_vol'])} {unit} in {_count(p.get('tot_msgs', 0))} messages "
            f"(max per part: {_count(p.get('max_vol', 0))} {unit}, "
            f"{_count(p.get('max_msgs', 0))} messages)")
    if p.get("planned_bytes") is not None:
        text += f", {format_bytes(p['planned_bytes'])}"
    return text


def _traffic_line(m) -> str:
    if not isinstance(m, dict) or "inter_worker_bytes" not in m:
        return ""
    got = f"measured {format_bytes(m['inter_worker_bytes'])} in " \
          f"{_count(m.get('inter_worker_messages', 0))}"
    if "planned_bytes" not in m:
        return got.replace("measured", "between workers", 1) + " messages"
    planned = int(m["planned_bytes"])
    ratio = f" ({m['inter_worker_bytes'] / planned:.2f}x the plan)" if planned else ""
    return (f"planned {format_bytes(planned)} in "
            f"{_count(m.get('planned_messages', 0))} messages, "
            f"{got}{ratio}")


def _time_line(t) -> str:
    if not isinstance(t, dict):
        return ""
    main = next((k for k in ("run_s", "total_s") if isinstance(t.get(k), (int, float))), None)
    rest = [f"{k[:-2].replace('_', ' ')} {t[k]:.2f} s" for k in t
            if k != main and k.endswith("_s") and isinstance(t[k], (int, float))
            and not k.startswith(("median", "per_")) and t[k] >= 0.005][:4]
    if main is None:
        return ", ".join(rest)
    return f"run {t[main]:.2f} s" + (f" ({', '.join(rest)})" if rest else "")


def _quality_line(q) -> str:
    if not isinstance(q, dict):
        return ""
    bits, missing = [], []
    notes = q.get("unavailable") if isinstance(q.get("unavailable"), dict) else {}
    for k, v in q.items():
        if v is None and k in notes:        # a figure that cannot be computed: say why
            missing.append(f"{k.replace('_', ' ')} n/a ({notes[k]})")
            continue
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.number)):
            continue                   # definitions and flags: the JSON has them
        if k.endswith("_s"):
            bits.append(f"{k[:-2].replace('_', ' ')} {_seconds(v)}")
        else:
            bits.append(f"{k.replace('_', ' ')} {_fmt(v)}")
    return ", ".join(bits[:6] + missing)


#: measured / predicted above which the summary says what the alpha-beta model leaves out
MODEL_GAP = 3.0


def _model_line(q) -> str:
    """A measured time far above the alpha-beta prediction (``predicted_s``,
    ``measured_call_s``): what the model leaves out, and per step where ``steps_per_call`` says."""
    if not isinstance(q, dict):
        return ""
    pred, got = q.get("predicted_s"), q.get("measured_call_s")
    if not (isinstance(pred, (int, float)) and isinstance(got, (int, float))) or pred <= 0 \
            or got <= MODEL_GAP * pred:
        return ""
    text = (f"measured {got / pred:.0f}x the alpha-beta prediction, which counts only "
            "message latency and bytes, not task scheduling, Python per step, "
            "serialisation or waiting for the slowest rank")
    steps = q.get("steps_per_call")
    if isinstance(steps, int) and steps > 0:
        text += (f" ({_seconds((got - pred) / steps)} per step measured beyond it, "
                 f"{steps} steps a call)")
    return text


def _serial_line(c) -> str:
    if not isinstance(c, dict):
        return ""
    if not c.get("done"):
        return "not checked (--check-serial compares with the serial reference)"
    if isinstance(c.get("statement"), str):   # the workflow's words for what it compared
        return c["statement"]
    ref = c.get("reference")
    ref = f": {ref}" if isinstance(ref, str) and len(ref) <= 80 else ""
    diff = c.get("max_abs_diff")
    if c.get("identical"):
        return f"identical to the serial reference{ref}"
    if c.get("within_tolerance"):
        return (f"within rtol {c.get('rtol')} (max |diff| {_fmt(diff)}) of the serial "
                f"reference{ref}")
    return "DIFFERS" + (f" (max |diff| {_fmt(diff)})" if diff is not None else "") + \
        f" from the serial reference{ref}"


def _seconds(t) -> str:
    return f"{1e3 * t:.3g} ms" if t < 1 else f"{t:.3g} s"


def _count(n) -> str:
    return f"{int(n):,}"


def format_bytes(n, spec: str = ".3g") -> str:
    """Bytes in decimal units, the number formatted by ``spec`` (the summaries' and the
    dashboard's one formatter).

    Examples
    --------
    >>> format_bytes(5_324_800), format_bytes(5_324_800, ",.1f"), format_bytes(999)
    ('5.32 MB', '5.3 MB', '999 B')
    """
    n = float(n)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:,.0f} B" if unit == "B" else f"{n:{spec}} {unit}"
        n /= 1000
    return ""  # pragma: no cover


def history_column(key: str, doc: str = "") -> property:
    """A result's property: ``key`` of every history row that has it."""
    return property(lambda self: [h[key] for h in self.history if key in h], doc=doc)


class WorkflowResult:
    """The outcome of a workflow run: report sections and a per-unit history.

    Parameters
    ----------
    info : dict
        Report sections (``input``, ``parts``, ``plan``, ``measured``, ``timing``,
        ``quality``, ``serial_check``, workflow-specific ones, and ``command``).
    history : list of dict, optional
        One row per unit (epoch, iteration, batch), usually with ``time_s`` and
        ``planned_bytes``/``measured_bytes``.

    Subclasses set the class attributes below and add their own (factors, predictions, ...).
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

    def report(self) -> dict:
        """The full JSON report of docs/cli.md (``daskhpc.report.write_report`` writes it)."""
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

    #: the attributes that make the model (``save`` writes them, ``daskhpc.load`` sets them)
    SAVED: tuple = ()

    def save(self, directory) -> str:
        """Keep the result in ``directory``: its model (``SAVED``) as numpy arrays, its
        report and history, in an open format (docs/cli.md, "Saved results");
        ``daskhpc.load(directory)`` reads it back."""
        from daskhpc._saved import save

        return save(self, directory, json.loads(to_json(self.report())),
                    json.loads(to_json(self.history)))

    def summary(self) -> str:
        """The lines the CLI prints after a run or a plan."""
        return summarize(self.report())

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
        done = already_complete(self.info)
        if done:
            out.append(_complete_line(done, self.info))
        elif rec.get("resumed_from") is not None:
            out.append(f"resumed from the checkpoint after iteration {rec['resumed_from']}")
        for r in rec.get("recoveries", []):
            out.append(f"lost {', '.join(r['lost'])} after {r.get('after_s', 0):.1f} s; "
                       f"ran again {rerun_text(r)}; {r.get('time_lost_s', 0.0):.2f} s lost")
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
        """The history as a bokeh figure (left-axis keys, and right-axis keys if any): in Jupyter
        it draws itself as a cell's value; elsewhere ``bokeh.io.show(fig)`` opens it in a browser
        and ``bokeh.io.save(fig, "fig.html")`` writes a page."""
        from bokeh.models import LinearAxis, Range1d
        from bokeh.plotting import figure

        from daskhpc._notebook import displayable

        xkey = next((k for k in ("iteration", "epoch", "batch") if self.history and
                     k in self.history[0]), None)
        xs = [h.get(xkey, i) for i, h in enumerate(self.history)]
        left, right = self.PLOT
        left = [k for k in left if any(k in h for h in self.history)]
        right = [k for k in right if any(k in h for h in self.history)]
        fig = figure(title=self._title(), x_axis_label=xkey or "step",
                     y_axis_label=", ".join(left), width=600, height=350)
        if right:
            vals = [h[k] for h in self.history for k in right if k in h]
            lo, hi = min(vals), max(vals)
            pad = 0.05 * (hi - lo or 1.0)
            fig.extra_y_ranges = {"right": Range1d(lo - pad, hi + pad)}
            fig.add_layout(LinearAxis(y_range_name="right", axis_label=", ".join(right)),
                           "right")
        colors = ("navy", "firebrick", "darkgreen", "darkorange")
        for i, key in enumerate(left + right):
            pts = [(x, h[key]) for x, h in zip(xs, self.history) if key in h]
            fig.line([p[0] for p in pts], [p[1] for p in pts], legend_label=key, line_width=2,
                     color=colors[i % 4], **({"y_range_name": "right"} if i >= len(left) else {}))
        return displayable(fig)
