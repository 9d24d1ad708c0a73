"""One worker against the serial code, per iteration (issue 28 item 3), paired and alternating.

::

    OPENBLAS_NUM_THREADS=1 python workflows/benchmarks/one_worker.py --rounds 7 --out 1w.json

Each round runs, in turn (the order flips every round), a fit on a 1-worker LocalCluster
with one part (the default exchange) and the workflow's ``serial_fit`` in this process,
on the same data; a run's figure is the median of its iterations 1.. (iteration 0 pays
first touches). Per round the ratio 1 worker / serial is taken (pairing keeps it
meaningful when the machine's speed drifts); the medians over rounds are printed with the
1-minute load before and after.

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
    import daskhpc as dh

    if name.startswith("cpals"):
        X = dh.cpals.as_tensor(str(DATA / "tensors" / "mlsmall_user_movie_year.tns")) \
            if name == "cpals-mlsmall" else dh.datasets.tensor()

        def one():
            res = dh.cpals.fit(X, 16, 1, iters=args.iters, tol=0.0, client=client,
                               progress=False)
            return res, res.history

        def ser():
            return dh.cpals.serial_fit(X, 16, iters=args.iters, tol=0.0, seed=0).history
    else:
        g = dh.datasets.cora()

        def one():
            res = dh.gcn.fit(g, nparts=1, epochs=args.epochs, client=client, progress=False)
            return res, res.history

        def ser():
            return dh.gcn.serial_fit(g, epochs=args.epochs).history
    return one, ser


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", nargs="*", default=["cpals-mlsmall", "cpals-umls", "gcn-cora"])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--iters", type=int, default=40)
    p.add_argument("--epochs", type=int, default=100)
    p.add_argument("--out", default="one-worker.json")
    args = p.parse_args(argv)

    import dask.config

    from daskhpc.runtime import connect

    res: dict = {"machine": {"cpus": os.cpu_count()}, "load_start": os.getloadavg()[0]}
    with dask.config.set(QUIET), connect(n_workers=1, dashboard_address=":0") as client:
        for name in args.only:
            one, ser = contenders(name, client, args)
            fit, _ = one()                               # compile / cache, first touches
            ser()
            got = {"one_worker_s": [], "serial_s": [], "ratio": [], "load": []}
            for r in range(args.rounds):
                order = ("one", "serial") if r % 2 == 0 else ("serial", "one")
                t = {}
                for who in order:
                    t[who] = _median_after_first(one()[1] if who == "one" else ser())
                got["one_worker_s"].append(t["one"])
                got["serial_s"].append(t["serial"])
                got["ratio"].append(t["one"] / t["serial"])
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
