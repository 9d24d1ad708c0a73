"""A long SSGD run: is memory flat and is the last epoch as fast as the early ones?

Runs ``daskhpc.ssgd.fit`` on the bundled ml-latest-small ratings for many epochs
(default 2,000; K = 4, 2 workers) and samples, from the history callback every
``--every`` epochs, the RSS of the client process (the LocalCluster's scheduler runs
there too) and of every worker (``client.run`` of psutil). Prints a JSON report with the
samples, RSS at the checkpoints epochs (100, 1000, last), their ratios to epoch 100, and
the median epoch time around epoch 100 and around the last epoch. Public API only.

    python workflows/benchmarks/ssgd_long.py --epochs 2000 --out long.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time


def _rss(dask_worker=None) -> int:
    import psutil

    return psutil.Process().memory_info().rss


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epochs", type=int, default=2000)
    ap.add_argument("--parts", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--every", type=int, default=50, help="sample RSS every N epochs")
    ap.add_argument("--strategy", default="hc")
    ap.add_argument("--exchange", default=None, choices=(None, "direct", "graph"))
    ap.add_argument("--eval-every", type=int, default=1)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)

    import psutil

    import daskhpc as dh

    samples: list[dict] = []
    times: dict[int, float] = {}
    t0 = time.perf_counter()
    load0 = os.getloadavg()
    with dh.connect(n_workers=args.workers) as client:
        def callback(row):
            e = row["epoch"]
            times[e] = row["time_s"]
            if e % args.every == 0 or e == args.epochs - 1 or e in (99, 999):
                samples.append({"epoch": e, "t": time.perf_counter() - t0,
                                "client": psutil.Process().memory_info().rss,
                                "workers": sorted(client.run(_rss).values())})
                print(f"epoch {e}: client {samples[-1]['client'] / 2**20:.0f} MiB, workers "
                      f"{[round(w / 2**20) for w in samples[-1]['workers']]} MiB",
                      file=sys.stderr, flush=True)

        res = dh.ssgd.fit(dh.datasets.path("ratings"), args.parts, client=client,
                          epochs=args.epochs, strategy=args.strategy, progress=False,
                          exchange=args.exchange, eval_every=args.eval_every,
                          callback=callback)
    load1 = os.getloadavg()
    by_epoch = {s["epoch"]: s for s in samples}
    last = args.epochs - 1

    def at(e):
        s = by_epoch.get(e)
        return None if s is None else {"client_mib": s["client"] / 2**20,
                                       "workers_mib": [w / 2**20 for w in s["workers"]]}

    def median_time(e, half=25):
        got = [times[u] for u in range(max(0, e - half), min(last, e + half) + 1) if u in times]
        return statistics.median(got) if got else None

    ref = by_epoch.get(99)
    ratios = {}
    if ref is not None:
        for e in (999, last):
            s = by_epoch.get(e)
            if s is not None:
                ratios[e + 1] = {"client": s["client"] / ref["client"],
                                 "workers": [a / b for a, b in zip(s["workers"], ref["workers"])]}
    out = {"argv": sys.argv, "epochs": args.epochs, "parts": args.parts,
           "workers": args.workers, "cpus": os.cpu_count(), "load_start": load0,
           "load_end": load1, "run_s": time.perf_counter() - t0,
           "rss_epoch_100": at(99), "rss_epoch_1000": at(999), f"rss_epoch_{args.epochs}": at(last),
           "rss_ratio_to_epoch_100": ratios,
           "epoch_s_median_around_100": median_time(99),
           f"epoch_s_median_around_{args.epochs}": median_time(last, 50),
           "final_test_rmse": res.history[-1].get("test_rmse"), "samples": samples}
    text = json.dumps(out, indent=1)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    print(text)
    return out


if __name__ == "__main__":
    main()
