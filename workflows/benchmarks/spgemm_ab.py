"""Before/after timing of daskhpc.spgemm: the same few rows for any version of the package.

Uses only the public API (``CscBlock``, ``local_multiply``, ``multiply``), so an older
commit that exports them can be timed by putting its tree first on the path::

    git archive 182bd86 daskhpc | tar -x -C /tmp/spgemm-before
    PYTHONPATH=/tmp/spgemm-before flock /tmp/daskhpc-bench.lock \\
        python workflows/benchmarks/spgemm_ab.py --tag before --json before.json
    flock /tmp/daskhpc-bench.lock python workflows/benchmarks/spgemm_ab.py --tag after \\
        --json after.json

Rows (median, min, max of ``--repeat`` runs; one 2-worker LocalCluster, one thread per
worker): scipy ``A @ A`` (int32), the local kernel alone, ours with ``local="fused"`` and
``consume="count"`` on 1x1x1, 2x2x1 and 1x1x2 (``timing["run_s"]``), and 2x2x1 ``keep``
(run + gather + assembly of C on the client, ``--keep-repeat`` runs).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from daskhpc.io import read
from daskhpc.runtime import connect
from daskhpc.spgemm import CscBlock, local_multiply, multiply

from spgemm import MATRICES, time_local  # this folder's spgemm.py: data sets, local timing


def stats(times) -> dict:
    t = sorted(times)
    return {"median": float(np.median(t)), "min": t[0], "max": t[-1], "n": len(t)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--matrices", nargs="*", default=["email-Enron", "soc-Slashdot0902"])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--keep-repeat", type=int, default=3)
    ap.add_argument("--tag", default="run")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    out = {"tag": args.tag, "loadavg_start": os.getloadavg()}
    with connect(n_workers=2, threads_per_worker=1, dashboard_address=":0") as client:
        for name in args.matrices:
            a = read(MATRICES[name]).matrix
            a32 = sp.csr_array((a.data, a.indices.astype(np.int32), a.indptr.astype(np.int32)),
                               shape=a.shape)
            blk = CscBlock.from_scipy(a)
            local_multiply(blk, blk)
            rows = {"scipy": [], "kernel": []}
            for _ in range(args.repeat):
                time_local(a32, blk, rows)
            for grid in ("1x1x1", "2x2x1", "1x1x2"):
                multiply(a, client=client, grid=grid, consume="count", local="fused", plan=False)
                key = f"ours_{grid}_fused_count"
                rows[key] = []
                for _ in range(args.repeat):
                    res = multiply(a, client=client, grid=grid, consume="count", local="fused",
                                   plan=False)
                    rows[key].append(res.timing["run_s"])
            keep = []
            for _ in range(args.keep_repeat):
                res = multiply(a, client=client, grid="2x2x1", consume="keep", local="fused",
                               plan=False)
                tm = res.timing
                keep.append((tm["run_s"], tm["gather_s"], tm.get("assemble_s", 0.0)))
                del res
            row = {k: stats(v) for k, v in rows.items()}
            keep = np.array(keep)
            row["ours_2x2x1_fused_keep"] = {**stats(list(keep.sum(axis=1))),
                                            "run_s": float(np.median(keep[:, 0])),
                                            "gather_s": float(np.median(keep[:, 1])),
                                            "assemble_s": float(np.median(keep[:, 2]))}
            row["loadavg"] = os.getloadavg()
            out[name] = row
            print(args.tag, name, row["loadavg"][0],
                  {k: f"{v['median']:.3f} [{v['min']:.3f},{v['max']:.3f}]"
                   for k, v in row.items() if isinstance(v, dict)}, flush=True)
    out["loadavg_end"] = os.getloadavg()
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
