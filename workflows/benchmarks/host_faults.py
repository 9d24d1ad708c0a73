"""The fault table of docs/decisions.md: each host fault, for each workflow with a
checkpoint, on a virtual cluster of 4 hosts (a scheduler on host 0, a worker on each of
hosts 1-3; daskhpc.testing.hosts), measured.

A fault is applied once the run's checkpoint records 3 units complete (mid-run on any
machine):

- ``cut``: host 2's link cut, its processes alive;
- ``kill``: every process of host 2 killed;
- ``scheduler``: host 0 (scheduler and client) cut off: the run must end, not hang;
- ``slow``: host 2's link shaped to a tenth of the others'.

Prints one JSON line per run: exit status, seconds from the fault to the end, and from the
report the recovery's detection (``wasted_s``: from the last unit done to the loss seen),
``recovery_s``, ``time_lost_s``, what was run again, and the worker the others waited
for. Needs root and iproute2.

    python workflows/benchmarks/host_faults.py --workflows cpals ssgd --faults cut kill
    python workflows/benchmarks/host_faults.py --host-timeout 10 --faults cut
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from daskhpc import datasets
from daskhpc.testing import hosts

RATE = "100mbit"


def args_of(name: str) -> list[str]:
    """A run of the bundled data long enough to be cut in the middle, 3 parts."""
    return {"cpals": [datasets.path("tensor"), "--rank", "8", "--iters", "600", "--tol", "0"],
            "ssgd": [datasets.path("ratings"), "--epochs", "80"],
            "gcn": ["cora", "--epochs", "400"],
            "linear": [datasets.path("libsvm"), "--test", datasets.path("libsvm-test"),
                       "--batch", "512", "--epochs", "40", "--loss", "hinge"],
            "spgemm": [datasets.path("ratings"), "--aat", "--grid", "1x1x3", "--batches",
                       "30", "--consume", "count"]}[name] + ["--parts", "3"] * (
                           name != "spgemm")


def completed(ck: str) -> int:
    """Steps the run recorded complete in its checkpoint's manifest."""
    try:
        with open(os.path.join(ck, "manifest.json")) as f:
            return len(json.load(f)["complete"])
    except (OSError, ValueError):
        return 0


def one(name: str, fault: str, host_timeout: float | None, rate: str = RATE) -> dict:
    work = tempfile.mkdtemp(prefix="host-faults-")
    base, rate = rate, [rate] * 4
    with hosts.virtual_cluster(4, rate=rate) as vc:
        sf = vc.start_dask(os.path.join(work, "dask"))
        ck = os.path.join(work, "ck")
        env = dict(os.environ)
        if host_timeout is not None:
            env["DASK_DASKHPC__RUNTIME__HOST_TIMEOUT"] = str(host_timeout)
        cmd = [os.path.join(os.path.dirname(sys.executable), "daskhpc"), "run", name,
               *args_of(name), "--checkpoint", ck, "--scheduler-file", sf, "--json",
               "r.json", "--no-progress"]
        proc = vc.popen(0, cmd, cwd=work, env=env, stdout=subprocess.DEVNULL,
                        stderr=subprocess.PIPE, text=True)
        while proc.poll() is None and completed(ck) < 3:
            time.sleep(0.02)
        t_fault = time.monotonic()
        if fault == "cut":
            vc.cut(2)
        elif fault == "kill":
            vc.kill(2)
        elif fault == "scheduler":
            vc.cut(0)
        elif fault == "slow":
            vc.shape(2, f"{hosts.parse_rate(base) / 10:.0f}bit")
        try:
            _, err = proc.communicate(timeout=900)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        took = time.monotonic() - t_fault
        host2 = vc.addresses[2]
    out = {"workflow": name, "fault": fault, "host_timeout": host_timeout, "rate": base,
           "status": proc.returncode, "fault_to_end_s": round(took, 1),
           "last_line": (err.strip().splitlines() or [""])[-1][:300]}
    path = os.path.join(work, "r.json")
    if os.path.exists(path):
        with open(path) as f:
            rep = json.load(f)
        recs = (rep.get("recovery") or {}).get("recoveries") or []
        out["recoveries"] = [{k: (round(v, 1) if isinstance(v, float) else v)
                              for k, v in r.items()
                              if k in ("lost", "why", "wasted_s", "recovery_s", "time_lost_s",
                                       "rerun", "rerun_count")} for r in recs]
        steps = (rep.get("execution") or {}).get("steps") or {}
        out["waited_for"] = steps.get("waited_for")
        out["waited_for_s"] = steps.get("waited_for_s")
        out["waited_for_is_host2"] = bool(steps.get("waited_for")
                                          and host2 in steps["waited_for"])
        out["run_s"] = round((rep.get("timing") or {}).get("run_s") or 0.0, 1)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workflows", nargs="+", default=["cpals", "gcn", "linear", "spgemm", "ssgd"])
    p.add_argument("--faults", nargs="+", default=["cut", "kill", "scheduler", "slow"])
    p.add_argument("--host-timeout", type=float)
    p.add_argument("--rate", default=RATE, help=f"every link's rate (default {RATE})")
    opts = p.parse_args(argv)
    why = hosts.unavailable()
    if why:
        print(f"host_faults: {why}", file=sys.stderr)
        return 2
    for name in opts.workflows:
        for fault in opts.faults:
            print(json.dumps(one(name, fault, opts.host_timeout, opts.rate)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
