"""CP-ALS benchmark: serial speed against SPLATT and tensorly, plans, the 10M-nonzero plan.

Run it alone on the machine (timings are sensitive to other load)::

    OPENBLAS_NUM_THREADS=1 flock /tmp/daskhpc-bench.lock \
        .venv/bin/python workflows/benchmarks/cpals.py --out cpals-bench.json

Sections (``--only`` picks some):

serial     mlsmall_user_movie_year.tns at R = 16, 20 iterations, tol 0: seconds per
           iteration of ``daskhpc.cpals`` serial (one thread) against SPLATT's
           ``splatt cpd`` (1 and 2 OpenMP threads, one MPI rank) and tensorly's dense
           ``parafac``, measured side by side: every round runs each contender once, in
           turn (rotating the order); a round's number is the mean over its iterations
           (SPLATT: its CPD time / iterations), medians and minima are over rounds.
plans      per-iteration volume and messages on the real tensors, K = 2 .. 32, the four
           partitions (coarse-hp, coarse-block, fine-hp, fine-random)
synthetic  the seeded 10M-nonzero power-law tensor: generation time and the
           ``daskhpc plan cpals --parts 1024`` equivalent (prepare + report) per partition
distributed
           the seeded power-law tensor (``--nnz``, 10M) at R = ``--rank``, side by side in
           rounds (rotating order): our serial (one thread), our program on a 2-worker
           LocalCluster (K = 2, each of ``--methods``; the frame's ``run_job`` on a setup
           prepared once, all iterations submitted at once), SPLATT ``cpd`` with 1 and 2
           MPI ranks (one thread each). Per iteration: the median over iterations 1.. of
           each run (iteration 0 also pays first touches), medians and minima over rounds.
           Where the time goes (every part times its own steps and reports it with the
           fit): the busier worker's compute per iteration, and the rest of the wall time
           per step (Dask's round trips, transfers, waiting for the other worker); and the
           stop rule's cost (one iteration per submission).
versus     mlsmall at R = 16: our 2 workers (K = 2, coarse-hp and fine-hp, direct
           exchange) against SPLATT with 1 and 2 OpenMP threads, side by side in rounds
           (rotating order; ``--iters`` iterations per run), per-iteration medians and the
           ratio to SPLATT 2 threads paired per round
latency    mlsmall at R = 16 (short steps): per-iteration time on 2 workers at K = 2,
           both exchange modes (direct: messages pushed, one task per worker and
           iteration; graph: one task group per worker and step), every iteration
           submitted at once or with the stop rule (one iteration per submission), steps in
           the workers' event loops or their threads; and our serial on the same tensor

Peers live outside the project (never a dependency): SPLATT built from its public
repository under /work/peers/splatt (``--splatt``; docs/benchmarks.md, "Peers"),
tensorly in the shared benchmark venv /work/bench-venv (``--peer-python``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data" / "tensors"
MLSMALL = DATA / "mlsmall_user_movie_year.tns"

TENSORLY = r"""
import sys, time, numpy as np, tensorly as tl
from tensorly.decomposition import parafac
path, rank, iters = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
t = np.loadtxt(path)
idx = t[:, :-1].astype(np.int64) - 1
D = np.zeros(tuple(idx.max(axis=0) + 1))
D[tuple(idx.T)] = t[:, -1]
stamps = []
parafac(tl.tensor(D), rank, n_iter_max=iters, init="random", tol=1e-300, random_state=0,
        callback=lambda cp, err: stamps.append(time.perf_counter()))
print(" ".join(f"{b - a:.6f}" for a, b in zip(stamps, stamps[1:])))
"""


def ours(rank: int, iters: int) -> list[float]:
    from daskhpc.cpals import as_tensor, serial_fit

    X = as_tensor(str(MLSMALL))
    return [h["time_s"] for h in serial_fit(X, rank, iters=iters, tol=0.0, seed=0).history]


def splatt(binary: str, rank: int, iters: int, threads: int, ranks: int = 1) -> list[float]:
    cmd = [binary, "cpd", str(MLSMALL), "-r", str(rank), "-i", str(iters), "--tol", "0",
           "-t", str(threads), "--nowrite", "-v", "--seed", "1"]
    if ranks > 1:
        cmd = ["mpiexec", "-n", str(ranks)] + cmd
    # passive waiting: on a shared 2-core machine spinning OpenMP threads collapse
    # (measured: 240 ms instead of 4 ms per iteration with 2 threads and one busy core)
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": "1",
           "OMP_WAIT_POLICY": "PASSIVE"}
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
    # its = k (0.003s) has millisecond resolution; the CPD total over the run is finer
    total = float(re.search(r"CPD\s+([0-9.]+)s", out).group(1))
    its = len(re.findall(r"its =\s*\d+ \(", out))
    return [total / its] * its


def tensorly(python: str, rank: int, iters: int) -> list[float]:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    out = subprocess.run([python, "-c", TENSORLY, str(MLSMALL), str(rank), str(iters)],
                         capture_output=True, text=True, env=env, check=True).stdout
    return [float(x) for x in out.split()]


def serial(args) -> dict:
    ours(args.rank, 2)                                    # numba compile / cache load
    contenders = {"daskhpc serial": lambda: ours(args.rank, args.iters)}
    if Path(args.splatt).exists():
        contenders["SPLATT 1 thread"] = lambda: splatt(args.splatt, args.rank, args.iters, 1)
        contenders["SPLATT 2 threads"] = lambda: splatt(args.splatt, args.rank, args.iters, 2)
    runs: dict = {k: [] for k in contenders}
    tl_runs = []
    for r in range(args.rounds):
        names = list(contenders)
        for name in names[r % len(names):] + names[:r % len(names)]:   # rotate the order
            runs[name].append(float(np.mean(contenders[name]())))
        if Path(args.peer_python).exists() and r < args.tensorly_rounds:
            tl_runs.append(float(np.mean(tensorly(args.peer_python, args.rank, 4))))
    out = {name: {"median_s": float(np.median(v)), "min_s": float(np.min(v)), "rounds": v}
           for name, v in runs.items()}
    if tl_runs:
        out["tensorly dense"] = {"median_s": float(np.median(tl_runs)),
                                 "min_s": float(np.min(tl_runs)), "rounds": tl_runs}
    base = out["daskhpc serial"]["median_s"]
    for v in out.values():
        v["vs_daskhpc"] = v["median_s"] / base
    return {"rank": args.rank, "iters": args.iters, "per_iteration": out}


def plans(args) -> list[dict]:
    from daskhpc.cpals import plan

    rows = []
    for name in ("umls_head_rel_tail", "mlsmall_user_movie_year"):
        for K in (2, 4, 8, 16, 32):
            for grain, part in (("coarse", "hp"), ("coarse", "block"), ("fine", "hp"),
                                ("fine", "random")):
                t0 = time.perf_counter()
                r = plan(str(DATA / f"{name}.tns"), K, grain=grain, partition=part, rank=10)
                rows.append({"tensor": name, "K": K, "method": f"{grain}-{part}",
                             "tot_vol": r["plan"]["tot_vol"], "max_msgs": r["plan"]["max_msgs"],
                             "sum_max_vol": r["plan"]["sum_max_vol"],
                             "imbalance": r["partition"]["imbalance"],
                             "seconds": round(time.perf_counter() - t0, 2)})
                print(rows[-1], flush=True)
    return rows


def synthetic(args) -> dict:
    from daskhpc.cpals import plan, power_law_tensor

    t0 = time.perf_counter()
    X = power_law_tensor(args.nnz)
    out = {"nnz": args.nnz, "shape": list(X.shape), "generate_s": time.perf_counter() - t0,
           "plans": []}
    for grain, part in (("fine", "hp"), ("fine", "random"), ("coarse", "hp"),
                        ("coarse", "block")):
        t0 = time.perf_counter()
        rep = plan(X, args.parts, grain=grain, partition=part, rank=10)   # prepare + report
        row = {"method": f"{grain}-{part}", "K": args.parts,
               "seconds": time.perf_counter() - t0,
               "partition_s": rep["timing"]["partition_s"],
               "plan_s": rep["timing"]["plan_s"], "tot_vol": rep["plan"]["tot_vol"],
               "max_msgs": rep["plan"]["max_msgs"], "imbalance": rep["partition"]["imbalance"],
               "partitioner": rep["partitioner"]}
        out["plans"].append(row)
        print(row, flush=True)
    return out


def _cluster_run(client, s, *, tol=None, in_loop=None, exchange=None):
    """One run of the prepared setup on the cluster: per-iteration wall time (median over
    iterations 1..) and where it went (the parts time their own steps)."""
    from dataclasses import replace

    from daskhpc.cpals import cpals_job
    from daskhpc.runtime import run_job

    if tol is not None:
        s = replace(s, options=replace(s.options, tol=tol))
    job = cpals_job(s, in_loop=in_loop, exchange=exchange)
    out = run_job(client, job, progress_bar=False)
    h = out.history[1:]
    wall = float(np.median([r["time_s"] for r in h]))
    busy = float(np.median([r["compute_max_s"] for r in h]))
    steps = len(job.program(0).steps) / s.options.iters
    return {"per_iteration_s": wall, "iterations": [r["time_s"] for r in out.history],
            "run_s": out.timing["run_s"], "in_loop": job.in_loop, "exchange": job.exchange,
            "stop_rule": job.stop is not None,
            "compute_max_s": busy, "cpu_max_s": float(np.median([r["cpu_max_s"] for r in h])),
            "steps_per_iteration": steps,
            "not_compute_per_step_ms": 1e3 * (wall - busy) / steps,
            "inter_worker_bytes": out.measured.get("inter_worker_bytes"),
            "planned_bytes": out.measured.get("planned_bytes")}


def _tns_file(X, nnz: int) -> str:
    from daskhpc.cpals import write_tns

    path = Path(f"/tmp/daskhpc-cpals-powerlaw-{nnz}.tns")
    if not path.exists():
        tmp = path.with_suffix(".part")
        write_tns(tmp, X)
        tmp.rename(path)
    return str(path)


def _splatt_file(binary: str, path: str, rank: int, iters: int, ranks: int) -> float:
    cmd = [binary, "cpd", path, "-r", str(rank), "-i", str(iters), "--tol", "0", "-t", "1",
           "--nowrite", "-v", "--seed", "1"]
    if ranks > 1:
        cmd = ["mpiexec", "-n", str(ranks)] + cmd
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
           "OMP_WAIT_POLICY": "PASSIVE"}
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
    total = float(re.search(r"CPD\s+([0-9.]+)s", out).group(1))
    its = len(re.findall(r"its =\s*\d+ \(", out))
    return total / its


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _wait_quiet(max_load: float | None, timeout: float = 30.0) -> None:
    """Wait (at most ``timeout`` s) until the 1-minute load average is below ``max_load``:
    the machine is shared, and a contender timed during another job's burst says little."""
    if not max_load:
        return
    deadline = time.monotonic() + timeout
    while os.getloadavg()[0] > max_load and time.monotonic() < deadline:
        time.sleep(5)


def distributed(args) -> dict:
    import daskhpc as dh
    from daskhpc.cpals import power_law_tensor, prepare

    t0 = time.perf_counter()
    X = power_law_tensor(args.nnz)
    out: dict = {"nnz": args.nnz, "shape": list(X.shape), "rank": args.rank,
                 "iters": args.dist_iters, "generate_s": time.perf_counter() - t0,
                 "load_start": _load(), "setups": {}}
    setups = {}
    for m in args.methods:
        grain, part = m.split("-")
        t0 = time.perf_counter()
        setups[m] = prepare(X, 2, grain=grain, partition=part, rank=args.rank,
                            iters=args.dist_iters, tol=0.0)
        out["setups"][m] = {"prepare_s": time.perf_counter() - t0,
                            "rows_per_iteration": setups[m].iteration_plan().report()["tot_vol"]}
        print(m, out["setups"][m], flush=True)
    tns = _tns_file(X, args.nnz) if Path(args.splatt_mpi).exists() else None
    contenders = {"daskhpc serial": lambda: _serial_10m(X, args)}
    runs: dict = {}
    details: dict = {}
    with dh.connect(n_workers=2) as client:
        for m in args.methods:
            contenders[f"daskhpc 2 workers {m}"] = (lambda m=m: _cluster_run(client, setups[m]))
        if tns is not None:
            contenders["SPLATT 1 rank"] = lambda: _splatt_file(
                args.splatt, tns, args.rank, args.dist_iters, 1)
            contenders["SPLATT 2 ranks"] = lambda: _splatt_file(
                args.splatt_mpi, tns, args.rank, args.dist_iters, 2)
        _cluster_run(client, setups[args.methods[0]])             # first touches, caches
        loads = []
        for r in range(args.rounds):
            names = list(contenders)
            for name in names[r % len(names):] + names[:r % len(names)]:
                _wait_quiet(args.max_load)
                got = contenders[name]()
                if isinstance(got, dict):
                    details.setdefault(name, []).append(got)
                    got = got["per_iteration_s"]
                runs.setdefault(name, []).append(float(got))
                print(r, name, runs[name][-1], _load(), flush=True)
            loads.append(_load())
        out["per_iteration"] = {n: {"median_s": float(np.median(v)), "min_s": float(np.min(v)),
                                    "rounds": v} for n, v in runs.items()}
        base = out["per_iteration"]["daskhpc serial"]["median_s"]
        for v in out["per_iteration"].values():
            v["speedup_vs_serial"] = base / v["median_s"]
        out["load_per_round"] = loads
        # where the time went: per iteration, the busier worker's compute (its steps'
        # own timing) and the rest of the wall time per step (Dask, transfers, waiting)
        keys = ("per_iteration_s", "compute_max_s", "cpu_max_s", "steps_per_iteration",
                "not_compute_per_step_ms", "cpu_per_iteration_s")
        out["where"] = {n: {k: float(np.median([d[k] for d in v])) for k in keys
                            if k in v[0]} for n, v in details.items()}
        # where the time goes, and what the stop rule costs (one iteration per submission)
        out["stop_rule"] = {}
        for m in args.methods if args.stop_rule else ():
            a = _cluster_run(client, setups[m])
            b = _cluster_run(client, setups[m], tol=1e-300)
            out["stop_rule"][m] = {"all_at_once": a, "one_per_submission": b}
            print(m, out["stop_rule"][m], flush=True)
    out["load_end"] = _load()
    return out


def _serial_10m(X, args) -> dict:
    """Our serial on the whole tensor: wall seconds per iteration (median over iterations
    1..) and CPU seconds per iteration (mean over the run: on a loaded machine the CPU
    time says what the work costs, the wall time what the machine gave it)."""
    from daskhpc.cpals import serial_fit

    c0 = time.process_time()
    hist = serial_fit(X, args.rank, iters=args.dist_iters, tol=0.0, seed=0).history
    cpu = (time.process_time() - c0) / len(hist)
    return {"per_iteration_s": float(np.median([h["time_s"] for h in hist[1:]])),
            "cpu_per_iteration_s": cpu}


def latency(args) -> dict:
    """Short steps: mlsmall at R = 16 on 2 workers, K = 2, fine-hp and coarse-hp."""
    import daskhpc as dh
    from daskhpc.cpals import as_tensor, prepare, serial_fit

    out: dict = {"load_start": _load(), "runs": {}}

    X = as_tensor(str(MLSMALL))
    serial_fit(X, 16, iters=2, tol=0.0, seed=0)
    ser = []
    for _ in range(args.rounds):
        ser.append(float(np.median([h["time_s"] for h in serial_fit(
            X, 16, iters=40, tol=0.0, seed=0).history[1:]])))
    out["serial_s"] = {"median_s": float(np.median(ser)), "min_s": float(np.min(ser))}
    with dh.connect(n_workers=2) as client:
        for m in ("fine-hp", "coarse-hp"):
            grain, part = m.split("-")
            s = prepare(str(MLSMALL), 2, grain=grain, partition=part, rank=16, iters=40,
                        tol=0.0)
            _cluster_run(client, s)
            variants = {
                "direct, all at once": {"exchange": "direct"},
                "direct, stop rule (one iteration per submission)": {"exchange": "direct",
                                                                     "tol": 1e-300},
                "direct, all at once, steps in worker threads": {"exchange": "direct",
                                                                 "in_loop": False},
                "graph, all at once": {"exchange": "graph"},
                "graph, stop rule": {"exchange": "graph", "tol": 1e-300},
                "graph, all at once, steps in worker threads": {"exchange": "graph",
                                                                "in_loop": False}}
            got: dict = {k: [] for k in variants}
            for r in range(args.rounds):
                for k, kw in variants.items():
                    _wait_quiet(args.max_load)
                    got[k].append(_cluster_run(client, s, **kw))
            out["runs"][m] = {k: {"median_s": float(np.median([x["per_iteration_s"] for x in v])),
                                  "min_s": float(np.min([x["per_iteration_s"] for x in v])),
                                  "compute_max_s": float(np.median([x["compute_max_s"]
                                                                    for x in v])),
                                  "not_compute_per_step_ms": float(np.median(
                                      [x["not_compute_per_step_ms"] for x in v]))}
                              for k, v in got.items()}
            print(m, out["runs"][m], flush=True)
    out["load_end"] = _load()
    return out


def versus(args) -> dict:
    """2 workers against SPLATT on mlsmall, R = 16, side by side: per round our coarse-hp
    and fine-hp runs on 2 workers (K = 2, direct exchange, every iteration submitted at
    once) and SPLATT with 1 and 2 OpenMP threads, in a rotating order; per-iteration
    medians and the ratio ours / SPLATT 2 threads paired per round."""
    import daskhpc as dh
    from daskhpc.cpals import prepare

    if not Path(args.splatt).exists():
        raise SystemExit(f"no SPLATT binary at {args.splatt} (--splatt)")
    out: dict = {"load_start": _load()}
    got: dict = {}
    with dh.connect(n_workers=2) as client:
        setups = {m: prepare(str(MLSMALL), 2, grain=m.split("-")[0], partition="hp",
                             rank=args.rank, iters=args.iters, tol=0.0)
                  for m in ("coarse-hp", "fine-hp")}
        for st in setups.values():
            _cluster_run(client, st)                          # compile, connect
        contenders = {f"daskhpc 2 workers {m}": (lambda st=st: _cluster_run(
            client, st)["per_iteration_s"]) for m, st in setups.items()}
        for t in (1, 2):
            contenders[f"SPLATT {t} thread{'s' * (t > 1)}"] = (
                lambda t=t: float(np.median(splatt(args.splatt, args.rank, args.iters, t))))
        names = list(contenders)
        for r in range(args.rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                _wait_quiet(args.max_load)
                got.setdefault(name, []).append(contenders[name]())
    ref = got["SPLATT 2 threads"]
    out["per_iteration_ms"] = {k: {"median": 1e3 * float(np.median(v)),
                                   "min": 1e3 * float(np.min(v)),
                                   "max": 1e3 * float(np.max(v))} for k, v in got.items()}
    out["over_splatt_2_threads"] = {
        k: float(np.median([a / b for a, b in zip(v, ref)])) for k, v in got.items()}
    out["load_end"] = _load()
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="cpals-bench.json")
    p.add_argument("--only", nargs="*", default=["serial", "plans", "synthetic"])
    p.add_argument("--rank", type=int, default=16)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--tensorly-rounds", type=int, default=2)
    p.add_argument("--splatt", default="/work/peers/splatt/build/serial/bin/splatt")
    p.add_argument("--peer-python", default="/work/bench-venv/bin/python")
    p.add_argument("--nnz", type=int, default=10_000_000)
    p.add_argument("--parts", type=int, default=1024)
    p.add_argument("--splatt-mpi", default="/work/peers/splatt/build/mpi/bin/splatt")
    p.add_argument("--methods", nargs="*", default=["fine-hp", "coarse-block", "coarse-hp"])
    p.add_argument("--max-load", type=float, default=None,
                   help="before each timed run, wait (up to 30 s) for a 1-minute load "
                        "average below this")
    p.add_argument("--no-stop-rule", dest="stop_rule", action="store_false",
                   help="distributed: skip the stop rule's cost (one iteration per "
                        "submission against all at once)")
    p.add_argument("--dist-iters", type=int, default=8,
                   help="iterations per run in the distributed section")
    args = p.parse_args(argv)
    res = {"machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]}}
    for section in args.only:
        t0 = time.perf_counter()
        res[section] = {"serial": serial, "plans": plans, "synthetic": synthetic,
                        "distributed": distributed, "latency": latency,
                        "versus": versus}[section](args)
        print(section, f"{time.perf_counter() - t0:.1f} s", json.dumps(res[section])[:2000],
              flush=True)
    Path(args.out).write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
