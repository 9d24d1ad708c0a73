"""Peak RSS of the client and of every worker, one workflow on one input of paper_inputs.py.

For each ``--source`` (``file``: the path the CLI reads, parsed by the client;
``collection``: the Parquet directory as a ``dask.dataframe``, read by the workers), it
starts a cluster of ``--workers`` processes (scheduler in this process), then runs the
workflow in a fresh CLIENT process that samples its own RSS (psutil, every 10 ms) while
every worker samples its own the same way. Printed (with ``--out``, written instead) as JSON:
per source the client's RSS before the call and its peak during it, each worker's RSS
before and its peak, the wall time, and the ratios the targets name (client growth over
the raw input, each worker's peak growth over its share of it).

Workflows: ``ssgd`` (ratings, ``fit(..., partition="random")``), ``cpals`` (tensor,
``fit(..., partition="random")``), ``gcn`` (graph: the Planetoid ``graph.npz``, or the
``edges.parquet`` edge list with ``features.npy`` as a Dask Array read on the workers;
``partition="random"``) and ``spgemm`` (matrix: A·A of ``matrix.mtx`` or
``matrix.parquet``, ``consume="count"``: C is counted, not kept, so the figure is the
product's working memory, not its output). Before a run, ``MemAvailable`` is checked against a
guess of what it needs (8x the raw input on the client, 4x a share on each worker) and
the script stops with one line when it would not fit.

    python workflows/benchmarks/paper_inputs.py --scale 0.1 --dir /tmp/paper-0.1 ratings
    nice -n 10 python workflows/benchmarks/paper_memory.py ssgd --dir /tmp/paper-0.1
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from paper_inputs import mem_available     # the scripts beside this one
from report_out import write_json

CHILD = r"""
import json, sys, threading, time
import psutil
import daskhpc as dh

args = json.loads(sys.argv[1])
proc = psutil.Process()
peak, stop = [0], threading.Event()

def sample():
    while not stop.is_set():
        peak[0] = max(peak[0], proc.memory_info().rss)
        time.sleep(0.01)

def worker_start(dask_worker):
    import threading, time, psutil
    p = psutil.Process()
    box = {"before": p.memory_info().rss, "peak": 0, "stop": threading.Event()}
    def loop():
        while not box["stop"].is_set():
            box["peak"] = max(box["peak"], p.memory_info().rss)
            time.sleep(0.01)
    threading.Thread(target=loop, daemon=True).start()
    dask_worker._paper_rss = box

def worker_end(dask_worker):
    box = dask_worker._paper_rss
    box["stop"].set()
    return {"before": box["before"], "peak": box["peak"]}

if __name__ == "__main__":
    client = dh.connect(args["address"])
    features = labels = split = None
    if args["source"] == "collection":
        import dask.dataframe as dd
        data = dd.read_parquet(args["parquet"])
        if args["workflow"] == "gcn":
            import dask.array as da
            import numpy as np
            base = args["parquet"].rsplit("/", 1)[0]
            shape = np.load(base + "/features.npy", mmap_mode="r").shape
            def rows(block_info=None, path=base + "/features.npy"):
                (a, b), _ = block_info[None]["array-location"]
                return np.array(np.load(path, mmap_mode="r")[a:b])
            features = da.map_blocks(rows, dtype=np.float32,
                                     chunks=da.core.normalize_chunks((65536, -1), shape))
            with np.load(base + "/graph.npz") as z:     # the npz's arrays load one by one
                labels = z["labels"]
                split = (z["idx_train"], z["idx_val"], z["idx_test"])
    else:
        data = args["file"]
    client.run(worker_start)
    before = proc.memory_info().rss
    t = threading.Thread(target=sample, daemon=True)
    t.start()
    t0 = time.perf_counter()
    if args["workflow"] == "ssgd":
        res = dh.ssgd.fit(data, args["parts"], client=client, epochs=args["iters"],
                          partition="random", progress=False)
    elif args["workflow"] == "gcn":
        res = dh.gcn.fit(data, features, labels, split,
                         args["parts"], client=client, epochs=args["iters"],
                         partition="random")
    elif args["workflow"] == "spgemm":
        res = dh.spgemm.multiply(data, client=client, consume="count",
                                 memory_per_worker=args["budget"])
    else:
        res = dh.cpals.fit(data, 16, args["parts"], client=client, iters=args["iters"],
                           tol=0.0, partition="random")
    wall = time.perf_counter() - t0
    stop.set()
    t.join()
    workers = client.run(worker_end)
    print(json.dumps({"client_before": before, "client_peak": max(peak[0], before),
                      "workers": workers, "seconds": wall}))
    client.close()
"""

INPUT = {"ssgd": ("ratings", "ratings.csv", "ratings.parquet"),
         "cpals": ("tensor", "tensor.tns", "tensor.parquet"),
         "gcn": ("graph", "graph.npz", "edges.parquet"),
         "spgemm": ("matrix", "matrix.mtx", "matrix.parquet")}



def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("workflow", choices=sorted(INPUT))
    ap.add_argument("--dir", required=True, help="what paper_inputs.py wrote")
    ap.add_argument("--sources", nargs="+", default=["file", "collection"],
                    choices=["file", "collection"])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--iters", type=int, default=2, help="epochs / iterations")
    ap.add_argument("--memory-per-worker", default=None,
                    help="spgemm: the budget M/W (e.g. 1GB): batches keep a worker under it")
    ap.add_argument("--out", default=None, help="write the JSON here (default: stdout)")
    args = ap.parse_args(argv)

    import daskhpc as dh

    with open(os.path.join(args.dir, "inputs.json")) as f:
        made = json.load(f)["inputs"]
    name, file, pq = INPUT[args.workflow]
    if name not in made:
        raise SystemExit(f"{args.dir}: no {name} (run paper_inputs.py {name} first)")
    raw = made[name]["raw_bytes"]
    need = 8 * raw + 4 * raw          # the client's guess, and 4x a share on each worker
    if need > mem_available():
        raise SystemExit(f"{args.workflow}: needs about {need / 2**30:.1f} GiB, MemAvailable "
                         f"is {mem_available() / 2**30:.1f} GiB; not started")
    out = {"workflow": args.workflow, "input": made[name], "runs": {}}
    for source in args.sources:
        with dh.connect(n_workers=args.workers) as client:
            spec = {"address": client.scheduler.address, "source": source,
                    "workflow": args.workflow, "file": os.path.join(args.dir, file),
                    "parquet": os.path.join(args.dir, pq), "parts": args.workers,
                    "iters": args.iters, "budget": args.memory_per_worker}
            p = subprocess.run([sys.executable, "-c", CHILD, json.dumps(spec)],
                               capture_output=True, text=True)
        if p.returncode != 0:
            sys.stderr.write(p.stderr[-4000:])
            raise SystemExit(f"the {source} run failed")
        row = json.loads(p.stdout.strip().splitlines()[-1])
        share = raw / args.workers
        row["client_growth_over_raw"] = (row["client_peak"] - row["client_before"]) / raw
        row["worker_peak_over_share"] = {w: (v["peak"] - v["before"]) / share
                                         for w, v in row["workers"].items()}
        out["runs"][source] = row
        print(f"{source}: client {row['client_before'] / 2**20:.0f} -> "
              f"{row['client_peak'] / 2**20:.0f} MiB ({row['client_growth_over_raw']:.2f}x "
              f"raw), workers' peaks "
              f"{[round(v['peak'] / 2**20) for v in row['workers'].values()]} MiB, "
              f"{row['seconds']:.1f} s", file=sys.stderr, flush=True)
    write_json(out, args.out or "-")
    return out


if __name__ == "__main__":
    main()
