"""Benchmark C = A·A: daskhpc.spgemm against scipy, python-graphblas and dask.array+sparse.

Run (wrap in the shared lock so timings do not overlap with other benchmarks)::

    flock /tmp/daskhpc-bench.lock python workflows/benchmarks/spgemm.py --json out-spgemm.json

Everything runs side by side in one process on one 2-worker LocalCluster (one
thread per worker, TCP). For every matrix:

* scipy ``A @ A`` (single-threaded by construction), int32 indices;
* the local kernel alone (``daskhpc.spgemm.local_multiply``, one thread);
* python-graphblas ``A.mxm(A)`` with 1 and 2 threads;
* ours on grids 1x1x1, 2x2x1 and 1x1x2 (2x2x1 puts two grid cells on each of the
  two workers, round robin), ``local="fused"`` and ``"staged"``, consuming with
  ``count`` (C formed and held on the workers, as the MPI code leaves it) and,
  for 2x2x1, ``keep`` (C gathered and assembled on the client as scipy CSR);
* dask.array with pydata/sparse COO chunks (2 x 2 chunks) ``(x @ x).compute()`` on
  the same cluster (skip with ``--no-dask-array``).

Peak memory: this process's high-water mark over its baseline for in-process
runs; for cluster runs the sum over workers of their high-water marks over
their baselines (plus the client's for ``keep``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from daskhpc.io import read
from daskhpc.runtime import connect
from daskhpc.spgemm import _memory, local_multiply, multiply
from daskhpc.spgemm._block import CscBlock

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
MATRICES = {
    "email-Enron": DATA / "graphs" / "email-Enron.txt.gz",
    "soc-Slashdot0902": DATA / "graphs" / "soc-Slashdot0902.txt.gz",
    "astro-ph": DATA / "matrices" / "astro-ph.mtx.gz",
}


def timed(fn, repeat):
    """Best wall time of ``repeat`` runs and the peak RSS increase of this process."""
    best, peak, out = float("inf"), 0, None
    for _ in range(repeat):
        out = None
        base = _memory.reset_peak() or 0
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
        peak = max(peak, (_memory.read_peak() or 0) - base)
    return best, peak, out


def bench_scipy(a32, repeat):
    t, peak, c = timed(lambda: a32 @ a32, repeat)
    return {"time_s": t, "peak_bytes": peak, "nnz_c": int(c.nnz)}


def bench_kernel(a, repeat):
    blk = CscBlock.from_scipy(a)
    local_multiply(blk, blk)            # load the kernel
    t, peak, c = timed(lambda: local_multiply(blk, blk), repeat)
    return {"time_s": t, "peak_bytes": peak, "nnz_c": int(c.nnz)}


def bench_graphblas(a, threads, repeat):
    import graphblas as gb

    gb.ss.config["nthreads"] = threads
    ga = gb.io.from_scipy_sparse(a)

    def run():
        c = gb.Matrix(float, a.shape[0], a.shape[1])
        c << ga.mxm(ga, gb.semiring.plus_times)
        c.wait()
        return c

    t, peak, c = timed(run, repeat)
    return {"time_s": t, "peak_bytes": peak, "nnz_c": int(c.nvals)}


def bench_ours(client, a, grid, consume, local, repeat):
    best = None
    for _ in range(repeat):
        base = _memory.reset_peak() or 0
        t0 = time.perf_counter()
        res = multiply(a, client=client, grid=grid, consume=consume, local=local, plan=False)
        wall = time.perf_counter() - t0
        client_peak = (_memory.read_peak() or 0) - base
        nnz = res.value["nnz"] if consume == "count" else int(res.matrix.nnz)
        row = {"time_s": res.timing["run_s"] + res.timing["gather_s"],
               "run_s": res.timing["run_s"], "gather_s": res.timing["gather_s"],
               "wall_s": wall, "nnz_c": nnz, "batches": res.nbatches,
               "peak_bytes": sum(res.memory["peak_increase_per_worker"].values())
               + (client_peak if consume == "keep" else 0),
               "measured": res.measured.get("per_step")}
        if best is None or row["time_s"] < best["time_s"]:
            best = row
        del res
    return best


def bench_dask_array(client, a):
    import dask.array as da
    import sparse

    n = a.shape[0]
    x = da.from_array(sparse.COO.from_scipy_sparse(a), chunks=((n + 1) // 2, (n + 1) // 2),
                      asarray=False)
    base = client.run(_memory.reset_peak)
    t0 = time.perf_counter()
    c = (x @ x).compute()
    t = time.perf_counter() - t0
    peaks = client.run(_memory.read_peak)
    return {"time_s": t, "nnz_c": int(c.nnz),
            "peak_bytes": int(sum(peaks[w] - (base[w] or 0) for w in peaks))}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--matrices", nargs="*", default=list(MATRICES))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-dask-array", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    out = {"machine": {"cpus": os.cpu_count(), "loadavg_start": os.getloadavg()}}
    with connect(n_workers=2, threads_per_worker=1, dashboard_address=":0") as client:
        for name in args.matrices:
            a = read(MATRICES[name]).matrix
            a32 = sp.csr_array((a.data, a.indices.astype(np.int32), a.indptr.astype(np.int32)),
                               shape=a.shape)
            flops = int(np.diff(a.indptr)[a.indices].sum())    # sum_k nnz(A(:,k)) nnz(A(k,:))
            row = {"shape": list(a.shape), "nnz_a": int(a.nnz), "flops": flops}
            row["scipy"] = bench_scipy(a32, args.repeat)
            row["compression_factor"] = flops / row["scipy"]["nnz_c"]
            row["kernel"] = bench_kernel(a, args.repeat)
            for th in (1, 2):
                row[f"graphblas_{th}t"] = bench_graphblas(a, th, args.repeat)
            for grid in ("1x1x1", "2x2x1", "1x1x2"):
                for local in ("fused", "staged"):
                    row[f"ours_{grid}_{local}_count"] = bench_ours(
                        client, a, grid, "count", local, args.repeat)
            row["ours_2x2x1_fused_keep"] = bench_ours(client, a, "2x2x1", "keep", "fused", 1)
            if not args.no_dask_array:
                row["dask_array_sparse"] = bench_dask_array(client, a)
            out[name] = row
            print(name, json.dumps({k: (v["time_s"], v["peak_bytes"]) for k, v in row.items()
                                    if isinstance(v, dict) and "time_s" in v}), flush=True)
    out["machine"]["loadavg_end"] = os.getloadavg()
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    sys.exit(main() and 0)
