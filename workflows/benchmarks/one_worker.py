"""One worker against the serial code, per iteration, paired and alternating.

::

    OPENBLAS_NUM_THREADS=1 python workflows/benchmarks/one_worker.py --rounds 7 --out 1w.json

Each round runs, in turn (the order flips every round), a fit on a 1-worker LocalCluster
with one part (the default exchange) and the workflow's ``serial_fit`` in this process,
on the same data, each with ``n`` and ``2 n`` iterations. Two figures per contender:

wall   the median of the longer run's iterations 1.. (iteration 0 pays first touches);
cpu    the marginal CPU seconds of an iteration: (CPU of the 2n run - CPU of the n run) / n,
       the worker process's for the cluster (``client.run(time.process_time)``: its
       event loop and heartbeats included), this process's for ``serial_fit``; fixed costs
       (set-up, init, gather) cancel. On a loaded shared machine this is the steadier one.

Per round the ratios 1 worker / serial are taken (pairing keeps them meaningful when the
machine's speed drifts); medians over rounds are printed with the 1-minute load.

cpals-mlsmall   CP-ALS, R = 16, ml-latest-small user x movie x year (the shared data's
                ``tensors/mlsmall_user_movie_year.tns``), ``--iters`` iterations, tol 0
cpals-umls      CP-ALS, R = 16, the bundled UMLS tensor
gcn-cora        GCN on the bundled Cora, ``--epochs`` epochs (the textbook ``serial_fit``
                is the serial figure)

Only the public API is used.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("DASKHPC_SHARED_DATA", ROOT.parent / "shared" / "data"))
QUIET = {"distributed.worker.profile.enabled": False,
         "distributed.admin.system-monitor.gil.enabled": False}


def _median_after_first(history) -> float:
    return statistics.median(h["time_s"] for h in history[1:])


def contenders(name: str, client, args):
    """``(one(n), serial(n))``: each runs n iterations (epochs) and returns its history
    and the CPU seconds it cost (the worker's, or this process's)."""
    import daskhpc as dh

    def worker_cpu() -> float:
        return sum(client.run(time.process_time).values())

    if name.startswith("cpals"):
        X = dh.cpals.as_tensor(str(DATA / "tensors" / "mlsmall_user_movie_year.tns")) \
            if name == "cpals-mlsmall" else dh.datasets.tensor()

        def fit(n):
            return dh.cpals.fit(X, 16, 1, iters=n, tol=0.0, client=client, progress=False)

        def serial(n):
            return dh.cpals.serial_fit(X, 16, iters=n, tol=0.0, seed=0)
    else:
        g = dh.datasets.cora()

        def fit(n):
            return dh.gcn.fit(g, nparts=1, epochs=n, client=client, progress=False)

        def serial(n):
            return dh.gcn.serial_fit(g, epochs=n)

    def one(n):
        c0 = worker_cpu()
        res = fit(n)
        return res, res.history, worker_cpu() - c0

    def ser(n):
        c0 = time.process_time()
        res = serial(n)
        return res, res.history, time.process_time() - c0
    return one, ser


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", nargs="*", default=["cpals-mlsmall", "cpals-umls", "gcn-cora"])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--iters", type=int, default=40, help="CP-ALS iterations n")
    p.add_argument("--epochs", type=int, default=100, help="GCN epochs n")
    p.add_argument("--out", default="one-worker.json")
    args = p.parse_args(argv)

    import dask.config

    from daskhpc.runtime import connect

    res: dict = {"machine": {"cpus": os.cpu_count()}, "load_start": os.getloadavg()[0]}
    with dask.config.set(QUIET), connect(n_workers=1, dashboard_address=":0") as client:
        for name in args.only:
            one, ser = contenders(name, client, args)
            n = args.epochs if name.startswith("gcn") else args.iters
            fit = one(2)[0]                              # compile / cache, first touches
            ser(2)
            got: dict = {k: [] for k in ("one_worker_s", "serial_s", "ratio",
                                         "one_worker_cpu_s", "serial_cpu_s", "cpu_ratio",
                                         "load")}
            for r in range(args.rounds):
                order = (one, ser) if r % 2 == 0 else (ser, one)
                t = {}
                for who in order:
                    _, _, c1 = who(n)
                    _, hist, c2 = who(2 * n)
                    t[who] = (_median_after_first(hist), (c2 - c1) / n)
                got["one_worker_s"].append(t[one][0])
                got["serial_s"].append(t[ser][0])
                got["ratio"].append(t[one][0] / t[ser][0])
                got["one_worker_cpu_s"].append(t[one][1])
                got["serial_cpu_s"].append(t[ser][1])
                got["cpu_ratio"].append(t[one][1] / t[ser][1])
                got["load"].append(os.getloadavg()[0])
                print(name, r, {k: round(v[-1], 6) for k, v in got.items()}, flush=True)
            out = {k: statistics.median(v) for k, v in got.items()}
            out["rounds"] = got
            out["execution"] = fit.report().get("execution")
            res[name] = out
            print(name, json.dumps({k: v for k, v in out.items() if k != "rounds"}),
                  flush=True)
    res["load_end"] = os.getloadavg()[0]
    res["at"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    Path(args.out).write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
