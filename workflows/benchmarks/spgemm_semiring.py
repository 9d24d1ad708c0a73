"""SpGEMM over a semiring and with a mask: daskhpc.spgemm next to python-graphblas.

Run from the repository root (wrap in the shared lock so that timings do not overlap)::

    curl -sSLO https://snap.stanford.edu/data/email-Enron.txt.gz
    flock /tmp/daskhpc-bench.lock python workflows/benchmarks/spgemm_semiring.py \\
        email-Enron.txt.gz --repeat 5 --json out-spgemm-semiring.json

Rows, for A·A of the given matrix (median, min, max of ``--repeat`` runs):

* ``min_plus``: C = A min.+ A (shortest two-hop paths);
* ``masked``: C<A> = A·A (plus_times restricted to A's pattern: the wedges closed by an
  edge, triangle counting's product) and ``masked_complement``: C<!A> = A·A;
* for each, python-graphblas (SuiteSparse:GraphBLAS) ``mxm`` with 1 and 2 threads, and
  ours (public API only: ``daskhpc.spgemm.multiply``) on one 2-worker LocalCluster (one
  thread per worker) with ``consume="count"`` (C formed and reduced on the workers) and
  ``consume="keep"`` (C gathered and assembled on the client), ``timing["run_s"]``.

Every row checks that both sides found the same number of entries.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
import scipy.sparse as sp

from daskhpc.io import read
from daskhpc.runtime import connect
from daskhpc.spgemm import multiply

CASES = {"min_plus": ("min_plus", False, False),
         "masked": ("plus_times", True, False),
         "masked_complement": ("plus_times", True, True)}


def stats(times) -> dict:
    t = sorted(times)
    return {"median": float(np.median(t)), "min": t[0], "max": t[-1], "n": len(t)}


def graphblas_row(a, semiring, masked, complement, threads, repeat) -> dict:
    import graphblas as gb

    gb.ss.config["nthreads"] = threads
    ga = gb.io.from_scipy_sparse(sp.csr_matrix(a))
    op = getattr(gb.semiring, semiring)

    def run():
        c = gb.Matrix(float, a.shape[0], a.shape[1])
        if masked:
            c(~ga.S if complement else ga.S) << ga.mxm(ga, op)
        else:
            c << ga.mxm(ga, op)
        c.wait()
        return c

    run()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        c = run()
        times.append(time.perf_counter() - t)
    return {**stats(times), "entries": int(c.nvals)}


def ours_row(client, a, semiring, masked, complement, consume, repeat) -> dict:
    kw = dict(client=client, semiring=semiring, mask=a if masked else None,
              complement=complement, consume=consume, plan=False, measure_memory=False)
    multiply(a, **kw)                                 # warm: kernels, plugin
    times, res = [], None
    for _ in range(repeat):
        res = multiply(a, **kw)
        times.append(res.timing["run_s"])
    if consume == "count":
        entries = int(res.value["structural_nnz"])
    else:
        entries = int(res.matrix.nnz)
    return {**stats(times), "entries": entries, "grid": res.info["grid"]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("matrix", help="a matrix file (e.g. SNAP's email-Enron.txt.gz)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    a = sp.csr_array(read(args.matrix).matrix, dtype=np.float64)
    out = {"matrix": os.path.basename(args.matrix), "shape": list(a.shape), "nnz": int(a.nnz),
           "machine": {"cpus": os.cpu_count(), "loadavg_start": os.getloadavg()}, "rows": {}}
    with connect(n_workers=2, threads_per_worker=1) as client:
        for name, (semiring, masked, complement) in CASES.items():
            row = {}
            for th in (1, 2):
                row[f"graphblas_{th}t"] = graphblas_row(a, semiring, masked, complement, th,
                                                        args.repeat)
            for consume in ("count", "keep"):
                row[f"ours_{consume}"] = ours_row(client, a, semiring, masked, complement,
                                                  consume, args.repeat)
            # plus_times keep drops entries that cancel to 0 (scipy's convention): compare
            # the structural counts of count with graphblas's entries
            row["same_entries"] = row["ours_count"]["entries"] == row["graphblas_1t"]["entries"]
            out["rows"][name] = row
            print(name, json.dumps({k: (v["median"] if isinstance(v, dict) else v)
                                    for k, v in row.items()}), flush=True)
    out["machine"]["loadavg_end"] = os.getloadavg()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
