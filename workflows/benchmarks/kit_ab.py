"""Before/after the workflow kit: SSGD epochs (K = 2 and 4), SpGEMM 2x2x1 on email-Enron,
CP-ALS iterations and GCN epochs,
two source trees measured in turn (A B A B ...) in fresh processes on the same machine.

::

    python workflows/benchmarks/kit_ab.py --other /path/to/old/checkout --rounds 5 --out ab.json

Each round runs this file's ``--one`` measurement once with the current tree (``PYTHONPATH``
= this checkout) in each exchange mode of ``--modes`` (SSGD only; ``direct`` is the
default, ``graph`` the task-graph reference; chosen through the environment variable
``DASK_DASKHPC__RUNTIME__EXCHANGE``) and once with the other tree (in each mode of
``--before-modes`` too, for a tree that reads that variable; without it, in its own
default), rotating which goes first; every measurement starts its own LocalCluster.
Figures per measurement:

ssgd-k2   median epoch time of a 20-epoch H&C fit, K = 2 on 2 workers (hp rows, ml-latest-small)
ssgd-k4   the same, K = 4 on 4 workers (one part per worker)
spgemm    wall time of C = A·A, email-Enron, grid 2x2x1 on 4 workers, count consumer
          (median of 3 after one warm-up product)
cpals     median iteration time of a 20-iteration CP-ALS fit, the bundled tensor, R = 16,
          2 parts on 2 workers (fine grain, hp)
gcn       median epoch time of a 50-epoch GCN fit on the bundled Cora, 2 parts on 2 workers

Only public API is used (``dh.ssgd.fit``, ``dh.spgemm.multiply``, ``dh.cpals.fit``,
``dh.gcn.fit``), so the same file times both trees.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("DASKHPC_SHARED_DATA", ROOT.parent / "shared" / "data"))
QUIET = {"distributed.worker.profile.enabled": False,
         "distributed.admin.system-monitor.gil.enabled": False}


def one(which: str) -> dict:
    import dask.config

    import daskhpc as dh
    from daskhpc.runtime import connect

    out = {}
    with dask.config.set(QUIET):
        if which.startswith("ssgd"):
            K = 2 if which == "ssgd-k2" else 4
            ratings = dh.datasets.ratings()
            with connect(n_workers=K, dashboard_address=":0") as client:
                dh.ssgd.fit(ratings, K, client=client, strategy="hc", epochs=2)   # warm-up
                res = dh.ssgd.fit(ratings, K, client=client, strategy="hc", epochs=20)
                out["epoch_s"] = statistics.median(h["time_s"] for h in res.history)
        elif which in ("cpals", "gcn"):
            with connect(n_workers=2, dashboard_address=":0") as client:
                if which == "cpals":
                    X = dh.datasets.tensor()
                    dh.cpals.fit(X, 16, 2, client=client, iters=2, tol=0.0)        # warm-up
                    res = dh.cpals.fit(X, 16, 2, client=client, iters=20, tol=0.0)
                else:
                    g = dh.datasets.cora()
                    dh.gcn.fit(g, nparts=2, client=client, epochs=2)              # warm-up
                    res = dh.gcn.fit(g, nparts=2, client=client, epochs=50)
                out["iteration_s"] = statistics.median(h["time_s"] for h in res.history)
        else:
            a = dh.io.read(DATA / "graphs" / "email-Enron.txt.gz").matrix
            with connect(n_workers=4, dashboard_address=":0") as client:
                dh.spgemm.multiply(a, client=client, grid="2x2x1", consume="count", plan=False)
                ts = []
                for _ in range(3):
                    t0 = time.perf_counter()
                    dh.spgemm.multiply(a, client=client, grid="2x2x1", consume="count",
                                       plan=False)
                    ts.append(time.perf_counter() - t0)
                out["multiply_s"] = statistics.median(ts)
    return out


def run_tree(tree: Path, which: str, exchange: str | None = None) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    if exchange:
        env["DASK_DASKHPC__RUNTIME__EXCHANGE"] = exchange
    for attempt in (1, 2):     # a loaded machine occasionally times a cluster start out
        got = subprocess.run([sys.executable, __file__, "--one", which], env=env, cwd=tree,
                             capture_output=True, text=True)
        if got.returncode == 0:
            return json.loads(got.stdout.strip().splitlines()[-1])
        print(f"{which} in {tree} failed (attempt {attempt}):",
              got.stderr.strip().splitlines()[-1:], file=sys.stderr, flush=True)
    raise RuntimeError(f"{which} failed twice in {tree}")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--one", help=argparse.SUPPRESS)
    p.add_argument("--other", type=Path, help="the checkout to compare with (before)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--only", nargs="*", default=["ssgd-k2", "ssgd-k4", "spgemm", "cpals", "gcn"])
    p.add_argument("--modes", nargs="*", default=["direct", "graph"],
                   help="exchange modes of the current tree to time (SSGD)")
    p.add_argument("--before-modes", nargs="*", default=[],
                   help="exchange modes to time the other tree in (SSGD; it must read "
                        "DASK_DASKHPC__RUNTIME__EXCHANGE); each is compared with the same "
                        "mode of the current tree")
    p.add_argument("--out")
    args = p.parse_args()
    if args.one:
        print(json.dumps(one(args.one)))
        return
    result = {}
    for which in args.only:
        modes = args.modes if which.startswith("ssgd") else [None]
        runs = [(f"now-{m}" if m else "now", ROOT, m) for m in modes]
        before = args.before_modes if which.startswith("ssgd") else []
        runs += [(f"before-{m}", args.other, m) for m in before] or \
            [("before", args.other, None)]
        times: dict[str, list[float]] = {name: [] for name, _, _ in runs}
        for r in range(args.rounds):
            k = r % len(runs)
            for name, tree, mode in runs[k:] + runs[:k]:
                times[name].append(next(iter(run_tree(tree, which, mode).values())))
        row = {name: {"runs": v, "median": statistics.median(v)} for name, v in times.items()}
        for name, _, mode in runs:
            if not name.startswith("before"):
                base = f"before-{mode}" if f"before-{mode}" in times else "before"
                row[name]["median_ratio_over_before"] = statistics.median(
                    a / b for a, b in zip(times[name], times[base]))
        result[which] = row
        print(which, json.dumps(row), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
