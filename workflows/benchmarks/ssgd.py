"""SSGD benchmark: kernel speed, epoch plans, distributed epochs, the 10M-rating plan.

Run it alone on the machine (timings are sensitive to other load)::

    flock /tmp/daskhpc-bench.lock python workflows/benchmarks/ssgd.py --out ssgd-bench.json

Sections (``--only`` picks some):

kernel     serial SGD updates per second (F = 16 and 64), ml-latest-small
plans      section VI metrics on ml-latest-small, K = 2, 4, 8, random vs hypergraph rows
epochs     distributed epochs on ml-latest-small: DSGD, P2P, H&C for K = 2, 4, 8
           (at most 4 worker processes, one thread each; K = 8 puts two parts per
           worker), random vs hypergraph rows; median epoch time, measured bytes vs plan
synthetic  the seeded 10M-rating power-law matrix: `daskhpc plan`-equivalent time at
           K = 1024, and distributed epochs for K = 2, 4, 8
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

QUIET = {  # per-worker background work that competes for 2 cores (all on by default)
    "distributed.worker.profile.enabled": False,
    "distributed.admin.system-monitor.gil.enabled": False,
    "distributed.admin.system-monitor.interval": "1s",
    "distributed.admin.tick.interval": "1s",
}


def kernel(rows, cols, vals, F, repeats=15):
    from daskhpc.ssgd import sgd_block

    rng = np.random.default_rng(0)
    W = rng.uniform(0.0, 0.4, (rows.max() + 1, F))
    H = rng.uniform(0.0, 0.4, (cols.max() + 1, F))
    sgd_block(W, H, rows, cols, vals, 0.01, 0.05, np.uint64(0))   # compile/load
    ts = []
    for e in range(repeats):
        t0 = time.perf_counter()
        sgd_block(W, H, rows, cols, vals, 0.01, 0.05, np.uint64(e + 1))
        ts.append(time.perf_counter() - t0)
    return {"F": F, "updates": int(vals.size), "median_s": float(np.median(ts)),
            "updates_per_s": float(vals.size / np.median(ts))}


def plans(data, Ks=(2, 4, 8)):
    """Per (K, rows) one partition (``prepare``), written as a pair file that the plan of
    every strategy reads: the three strategies see the same rows and blocks."""
    import tempfile

    from daskhpc.hypergraph import write_pair_file
    from daskhpc.ssgd import plan, prepare

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for K in Ks:
            for part in ("random", "hp"):
                s = prepare(data, K, partition=part, test_fraction=0.0, epochs=1)
                pair = os.path.join(tmp, f"k{K}-{part}.part")
                write_pair_file(pair, s.assignment.row_parts, s.assignment.col_blocks)
                for st in ("dsgd", "p2p", "hc"):
                    r = plan(data, K, strategy=st, partition_file=pair, test_fraction=0.0,
                             epochs=1, rank=16)["plan"]
                    out.append({"K": K, "rows": part, "strategy": st, **{
                        k: r[k] for k in ("tot_vol", "sum_max_vol", "max_max_vol", "tot_msgs",
                                          "max_msgs", "sum_max_msgs", "max_max_msgs")}})
    return out


def epochs(data, Ks, strategies, parts, n_epochs, quiet, label, test_fraction=0.0,
           plugins=(False, True), worker_counts=None):
    """Median epoch time and bytes for every (K, workers, rows, strategy, plugin)."""
    out = []
    for K in Ks:
        for nw in (worker_counts or {}).get(K, [min(K, 4)]):
            out += _epochs_on(data, K, nw, strategies, parts, n_epochs, quiet, label,
                              test_fraction, plugins)
    return out


def _epochs_on(data, K, nw, strategies, parts, n_epochs, quiet, label, test_fraction,
               plugins):
    import dask

    from daskhpc.runtime import connect
    from daskhpc.ssgd import fit

    out = []
    cfg = QUIET if quiet else {}
    with dask.config.set(cfg), connect(n_workers=nw, dashboard_address=":0",
                                       config=cfg) as client:
        for part in parts:
            for st in strategies:
                for plugin in plugins:
                    res = fit(data, K, client=client, strategy=st, partition=part,
                              epochs=n_epochs, test_fraction=test_fraction, eval_every=0,
                              order_plugin=plugin)
                    rep = res.report()
                    ts = res.epoch_times[1:] or res.epoch_times
                    m = rep["measured"]
                    row = {"data": label, "K": K, "workers": nw, "rows": part,
                           "strategy": st, "plugin": plugin, "epochs": n_epochs,
                           "median_epoch_ms": 1000 * float(np.median(ts)),
                           "min_epoch_ms": 1000 * float(np.min(ts)),
                           "run_s": rep["timing"]["run_s"],
                           "planned_bytes": m["planned_bytes"],
                           "measured_bytes": m["inter_worker_bytes"],
                           "measured_payload": m["inter_worker_bytes_sizeof"],
                           "messages": m["inter_worker_messages"],
                           "framing_per_msg": m.get("framing_bytes_per_message")}
                    print(json.dumps(row), flush=True)
                    out.append(row)
    return out


def synthetic(nnz, Ks, n_epochs, quiet, path="/tmp/ssgd-powerlaw.csv"):
    from daskhpc.ssgd import plan, power_law_ratings, write_ratings_csv

    t0 = time.perf_counter()
    r = power_law_ratings(nnz, seed=0)
    gen = time.perf_counter() - t0
    if not os.path.exists(path):
        write_ratings_csv(path, r)
    res = {"nnz": nnz, "shape": list(r.shape), "generate_s": gen, "plans": []}
    for st in ("hc", "p2p", "dsgd"):
        t0 = time.perf_counter()
        rep = plan(path, 1024, strategy=st, partition="random")
        total = time.perf_counter() - t0
        row = {"K": 1024, "strategy": st, "rows": "random", "total_s": total,
               **rep["timing"], **{k: rep["plan"][k] for k in (
                   "tot_vol", "tot_msgs", "max_msgs", "sum_max_msgs", "max_max_msgs")}}
        print(json.dumps(row), flush=True)
        res["plans"].append(row)
    if Ks:
        res["epochs"] = epochs(r, Ks, ("dsgd", "p2p", "hc"), ("random",), n_epochs, quiet,
                               f"powerlaw-{nnz}", plugins=(True,))
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=["kernel", "plans", "epochs", "synthetic"])
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--ks", type=int, nargs="*", default=[2, 4, 8])
    ap.add_argument("--synthetic-nnz", type=int, default=10_000_000)
    ap.add_argument("--synthetic-ks", type=int, nargs="*", default=[2, 4, 8])
    ap.add_argument("--synthetic-epochs", type=int, default=3)
    ap.add_argument("--plugin", choices=("on", "off", "both"), default="both",
                    help="runs with the stratum-order plugin, without, or both")
    ap.add_argument("--loud", action="store_true",
                    help="keep the workers' profiler and GIL monitor on (Dask defaults)")
    ap.add_argument("--out", default="ssgd-bench.json")
    a = ap.parse_args(argv)
    from daskhpc import datasets

    data = datasets.ratings()
    out = {"machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]}}
    if "kernel" in a.only:
        m = data.meta
        out["kernel"] = [kernel(m["rows"], m["cols"], m["vals"], F) for F in (16, 64)]
        print(json.dumps(out["kernel"]), flush=True)
    if "plans" in a.only:
        out["plans"] = plans(data, tuple(a.ks))
    if "epochs" in a.only:
        # K = 4 twice: one part per worker (4 processes) and two (2 processes).
        plugins = {"on": (True,), "off": (False,), "both": (False, True)}[a.plugin]
        out["epochs"] = epochs(data, a.ks, ("dsgd", "p2p", "hc"), ("random", "hp"),
                               a.epochs, not a.loud, "ml-latest-small",
                               worker_counts={4: [4, 2], 2: [2], 8: [4]}, plugins=plugins)
    if "synthetic" in a.only:
        out["synthetic"] = synthetic(a.synthetic_nnz, a.synthetic_ks, a.synthetic_epochs,
                                     not a.loud)
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
