"""Sparse allreduce benchmark: per-stage overhead, the headline against Dask's dense sum,
and the ``auto`` choice against every fixed algorithm.

Run it alone on the machine (timings are sensitive to other load)::

    flock /tmp/daskhpc-bench.lock python workflows/benchmarks/allreduce.py --out ar.json

Sections (``--only`` picks some):

overhead   the floor at small N: one call of N = 1000 (density 1 %) in both exchange
           modes of the runtime, and a plain-Dask chain of pinned tasks passing a tiny array between workers; per
           round (a stage is one round of tasks)
headline   N = 10^7, density 0.1 %, P = 4 workers, float64, uniform model: Dask's dense
           sum of the same vectors (pinned tree reduce + broadcast, fresh dense vectors
           every round) side by side with our allreduce (inputs on the workers: each
           algorithm and auto, one call a run; calls pipelined as units, in both exchange
           modes of the runtime); median of --repeats
sweep      densities 1e-4 .. 0.5, P in {2, 4}, N = --sweep-n: every fixed algorithm and
           the auto choice (Table 3.1 with the alpha and beta calibrated on this cluster);
           auto's time over the best fixed time

SparCML (the thesis's C++/MPI library) is not a peer here: no copy of its source could
be fetched (see docs/benchmarks.md, "Allreduce").
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from operator import add

import numpy as np
from report_out import write_json

QUIET = {  # per-worker background work that competes for 2 cores (all on by default)
    "distributed.worker.profile.enabled": False,
    "distributed.admin.system-monitor.gil.enabled": False,
}


def _pair(idx, val):
    return idx, val


def _dense(pair, N):
    out = np.zeros(N)
    out[pair[0]] = pair[1]
    return out


def _same(x):
    return x


def _ping(x, *deps):
    return np.ones(16)


def connect(n, quiet):
    import dask
    import distributed  # noqa: F401 - its config defaults load before the set below

    import daskhpc as dh

    # (leaving dask.config.set drops the keys that were not there when it was entered)
    with dask.config.set(QUIET if quiet else {}):
        return dh.connect(n_workers=n)


def _wait_quiet(max_load, timeout=30.0):
    """Wait (at most ``timeout`` s) for a 1-minute load average below ``max_load``: the
    machine is shared, and a run timed during another job's burst says little."""
    deadline = time.monotonic() + timeout
    while max_load and os.getloadavg()[0] > max_load and time.monotonic() < deadline:
        time.sleep(2)


def sparse_inputs(client, N, P, density, seed):
    """Per rank an (idx, val) future on its worker (what a gradient task would return)."""
    from daskhpc.allreduce import uniform_vectors
    from daskhpc.runtime import worker_addresses

    ws = worker_addresses(client)
    vecs = uniform_vectors(N, P, density, seed=seed)
    futs = []
    for r, (i, v) in enumerate(vecs):
        w = [ws[r % len(ws)]]
        fi, fv = client.scatter([i, v], workers=w, hash=False)
        futs.append(client.submit(_pair, fi, fv, workers=w, pure=False))
    client.gather(futs)
    return futs, ws


def dense_sum_once(client, pairs, ws, N, tag):
    """Dask's dense sum of the same vectors: fresh dense arrays on the ranks' workers
    (not timed), then a pinned binary tree reduce and a broadcast to every worker."""
    from distributed import wait

    from daskhpc.runtime import TransferLedger, release_futures, submit_pinned

    P = len(pairs)
    dense = [client.submit(_dense, pairs[r], N, workers=[ws[r % len(ws)]], pure=False)
             for r in range(P)]
    wait(dense)
    tasks, where = {}, {}
    level, owners = list(dense), [ws[r % len(ws)] for r in range(P)]
    d = 0
    while len(level) > 1:              # the tree: pairs summed on the left one's worker
        nxt, nown = [], []
        for i in range(0, len(level), 2):
            if i + 1 == len(level):
                nxt.append(level[i])
                nown.append(owners[i])
                continue
            k = (f"dense-{tag}", d, i)
            tasks[k] = (add, level[i], level[i + 1])
            where[k] = owners[i]
            nxt.append(k)
            nown.append(owners[i])
        level, owners, d = nxt, nown, d + 1
    total = level[0]
    keys = [total]
    for w in ws[:P]:
        if w != owners[0]:
            k = (f"dense-{tag}", "bcast", w)
            tasks[k] = (_same, total)
            where[k] = w
            keys.append(k)
    with TransferLedger(client, settle=0.5) as led:
        t0 = time.perf_counter()
        out = submit_pinned(client, tasks, where, keys)
        wait(out)
        t = time.perf_counter() - t0
    release_futures(dense + out)
    return t, led.report()


def overhead(args, out):
    from distributed import wait

    import daskhpc.allreduce as ar
    from daskhpc.runtime import low_latency, submit_pinned, worker_addresses

    rows = []
    for P in (2, 4):
        client = connect(P, args.quiet)
        ws = worker_addresses(client)
        with low_latency(client):      # as the engines run
            for rep in range(2):       # plain Dask: a chain of L rounds, each a transfer
                L = 30
                tasks, where, prev = {}, {}, None
                for t in range(L):
                    k = ("ping", rep, t)
                    tasks[k] = (_ping, np.ones(16)) if prev is None else (_ping, None, prev)
                    where[k] = ws[t % 2]
                    prev = k
                t0 = time.perf_counter()
                wait(submit_pinned(client, tasks, where, [prev]))
                rt = (time.perf_counter() - t0) / L
            rows.append({"P": P, "what": "plain Dask chain, one transfer per round",
                         "per_round_ms": 1e3 * rt})
        for exch in ("direct", "graph"):
            r = ar.allreduce(ar.uniform_vectors(1000, P, 0.01, seed=0), "ssar_rec_dbl",
                             N=1000, client=client, repeat=args.repeats + 1, exchange=exch)
            ts = [h["time_s"] for h in r.history][1:]
            S = r.report()["plan"]["phases"]
            rounds = S + 1
            name = f"{exch} exchange, pipelined calls"
            rows.append({"P": P, "what": f"{name}, N = 1000 call, ssar_rec_dbl",
                         "stages": S, "rounds_per_call": rounds,
                         "call_ms": 1e3 * float(np.median(ts)),
                         "call_ms_min": 1e3 * float(np.min(ts)),
                         "per_round_ms": 1e3 * float(np.median(ts)) / rounds})
        client.close()
    out["overhead"] = rows
    for r in rows:
        print(json.dumps(r))


def headline(args, out):
    import daskhpc.allreduce as ar

    N, P, d = args.n, 4, args.density
    client = connect(P, args.quiet)
    pairs, ws = sparse_inputs(client, N, P, d, seed=0)
    res = {"N": N, "P": P, "density": d, "workers": P, "repeats": args.repeats}
    dense_t, dense_b = [], None
    algos = ("auto", "ssar_rec_dbl", "ssar_split_allgather", "dsar_split_allgather")
    runs, reps = {a: [] for a in algos}, {}
    for rep in range(args.repeats + 1):      # rounds: the dense sum, then each algorithm
        _wait_quiet(args.max_load)
        t, b = dense_sum_once(client, pairs, ws, N, rep)
        if rep:                                          # round 0 warms up
            dense_t.append(t)
            dense_b = b
        for algo in algos:
            _wait_quiet(args.max_load)
            r = ar.allreduce(pairs, algo, N=N, client=client)
            if rep:
                runs[algo].append(r.history[0]["time_s"])
            reps[algo] = r.report()
    res["dask_dense_sum"] = {"median_s": float(np.median(dense_t)), "times_s": dense_t,
                             "min_s": float(np.min(dense_t)), **dense_b}
    ours = {}
    for algo in algos:
        ts, rep = runs[algo], reps[algo]
        ours[f"direct {algo}"] = {
            "algorithm": rep["algorithm"], "median_s": float(np.median(ts)), "times_s": ts,
            "min_s": float(np.min(ts)),
            "inter_worker_bytes": rep["measured"]["inter_worker_bytes"],
            "planned_bytes": rep["measured"]["planned_bytes"],
            "speedup_vs_dask_dense": float(np.median(dense_t) / np.median(ts))}
    vecs = ar.uniform_vectors(N, P, d, seed=0)
    for exch in ("direct", "graph"):
        _wait_quiet(args.max_load)
        r = ar.allreduce(vecs, "auto", N=N, client=client, repeat=args.repeats + 5, exchange=exch)
        ts = [h["time_s"] for h in r.history][1:]
        ours[f"program auto ({exch} exchange, pipelined calls)"] = {
            "algorithm": r.report()["algorithm"], "median_s": float(np.median(ts)),
            "min_s": float(np.min(ts)), "times_s": ts,
            "speedup_vs_dask_dense": float(np.median(dense_t) / np.median(ts)),
            "inter_worker_bytes_per_call": r.report()["measured"]["inter_worker_bytes"] /
            len(r.history)}
    res["ours"] = ours
    res["load"] = os.getloadavg()[0]
    out["headline"] = res
    print(json.dumps(res, indent=1))
    client.close()


def sweep(args, out):
    import daskhpc.allreduce as ar
    from daskhpc.runtime import calibrate, release_futures

    rows = []
    N = args.sweep_n
    for P in (2, 4):
        client = connect(P, args.quiet)
        cal = calibrate(client)
        alpha, beta = cal["alpha"], cal["beta"]
        for d in (1e-4, 1e-3, 1e-2, 0.1, 0.5):
            pairs, _ = sparse_inputs(client, N, P, d, seed=1)
            runs = {a: [] for a in sorted(ar.ALGORITHMS)}
            for rep in range(args.sweep_repeats + 1):      # rounds over the algorithms:
                for algo in runs:                           # a burst of load hits all
                    _wait_quiet(args.max_load)
                    r = ar.allreduce(pairs, algo, N=N, client=client)
                    if rep:                                 # round 0 warms up
                        runs[algo].append(r.history[0]["time_s"])
            times = {a: float(np.median(ts)) for a, ts in runs.items()}
            mins = {a: float(np.min(ts)) for a, ts in runs.items()}
            choice = ar.plan(ar.uniform_vectors(N, P, d, seed=1), N=N, alpha=alpha,
                             beta=beta)["choice"]
            a = choice["algorithm"]
            best, best_min = min(times, key=times.get), min(mins, key=mins.get)
            row = {"P": P, "N": N, "density": d, "alpha": alpha, "beta": beta,
                   "auto": a, "best": best, "best_by_min": best_min, "times_s": times,
                   "min_times_s": mins, "auto_over_best": times[a] / times[best],
                   "auto_over_best_min": mins[a] / mins[best_min],
                   "predicted_s": choice["candidates"], "load": os.getloadavg()[0]}
            rows.append(row)
            print(json.dumps({k: row[k] for k in ("P", "density", "auto", "best",
                                                  "auto_over_best", "best_by_min",
                                                  "auto_over_best_min", "load")}))
            release_futures(pairs)
        client.close()
    out["sweep"] = rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="-")
    p.add_argument("--only", nargs="*", default=["overhead", "headline", "sweep"])
    p.add_argument("--n", type=int, default=10_000_000)
    p.add_argument("--density", type=float, default=1e-3)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--sweep-n", type=int, default=10_000_000)
    p.add_argument("--sweep-repeats", type=int, default=5)
    p.add_argument("--quiet", action="store_true", help="turn off per-worker profiling")
    p.add_argument("--max-load", type=float, default=None,
                   help="before each timed call, wait (up to 30 s) for a 1-minute load "
                        "average below this")
    args = p.parse_args(argv)
    out = {"argv": sys.argv, "load_before": os.getloadavg()}
    t0 = time.perf_counter()
    for name in args.only:
        globals()[name](args, out)
    out["load_after"], out["wall_s"] = os.getloadavg(), time.perf_counter() - t0
    write_json(out, args.out)


if __name__ == "__main__":
    main()
