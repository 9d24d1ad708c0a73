"""soc-Slashdot0902 A·A under a per-worker budget that forces b > 1.

    flock /tmp/daskhpc-bench.lock python workflows/benchmarks/spgemm_budget.py \
        --memory-per-worker 500MB --json out-spgemm-budget.json

Prints b, the batch timeline check, and each worker's peak RSS increase next to the budget.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from daskhpc.io import read
from daskhpc.runtime import connect
from daskhpc.spgemm import multiply

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--matrix", default=str(DATA / "graphs" / "soc-Slashdot0902.txt.gz"))
    ap.add_argument("--memory-per-worker", default="500MB")
    ap.add_argument("--grids", nargs="*", default=["2x2x1", "1x1x2"])
    ap.add_argument("--local", default="staged")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    a = read(args.matrix).matrix
    out = {}
    with connect(n_workers=2, dashboard_address=":0") as client:
        for grid in args.grids:
            res = multiply(a, client=client, grid=grid, memory_per_worker=args.memory_per_worker,
                           consume="count", local=args.local)
            out[grid] = {"batches": res.nbatches, "value": res.value, "memory": res.memory,
                         "timeline": res.timeline, "timing": res.timing,
                         "symbolic": res.symbolic, "measured": res.measured,
                         "quality": res.quality,
                         "plan_sum_max_vol": {k: v["sum_max_vol"] for k, v in res.plan.items()
                                              if isinstance(v, dict) and "sum_max_vol" in v}}
            print(grid, res.nbatches, res.value, res.memory, res.timeline["violations"],
                  flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2, default=str))


if __name__ == "__main__":
    main()
