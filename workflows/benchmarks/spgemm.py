"""Benchmark C = A·A: daskhpc.spgemm against scipy, python-graphblas and dask.array+sparse.

Run (wrap in the shared lock so timings do not overlap with other benchmarks)::

    flock /tmp/daskhpc-bench.lock python workflows/benchmarks/spgemm.py --repeat 7 \\
        --json out-spgemm.json

Everything runs side by side in one process on one 2-worker LocalCluster (one
thread per worker, TCP). For every matrix:

* scipy ``A @ A`` (single-threaded by construction), int32 indices;
* the local kernel alone (``daskhpc.spgemm.local_multiply``, one thread): the
  default accumulator (dense for these matrices, see ``choose_accumulator``)
  and the hash accumulator of section IV-D (``kernel_hash``);
* python-graphblas ``A.mxm(A)`` with 1 and 2 threads;
* ours on grids 1x1x1, 2x2x1 and 1x1x2 (2x2x1 puts two grid cells on each of the
  two workers, round robin), ``local="fused"`` and ``"staged"``, consuming with
  ``count`` (C formed and held on the workers, as the MPI code leaves it: the
  analog of scipy's C in memory) and, for 2x2x1 fused, ``keep`` (C gathered to
  the client and assembled as scipy CSR: reported separately, with the gather
  and the assembly split and the wire time of ``nnz(C) * 12`` bytes next to it);
* dask.array with pydata/sparse COO chunks (2 x 2 chunks) ``(x @ x).compute()`` on
  the same cluster, once (skip with ``--no-dask-array``).

Every timed row is repeated ``--repeat`` times: the median and the min/max are
reported. As the machine is shared, a ``paired`` section runs scipy, the kernel
and ours (every grid, fused, count) back to back in every repeat and gives
the per-repeat ratios. Where the 2-worker time goes: one extra 2x2x1 fused count run with
``client.get_task_stream()`` (compute per step and per worker, transfers, the
span of the tasks, and what is outside it).

Peak memory: this process's high-water mark over its baseline for in-process
runs; for cluster runs the sum over workers of their high-water marks over
their baselines (plus the client's for ``keep``); the max over the repeats.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from daskhpc.io import read
from daskhpc.runtime import connect
from daskhpc.spgemm import CscBlock, local_multiply, multiply

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
MATRICES = {
    "email-Enron": DATA / "graphs" / "email-Enron.txt.gz",
    "soc-Slashdot0902": DATA / "graphs" / "soc-Slashdot0902.txt.gz",
    "astro-ph": DATA / "matrices" / "astro-ph.mtx.gz",
}


def _status(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def reset_peak() -> int | None:
    """Reset this process's peak RSS (Linux ``/proc``); return its RSS (bytes) or None.
    ``multiply``'s own memory report does the same on the workers."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return None
    return _status("VmRSS")


def read_peak() -> int | None:
    """Peak RSS (bytes) of this process since the last :func:`reset_peak`, or None."""
    return _status("VmHWM")


def spread(times) -> dict:
    t = sorted(times)
    return {"time_s": float(np.median(t)), "min_s": t[0], "max_s": t[-1], "n": len(t)}


def timed(fn, repeat):
    """Median/min/max wall time of ``repeat`` runs and the peak RSS increase of this process."""
    times, peak, out = [], 0, None
    for _ in range(repeat):
        out = None
        base = reset_peak() or 0
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
        peak = max(peak, (read_peak() or 0) - base)
    return {**spread(times), "peak_bytes": peak}, out


def bench_scipy(a32, repeat):
    row, c = timed(lambda: a32 @ a32, repeat)
    return {**row, "nnz_c": int(c.nnz)}


def bench_kernel(a, repeat, accumulator="auto"):
    blk = CscBlock.from_scipy(a)
    local_multiply(blk, blk, accumulator=accumulator)            # load the kernel
    row, c = timed(lambda: local_multiply(blk, blk, accumulator=accumulator), repeat)
    return {**row, "nnz_c": int(np.count_nonzero(c.val))}


def bench_graphblas(a, threads, repeat):
    import graphblas as gb

    gb.ss.config["nthreads"] = threads
    ga = gb.io.from_scipy_sparse(a)

    def run():
        c = gb.Matrix(float, a.shape[0], a.shape[1])
        c << ga.mxm(ga, gb.semiring.plus_times)
        c.wait()
        return c

    row, c = timed(run, repeat)
    return {**row, "nnz_c": int(c.nvals)}


def bench_ours(client, a, grid, consume, local, repeat):
    multiply(a, client=client, grid=grid, consume=consume, local=local, plan=False,
             measure_memory=False)                                  # warm: kernels, plugin
    rows = []
    for _ in range(repeat):
        base = reset_peak() or 0
        t0 = time.perf_counter()
        res = multiply(a, client=client, grid=grid, consume=consume, local=local, plan=False)
        wall = time.perf_counter() - t0
        client_peak = (read_peak() or 0) - base
        nnz = res.value["nnz"] if consume == "count" else int(res.matrix.nnz)
        tm = res.timing
        rows.append({"time_s": tm["run_s"] + tm["gather_s"] + tm["assemble_s"],
                     "run_s": tm["run_s"], "gather_s": tm["gather_s"],
                     "assemble_s": tm["assemble_s"], "wall_s": wall, "nnz_c": nnz,
                     "batches": res.nbatches,
                     "peak_bytes": sum(res.memory["peak_increase_per_worker"].values())
                     + (client_peak if consume == "keep" else 0),
                     "measured": res.measured.get("per_step")})
        del res
    out = {**spread([r["time_s"] for r in rows]), "nnz_c": rows[0]["nnz_c"],
           "batches": rows[0]["batches"], "peak_bytes": max(r["peak_bytes"] for r in rows),
           "measured": rows[0]["measured"]}
    for part in ("run_s", "gather_s", "assemble_s", "wall_s"):
        out[part] = float(np.median([r[part] for r in rows]))
    return out


def time_local(a32, blk, rows) -> None:
    """One timing each of scipy's ``A @ A`` and our local kernel, appended to
    ``rows["scipy"]`` and ``rows["kernel"]`` (seconds; each product freed at once)."""
    t0 = time.perf_counter()
    c = a32 @ a32
    rows["scipy"].append(time.perf_counter() - t0)
    del c
    t0 = time.perf_counter()
    c = local_multiply(blk, blk)
    rows["kernel"].append(time.perf_counter() - t0)
    del c


def paired(client, a, a32, repeat, grids=("2x2x1", "1x1x1", "1x1x2")):
    """scipy, the kernel and ours back to back in every repeat, so that all see the
    same load (the machine is shared): per-repeat times and scipy/ours ratios."""
    blk = CscBlock.from_scipy(a)
    for grid in grids:
        multiply(a, client=client, grid=grid, consume="count", local="fused", plan=False,
                 measure_memory=False)
    rows = defaultdict(list)
    for _ in range(repeat):
        time_local(a32, blk, rows)
        for grid in grids:
            res = multiply(a, client=client, grid=grid, consume="count", local="fused",
                           plan=False, measure_memory=False)
            rows[f"ours_{grid}_fused_count"].append(res.timing["run_s"])
    out = {"times_s": dict(rows), "load": os.getloadavg()}
    for name, ts in rows.items():
        if name != "scipy":
            ratio = np.array(rows["scipy"]) / np.array(ts)
            out[f"scipy_over_{name}"] = {"median": float(np.median(ratio)),
                                         "min": float(ratio.min()), "max": float(ratio.max()),
                                         "faster_in": int((ratio > 1).sum()), "of": len(ts)}
    return out


def breakdown(client, a, grid="2x2x1", local="fused"):
    """Where a count run's time goes, from the workers' task startstops."""
    from distributed import get_task_stream

    multiply(a, client=client, grid=grid, consume="count", local=local, plan=False,
             measure_memory=False)
    cpu0 = client.run(_cpu_seconds)
    with get_task_stream(client) as ts:
        res = multiply(a, client=client, grid=grid, consume="count", local=local, plan=False,
                       measure_memory=False)
    cpu1 = client.run(_cpu_seconds)
    per_step = defaultdict(float)
    busy = defaultdict(float)
    transfer = defaultdict(float)
    starts, stops = [], []
    for d in ts.data:
        key = d["key"]
        step = (key[0] if isinstance(key, tuple) else str(key)).rsplit("-", 1)[-1]
        for ss in d["startstops"]:
            dur = ss["stop"] - ss["start"]
            starts.append(ss["start"])
            stops.append(ss["stop"])
            if ss["action"] == "compute":
                per_step[step] += dur
                busy[d["worker"]] += dur
            else:
                transfer[f"{ss['action']}:{step}"] += dur
    span = max(stops) - min(starts)
    return {"grid": grid, "local": local, "run_s": res.timing["run_s"], "task_span_s": span,
            "outside_tasks_s": res.timing["run_s"] - span,
            "compute_per_step_s": dict(per_step), "transfer_s": dict(transfer),
            "busy_per_worker_s": list(busy.values()),
            "idle_per_worker_s": [span - b for b in busy.values()],
            # CPU time each worker process got during the call (all its threads):
            # below the busy time when other processes share the cores
            "cpu_per_worker_s": [cpu1[w] - cpu0[w] for w in cpu0]}


def _cpu_seconds() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def wire_rate(nbytes=256 * 2**20) -> float:
    """Bytes per second of one localhost TCP stream (sender thread, receiver here)."""
    buf = np.ones(nbytes, np.uint8)
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)

    def send():
        with socket.create_connection(srv.getsockname()) as c:
            c.sendall(memoryview(buf))

    th = threading.Thread(target=send)
    t0 = time.perf_counter()
    th.start()
    conn, _ = srv.accept()
    out = memoryview(bytearray(nbytes))
    got = 0
    while got < nbytes:
        got += conn.recv_into(out[got:])
    rate = nbytes / (time.perf_counter() - t0)
    th.join()
    conn.close()
    srv.close()
    return rate


def bench_dask_array(client, a):
    import dask.array as da
    import sparse

    n = a.shape[0]
    x = da.from_array(sparse.COO.from_scipy_sparse(a), chunks=((n + 1) // 2, (n + 1) // 2),
                      asarray=False)
    base = client.run(reset_peak)
    t0 = time.perf_counter()
    c = (x @ x).compute()
    t = time.perf_counter() - t0
    peaks = client.run(read_peak)
    return {"time_s": t, "min_s": t, "max_s": t, "n": 1, "nnz_c": int(c.nnz),
            "peak_bytes": int(sum(peaks[w] - (base[w] or 0) for w in peaks))}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--matrices", nargs="*", default=list(MATRICES))
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--no-dask-array", action="store_true")
    ap.add_argument("--no-graphblas", action="store_true")
    ap.add_argument("--no-staged", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    out = {"machine": {"cpus": os.cpu_count(), "loadavg_start": os.getloadavg()},
           "repeat": args.repeat}
    with connect(n_workers=2, threads_per_worker=1, dashboard_address=":0") as client:
        out["machine"]["wire_bytes_per_s"] = wire_rate()
        for name in args.matrices:
            a = read(MATRICES[name]).matrix
            a32 = sp.csr_array((a.data, a.indices.astype(np.int32), a.indptr.astype(np.int32)),
                               shape=a.shape)
            flops = int(np.diff(a.indptr)[a.indices].sum())    # sum_k nnz(A(:,k)) nnz(A(k,:))
            row = {"shape": list(a.shape), "nnz_a": int(a.nnz), "flops": flops,
                   "loadavg_start": os.getloadavg()}
            row["scipy"] = bench_scipy(a32, args.repeat)
            row["compression_factor"] = flops / row["scipy"]["nnz_c"]
            row["kernel"] = bench_kernel(a, args.repeat)
            row["kernel_hash"] = bench_kernel(a, args.repeat, "hash")
            if not args.no_graphblas:
                for th in (1, 2):
                    row[f"graphblas_{th}t"] = bench_graphblas(a, th, args.repeat)
            for grid in ("1x1x1", "2x2x1", "1x1x2"):
                for local in ("fused",) if args.no_staged else ("fused", "staged"):
                    row[f"ours_{grid}_{local}_count"] = bench_ours(
                        client, a, grid, "count", local, args.repeat)
            keep = bench_ours(client, a, "2x2x1", "keep", "fused", max(3, args.repeat // 2))
            keep["wire_s"] = 12 * keep["nnz_c"] / out["machine"]["wire_bytes_per_s"]
            row["ours_2x2x1_fused_keep"] = keep
            row["breakdown_2x2x1_fused_count"] = breakdown(client, a)
            row["paired"] = paired(client, a, a32, args.repeat)
            if not args.no_dask_array:
                row["dask_array_sparse"] = bench_dask_array(client, a)
            row["loadavg_end"] = os.getloadavg()
            out[name] = row
            print(name, json.dumps({k: (round(v["time_s"], 3), round(v["min_s"], 3),
                                        round(v["max_s"], 3), v["peak_bytes"] >> 20)
                                    for k, v in row.items()
                                    if isinstance(v, dict) and "min_s" in v}),
                  "load", row["loadavg_start"], row["loadavg_end"], flush=True)
            print("  paired scipy/ours:", json.dumps(
                {k: (round(v["median"], 2), round(v["min"], 2), round(v["max"], 2),
                     f"{v['faster_in']}/{v['of']}")
                 for k, v in row["paired"].items() if k.startswith("scipy_over")}), flush=True)
    out["machine"]["loadavg_end"] = os.getloadavg()
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    sys.exit(main() and 0)
