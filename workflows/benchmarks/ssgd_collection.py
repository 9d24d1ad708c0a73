"""SSGD from a file vs from a Dask collection: the client's peak RSS and the wall time.

Generates a power-law ratings table (``daskhpc.ssgd.power_law_ratings``, default 20M
ratings), writes it as one CSV file and as a directory of Parquet files (``--dir``, in
/tmp by default; nothing is committed), starts a cluster (``--workers`` processes; its
scheduler runs in this process), and then runs ``daskhpc.ssgd.fit`` twice, each in a
fresh CLIENT process that joins that cluster and samples its own RSS (psutil, a thread,
every 10 ms):

* ``file``: ``fit("ratings.csv", ...)`` (the client reads and parses the file);
* ``collection``: ``fit(dask.dataframe.read_parquet(DIR), ...)`` (the workers read it;
  only the ids reach the client).

Prints (and with ``--out`` writes) JSON: per run the client's RSS before ``fit`` and its
peak during it, the wall time of ``fit``, and whether W, H and the test RMSE history of
the two runs are equal (bit for bit). Public API only.

    python workflows/benchmarks/ssgd_collection.py --nnz 20000000 --out coll.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

CHILD = r"""
import json, sys, threading, time
import numpy as np, psutil
import daskhpc as dh

args = json.loads(sys.argv[1])
proc = psutil.Process()
peak = [0]
stop = threading.Event()

def sample():
    while not stop.is_set():
        peak[0] = max(peak[0], proc.memory_info().rss)
        time.sleep(0.01)

if __name__ == "__main__":
    client = dh.connect(args["address"])
    if args["mode"] == "collection":
        import dask.dataframe as dd
        data = dd.read_parquet(args["parquet"])
    else:
        data = args["csv"]
    before = proc.memory_info().rss
    t = threading.Thread(target=sample, daemon=True)
    t.start()
    t0 = time.perf_counter()
    res = dh.ssgd.fit(data, args["parts"], client=client, epochs=args["epochs"],
                      partition=args["partition"], rank=args["rank"], progress=False)
    wall = time.perf_counter() - t0
    stop.set()
    t.join()
    peak[0] = max(peak[0], proc.memory_info().rss)
    np.savez(args["save"], W=res.W, H=res.H,
             rmse=np.array([h.get("test_rmse", np.nan) for h in res.history]))
    q = res.report()["quality"]
    print(json.dumps({"rss_before_fit": before, "peak_rss": peak[0], "fit_s": wall,
                      "final_test_rmse": q.get("final_test_rmse"),
                      "final_objective": q.get("final_objective")}))
    client.close()
"""


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nnz", type=int, default=20_000_000)
    ap.add_argument("--dir", default="/tmp/daskhpc-ssgd-collection")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--parts", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--partition", default="random", choices=("random", "hp"))
    ap.add_argument("--files", type=int, default=16, help="Parquet files")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)

    import numpy as np

    import daskhpc as dh
    from daskhpc.ssgd import power_law_ratings, write_ratings_parquet

    os.makedirs(args.dir, exist_ok=True)
    csv = os.path.join(args.dir, f"ratings-{args.nnz}.csv")
    pq = os.path.join(args.dir, f"ratings-{args.nnz}.parquet")
    t0 = time.perf_counter()
    if not (os.path.exists(csv) and os.path.isdir(pq)):
        r = power_law_ratings(args.nnz, seed=0, path=csv)
        write_ratings_parquet(pq, r, files=args.files)
        del r
    gen_s = time.perf_counter() - t0
    out = {"nnz": args.nnz, "workers": args.workers, "parts": args.parts,
           "epochs": args.epochs, "rank": args.rank, "partition": args.partition,
           "csv_bytes": os.path.getsize(csv), "generate_s": round(gen_s, 1),
           "load_before": os.getloadavg(), "runs": {}}
    with dh.connect(n_workers=args.workers) as client:
        address = client.scheduler.address
        for mode in ("file", "collection"):
            spec = {"address": address, "mode": mode, "csv": csv, "parquet": pq,
                    "parts": args.parts, "epochs": args.epochs, "rank": args.rank,
                    "partition": args.partition,
                    "save": os.path.join(args.dir, f"result-{mode}.npz")}
            p = subprocess.run([sys.executable, "-c", CHILD, json.dumps(spec)],
                               capture_output=True, text=True)
            if p.returncode != 0:
                sys.stderr.write(p.stderr)
                raise SystemExit(f"the {mode} run failed")
            row = json.loads(p.stdout.strip().splitlines()[-1])
            out["runs"][mode] = row
            print(f"{mode}: peak RSS {row['peak_rss'] / 2**20:.0f} MiB (before fit "
                  f"{row['rss_before_fit'] / 2**20:.0f} MiB), fit {row['fit_s']:.1f} s",
                  file=sys.stderr, flush=True)
    a, b = (np.load(os.path.join(args.dir, f"result-{m}.npz")) for m in ("file", "collection"))
    out["equal"] = {k: bool(np.array_equal(a[k], b[k], equal_nan=True))
                    for k in ("W", "H", "rmse")}
    f, c = out["runs"]["file"], out["runs"]["collection"]
    out["peak_rss_ratio"] = c["peak_rss"] / f["peak_rss"]
    out["rss_growth_ratio"] = (c["peak_rss"] - c["rss_before_fit"]) / \
        max(1, f["peak_rss"] - f["rss_before_fit"])
    out["load_after"] = os.getloadavg()
    text = json.dumps(out, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)
    return out


if __name__ == "__main__":
    main()
