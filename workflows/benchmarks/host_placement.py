"""Placement that pays in time: each workflow's layouts on a virtual cluster of 5 hosts
(daskhpc.testing.hosts: a scheduler and the client on host 0, a worker on each of hosts
1-4, links shaped with ``tc tbf``), measured against the cost model's prediction.

For each rate the cluster is brought up, calibrated on host 0 (``daskhpc info
--calibrate --save --name vc<rate>``), and every layout pair below runs with 4 parts,
the layouts alternating over ``--rounds``, each run with ``--network calibrated:vc<rate>
--json``, after the workflow's ``auto`` once (untimed: it warms the workers). Per layout:
the median measured time per step (epoch, iteration, multiply, call) over the rounds,
the report's ``plan.predicted_s_per_step``, planned and measured bytes, and per pair the measured
speed-up of the first layout against the predicted one. Prints a table per rate and
writes JSON (``--json``); ``--plots DIR`` draws measured against predicted per workflow
(SVG, matplotlib). Needs root and iproute2; reports the load (``uptime``).

    python workflows/benchmarks/host_placement.py --rates 100mbit 1gbit --json hp.json \\
        --plots docs/img
    python workflows/benchmarks/host_placement.py --workflows gcn --rounds 1
    python workflows/benchmarks/host_placement.py --replot a.json b.json --json ab.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from report_out import write_json

from daskhpc import datasets
from daskhpc.testing import hosts

BIN = os.path.dirname(sys.executable)
DATA = os.environ.get("DASKHPC_SHARED_DATA", "/work/shared/data")


def shared(*parts: str) -> str:
    return os.path.join(DATA, *parts)


def cases() -> dict:
    """Per workflow: ``(case, common args, {layout: args}, auto args)``; the first
    layout of a pair is the one the papers expect faster."""
    ratings, a9a = datasets.path("ratings"), datasets.path("libsvm")
    enron = [shared("graphs", "email-Enron.txt.gz"), "--random-features", "64",
             "--random-classes", "4", "--symmetrize", "--epochs", "10"]
    tensor = [shared("tensors", "mlsmall_user_movie_year.tns"), "--rank", "16", "--iters",
              "6", "--tol", "0"]
    uniform = ["--N", "4000000", "--density", "0.005", "--repeat", "5"]
    out = {"ssgd": [(f"{s}", [ratings, "--strategy", s, "--epochs", "6", "--parts", "4"],
                     {"hp": ["--partition", "hp"], "random": ["--partition", "random"]},
                     ["--partition", "auto"]) for s in ("dsgd", "p2p", "hc")],
           "gcn": [("email-Enron", enron + ["--parts", "4"],
                    {"hp": ["--partition", "hp"], "random": ["--partition", "random"]},
                    ["--partition", "auto"]),
                   ("pubmed", [shared("graphs", "pubmed.npz"), "--epochs", "20", "--parts", "4"],
                    {"hp": ["--partition", "hp"], "random": ["--partition", "random"]},
                    ["--partition", "auto"])],
           "cpals": [("fine", tensor + ["--parts", "4", "--grain", "fine"],
                      {"fine-hp": ["--partition", "hp"], "fine-random": ["--partition", "random"]},
                      ["--partition", "auto"]),
                     ("coarse", tensor + ["--parts", "4", "--grain", "coarse"],
                      {"coarse-hp": ["--partition", "hp"],
                       "coarse-block": ["--partition", "block"]}, None)],
           "spgemm": [("astro-ph AA", [shared("matrices", "astro-ph.mtx.gz"), "--consume",
                                       "count", "--memory-per-worker", "256MB"],
                       {"2x2x1": ["--grid", "2x2x1"], "1x1x4": ["--grid", "1x1x4"]},
                       ["--grid", "auto"])],
           "allreduce": [("uniform", uniform + ["--parts", "4"],
                          {"ssar_rec_dbl": ["--algorithm", "ssar_rec_dbl"],
                           "dense_rec_dbl": ["--algorithm", "dense_rec_dbl"]},
                          ["--algorithm", "auto"])],
           "linear": [("a9a", [a9a, "--parts", "4", "--epochs", "2", "--batch", "512"],
                       {"ssar_rec_dbl": ["--allreduce", "ssar_rec_dbl"],
                        "dense_rec_dbl": ["--allreduce", "dense_rec_dbl"]},
                       ["--allreduce", "auto"])]}
    return out


def step_time(rep: dict) -> float | None:
    """The report's median measured seconds per step (epoch, iteration, multiply, call):
    the median of ``timing.per_iteration_s``, as the report's summary takes it."""
    t = rep.get("timing") or {}
    per = t.get("per_iteration_s")
    if per:
        return float(statistics.median(per))
    return t.get("call_s_median")


def chosen_layout(rep: dict) -> str | None:
    """What ``auto`` ran: the plan's fastest layout."""
    rows = rep.get("layouts") or (rep.get("plan") or {}).get("layouts") or []
    if rows:
        return rows[0]["layout"]
    algos = (rep.get("plan") or {}).get("algorithms")     # linear: per call, the most used
    if algos:
        return max(algos, key=algos.get)
    return rep.get("partition_method") or rep.get("grid") or rep.get("algorithm")


def one(vc, work: str, env: dict, name: str, args: list, network: str) -> dict:
    """One ``daskhpc run`` on host 0: its report's numbers (or the error)."""
    path = os.path.join(work, f"r-{time.monotonic_ns()}.json")
    cmd = [os.path.join(BIN, "daskhpc"), "run", name, *args, "--network", network,
           "--scheduler-file", vc.sf, "--json", path, "--no-progress"]
    t0 = time.monotonic()
    got = vc.run(0, ["nice", "-n", "10", *cmd], cwd=work, env=env, capture_output=True,
                 text=True, timeout=1800)
    if got.returncode != 0:
        return {"error": (got.stderr.strip().splitlines() or ["?"])[-1][:300]}
    with open(path) as f:
        rep = json.load(f)
    plan, meas = rep.get("plan") or {}, rep.get("measured") or {}
    return {"step_s": step_time(rep), "predicted_s": plan.get("predicted_s_per_step"),
            "compute_s": (plan.get("prediction") or {}).get("compute_s"),
            "comm_s": (plan.get("prediction") or {}).get("comm_s"),
            "planned_bytes": meas.get("planned_bytes"),
            "measured_bytes": meas.get("inter_worker_bytes_sizeof"),
            "host_link_bytes": meas.get("host_link_bytes"),
            "chosen": chosen_layout(rep), "wall_s": round(time.monotonic() - t0, 1)}


def median_of(runs: list, key: str):
    vals = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def measure_rate(rate: str, workflows: list, rounds: int, log, only=None) -> dict:
    """Every case of ``workflows`` on a fresh cluster at ``rate``."""
    work = tempfile.mkdtemp(prefix=f"host-placement-{rate}-")
    env = {**os.environ, "DASK_CONFIG": os.path.join(work, "config")}
    net = f"vc{rate}"
    out = {"rate": rate, "workflows": {}, "uptime": []}
    with hosts.virtual_cluster(5, rate=rate) as vc:
        vc.sf = vc.start_dask(os.path.join(work, "dask"))
        cal = vc.run(0, [os.path.join(BIN, "daskhpc"), "info", "--calibrate", "--save",
                         "--name", net, "--scheduler-file", vc.sf], cwd=work, env=env,
                     capture_output=True, text=True, timeout=1800)
        if cal.returncode != 0:
            raise SystemExit(f"host_placement: calibration failed: {cal.stderr[-300:]}")
        out["calibration"] = [ln.strip() for ln in cal.stdout.splitlines()
                              if "alpha" in ln or "flop" in ln or "duplex" in ln]
        log(f"[{rate}] " + "; ".join(out["calibration"]))
        for name in workflows:
            rows = []
            for case, common, layouts, auto in cases()[name]:
                if only and case not in only:
                    continue
                runs = {lay: [] for lay in layouts}
                # auto first, untimed: it also warms the workers (a kernel's first call
                # in a process compiles it; SpGEMM times a single multiply)
                first = auto or next(iter(layouts.values()))
                warm = one(vc, work, env, name, common + first, f"calibrated:{net}")
                if auto is not None:
                    row_auto = warm.get("chosen") if "error" not in warm else warm["error"]
                    log(f"[{rate}] {name} {case} auto: {row_auto}")
                for r in range(rounds):
                    order = list(layouts) if r % 2 == 0 else list(layouts)[::-1]
                    for lay in order:
                        got = one(vc, work, env, name, common + layouts[lay],
                                  f"calibrated:{net}")
                        runs[lay].append(got)
                        log(f"[{rate}] {name} {case} {lay} round {r}: {got}")
                row = {"case": case, "layouts": {}}
                for lay, rs in runs.items():
                    row["layouts"][lay] = {
                        "step_s": median_of(rs, "step_s"),
                        "steps_s": [x.get("step_s") for x in rs],
                        **{k: median_of(rs, k) for k in ("predicted_s", "compute_s", "comm_s",
                                                         "planned_bytes", "measured_bytes")},
                        "host_link_bytes": rs[0].get("host_link_bytes"),
                        "errors": [x["error"] for x in rs if "error" in x]}
                a, b = (row["layouts"][k] for k in layouts)
                if a["step_s"] and b["step_s"] and a["predicted_s"] and b["predicted_s"]:
                    row["measured_speedup"] = b["step_s"] / a["step_s"]
                    row["predicted_speedup"] = b["predicted_s"] / a["predicted_s"]
                    row["fastest"] = min(layouts, key=lambda k: row["layouts"][k]["step_s"])
                if auto is not None:
                    row["auto"] = row_auto
                rows.append(row)
                out["uptime"].append(os.getloadavg()[0])
            out["workflows"][name] = rows
    return out


def table(results: list) -> str:
    """One markdown table per workflow, a row per case and layout, a column pair per rate."""
    lines = []
    rates = [r["rate"] for r in results]
    names = list(dict.fromkeys(n for r in results for n in r["workflows"]))
    for name in names:
        head = " | ".join(f"{r} measured / predicted" for r in rates)
        lines += ["", f"{name}:", "", f"| case | layout | MB planned (measured) | {head} |",
                  "| --- " * (3 + len(rates)) + "|"]
        first = next(r for r in results if r["workflows"].get(name))
        cases = {row["case"]: row for row in first["workflows"][name]}
        for case in cases:
            rows = [next((x for x in r["workflows"].get(name, []) if x["case"] == case), None)
                    for r in results]
            for lay, v in cases[case]["layouts"].items():
                mb = "-" if v["planned_bytes"] is None else \
                    f"{v['planned_bytes'] / 1e6:.1f} ({(v['measured_bytes'] or 0) / 1e6:.1f})"
                cells = [f"{_s(row['layouts'][lay]['step_s'])} / "
                         f"{_s(row['layouts'][lay]['predicted_s'])}"
                         if row and lay in row["layouts"] else "-"
                         for row in rows]
                lines.append(f"| {case} | {lay} | {mb} | {' | '.join(cells)} |")
            sp = [f"{row['measured_speedup']:.2f}x / {row['predicted_speedup']:.2f}x; auto "
                  f"{row.get('auto', '-')}, fastest {row.get('fastest', '-')}"
                  if row and "measured_speedup" in row else "-" for row in rows]
            lines.append(f"| {case} | speed-up of {next(iter(cases[case]['layouts']))} | | "
                         f"{' | '.join(sp)} |")
    return "\n".join(lines)


def _s(x) -> str:
    return "-" if x is None else f"{x * 1e3:.1f} ms" if x < 1 else f"{x:.2f} s"


def plots(results: list, folder: str) -> list:
    """One SVG per workflow: measured against predicted seconds per step, each rate."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(folder, exist_ok=True)
    names = sorted({n for r in results for n in r["workflows"]})
    made = []
    for name in names:
        fig, ax = plt.subplots(figsize=(4.5, 4))
        lo, hi = float("inf"), 0.0
        for i, res in enumerate(results):
            label = res["rate"]
            for row in res["workflows"].get(name, []):
                for lay, v in row["layouts"].items():
                    if v["step_s"] and v["predicted_s"]:
                        ax.scatter(v["predicted_s"], v["step_s"], color=f"C{i}",
                                   marker="os^D"[i % 4], label=label)
                        label = None
                        ax.annotate(f"{row['case']} {lay}", (v["predicted_s"], v["step_s"]),
                                    fontsize=6)
                        lo = min(lo, v["predicted_s"], v["step_s"])
                        hi = max(hi, v["predicted_s"], v["step_s"])
        if hi:
            ax.plot([lo, hi], [lo, hi], "k-", lw=0.5)
            ax.plot([lo, hi], [1.5 * lo, 1.5 * hi], "k:", lw=0.5)
            ax.plot([lo, hi], [lo / 1.5, hi / 1.5], "k:", lw=0.5)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("predicted s per step")
        ax.set_ylabel("measured s per step (median)")
        ax.set_title(f"{name}: measured vs predicted (dotted: 1.5x)", fontsize=9)
        ax.legend(fontsize=7)
        path = os.path.join(folder, f"host-placement-{name}.svg")
        fig.tight_layout()
        fig.savefig(path)
        plt.close(fig)
        made.append(path)
    return made


def merged(saved: list) -> list:
    """The rates of several saved runs, one entry per rate: the workflows of runs at the
    same rate (one run per workflow) together, the load averages of all."""
    out: dict = {}
    for doc in saved:
        for res in doc["rates"]:
            into = out.setdefault(res["rate"], {**res, "workflows": {}, "uptime": [],
                                                "calibration": []})
            into["workflows"].update(res["workflows"])
            into["uptime"] += res.get("uptime") or []
            into["calibration"] += [c for c in res.get("calibration") or []
                                    if c not in into["calibration"]]
    return list(out.values())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rates", nargs="+", default=["100mbit", "1gbit"])
    p.add_argument("--workflows", nargs="+", default=list(cases()))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--cases", nargs="+", help="only these cases (e.g. hc email-Enron)")
    p.add_argument("--json", default="-", help="where the JSON goes (default stdout)")
    p.add_argument("--plots", metavar="DIR", help="one SVG per workflow in DIR")
    p.add_argument("--replot", metavar="JSON", nargs="+",
                   help="no measuring: the tables (and --plots) of saved JSON files, the "
                        "runs at one rate merged (and written to --json)")
    opts = p.parse_args(argv)
    if opts.replot:
        results = merged([json.load(open(path)) for path in opts.replot])
        if opts.json != "-":
            write_json({"rates": results}, opts.json)
        print(table(results))
        if opts.plots:
            print("\n".join(plots(results, opts.plots)))
        return 0
    why = hosts.unavailable()
    if why:
        print(f"host_placement: {why}", file=sys.stderr)
        return 2

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    results = []
    for rate in opts.rates:
        results.append(measure_rate(rate, opts.workflows, opts.rounds, log, opts.cases))
        print(table(results[-1:]), file=sys.stderr, flush=True)
        write_json({"rates": results, "uptime": subprocess.run(
            ["uptime"], capture_output=True, text=True).stdout.strip()}, opts.json)
    if opts.plots:
        for path in plots(results, opts.plots):
            log(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
