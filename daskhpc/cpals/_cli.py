"""CP-ALS as a :class:`~daskhpc.runtime.Workflow`: what ``daskhpc plan|run cpals``,
``daskhpc demo`` and the launchers know of it (flags from ``_setup.Options``)."""

from __future__ import annotations

from dataclasses import asdict

from daskhpc import datasets
from daskhpc._workflows import Call, RunOptions, Workflow
from daskhpc.report import summarize, summary_line

from . import _api
from ._setup import Options, validate_input


class CPALS(Workflow):
    """CP-ALS sparse tensor decomposition (Kaya and Ucar, Algorithms 3 and 4)."""

    name = "cpals"
    help = "CP-ALS sparse tensor decomposition (coarse- and fine-grain MTTKRP)"
    Options = Options
    inputs = "a sparse tensor (FROSTT .tns)"

    def check(self, call: Call) -> None:
        """The tensor read and checked, and --parts against it (the run reuses it)."""
        call.data = validate_input(call.one_input("tensor file (.tns)"), call.parts,
                                   **asdict(call.options))

    def plan(self, call: Call) -> dict:
        return _api.plan(call.one_input("tensor file (.tns)"),
                         call.parts_or(None, "plan cpals"),
                         partition_file=call.partition_file, network=call.network,
                         **call.values("plan"))

    def run(self, call: Call, run: RunOptions) -> dict:
        opts = call.values("run")
        return _api.fit(call.one_input("tensor file (.tns)"), opts.pop("rank"), call.parts,
                        partition_file=call.partition_file, run=run, **opts).report()

    def demo(self, client) -> dict:
        """The bundled UMLS tensor, fine-hp over 2 parts, R = 10, 10 iterations, checked."""
        return _api.fit(datasets.path("tensor"), 10, 2, client=client, grain="fine",
                        partition="hp", iters=10, tol=0, check_serial=True).report()

    def small_run(self) -> list:
        return [datasets.path("tensor"), "--parts", "3", "--rank", "8", "--iters", "5",
                "--tol", "0", "--check-serial"]

    def summary(self, report: dict) -> str:
        return summary(report)


def stop_words(report: dict) -> str:
    """Why the iterations ended, when ``--tol`` could have ended them early."""
    q = report.get("quality") or {}
    if "converged" not in q:
        return ""
    n, change, tol = report.get("iters"), q["fit_change"], report.get("tol")
    if q["converged"]:
        return (f"converged at iteration {q['iterations']} of {n}: the fit changed by "
                f"{change:.2g} < --tol {tol:g}")
    return f"ran all {n} iterations: the fit still changed by {change:.2g} >= --tol {tol:g}"


def summary(report: dict) -> str:
    """What the CLI prints for a plan or a run."""
    lines = [summarize({k: v for k, v in report.items() if k != "plan"})]
    stopped = stop_words(report)
    if stopped:
        lines.append(summary_line("stopped", stopped))
    modes = report.get("modes")
    if modes:
        head = ("mode", "load max", "load avg", "vol max", "vol avg", "msgs max", "msgs avg")
        rows = [(str(m["mode"]), str(m["load_max"]), f"{m['load_avg']:.0f}", str(m["vol_max"]),
                 f"{m['vol_avg']:.0f}", str(m["msgs_max"]), f"{m['msgs_avg']:.0f}")
                for m in modes]
        w = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
        lines.append("    " + "  ".join(h.rjust(x) for h, x in zip(head, w)))
        lines += ["    " + "  ".join(c.rjust(x) for c, x in zip(r, w)) for r in rows]
    p = report.get("plan")
    if p:
        lines.append(summary_line(
            "plan", f"per iteration {p['tot_vol']:,} rows of {p['words_per_unit']} words in "
                    f"{p['tot_msgs']:,} messages (sum of the phases' max {p['sum_max_vol']:,} "
                    f"rows; at most {p['max_msgs']} messages a part), {p['phases']} phases"))
    a = report.get("allreduce")
    if a:
        lines.append(summary_line("gram", f"all-reduce of {a['tot_msgs']} messages, "
                                          f"{a['planned_bytes']:,} bytes per iteration, in "
                                          f"{a['phases']} rounds"))
    t = report.get("timing") or {}
    per = sorted(x for x in t.get("per_iteration_s") or [] if x is not None)
    if per:
        lines.append(summary_line("iteration", f"{1e3 * per[len(per) // 2]:.1f} ms median"))
    plain = (report.get("serial_check") or {}).get("plain_serial")
    if plain:
        ok = "within" if plain["within_tolerance"] else "NOT within"
        lines.append(summary_line(
            "plain", f"textbook serial CP-ALS: max relative difference "
                     f"{plain['max_rel_diff']:.2g} ({ok} {plain['rtol']:g})"))
    return "\n".join(lines)
