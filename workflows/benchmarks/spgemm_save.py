"""The client's peak memory with and without ``--save DIR``: A·A on 2 workers.

    python workflows/benchmarks/spgemm_save.py email-Enron.txt.gz \
        --memory-per-worker 64MB --json out-spgemm-save.json

Runs ``daskhpc run spgemm A --workers 2 --memory-per-worker M`` twice, keeping C (gathered
into the client) and with ``--save DIR`` (written by the workers), and reads the peak RSS
of the command's own process (``VmHWM`` in ``/proc/PID/status``, the kernel's high-water
mark: the LocalCluster's worker processes are other processes and not counted). Then
reads DIR back with ``daskhpc.load`` and compares it with scipy's A·A (exactly: SNAP
graphs are 0/1 matrices, every sum is an integer). Public API and the console script only.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import scipy.sparse as sp

import daskhpc as dh
from daskhpc.io import read

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report_out import write_json  # noqa: E402

DASKHPC = os.path.join(os.path.dirname(sys.executable), "daskhpc")


def peak_rss(pid: int) -> int | None:
    """The process's peak resident set so far (bytes), or None once it has gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def run_cli(args: list) -> dict:
    """The console script's exit status, wall time and peak RSS (its own process)."""
    t0 = time.perf_counter()
    p = subprocess.Popen([DASKHPC, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    peak = 0
    while p.poll() is None:            # VmHWM only grows: the last reading is the peak
        peak = max(peak, peak_rss(p.pid) or 0)
        time.sleep(0.05)
    out, err = p.communicate()
    if p.returncode != 0:
        raise SystemExit(f"daskhpc {' '.join(args)} failed ({p.returncode}):\n{err}")
    return {"peak_rss": peak, "wall_s": time.perf_counter() - t0, "stdout": out}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("matrix", help="A (any format daskhpc.io.read takes)")
    ap.add_argument("--memory-per-worker", default="64MB")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--json", default="-")
    args = ap.parse_args(argv)
    common = ["run", "spgemm", args.matrix, "--workers", str(args.workers),
              "--memory-per-worker", args.memory_per_worker, "--no-progress"]
    out = {"matrix": os.path.basename(args.matrix), "workers": args.workers,
           "memory_per_worker": args.memory_per_worker, "load": os.getloadavg(), "runs": []}
    with tempfile.TemporaryDirectory() as tmp:
        saved = os.path.join(tmp, "c")
        for r in range(args.repeat):
            for mode, extra in (("keep", []), ("save", ["--save", saved])):
                got = run_cli(common + extra + ["--json", os.path.join(tmp, "r.json")])
                out["runs"].append({"mode": mode, "repeat": r, "peak_rss": got["peak_rss"],
                                    "wall_s": got["wall_s"]})
                print(mode, r, f"client peak RSS {got['peak_rss'] / 1e6:.1f} MB, "
                      f"{got['wall_s']:.1f} s", file=sys.stderr, flush=True)
        a = read(args.matrix).matrix
        ref = sp.csr_array(a @ a)
        c = dh.load(saved).matrix
        files = os.listdir(os.path.join(saved, "matrix"))
        out["check"] = {"pieces": len(files), "nnz": int(c.nnz), "nnz_scipy": int(ref.nnz),
                        "equal": bool(c.shape == ref.shape and (c != ref).nnz == 0),
                        "c_bytes": int(ref.data.nbytes + ref.indices.nbytes +
                                       ref.indptr.nbytes)}
    for mode in ("keep", "save"):
        peaks = sorted(x["peak_rss"] for x in out["runs"] if x["mode"] == mode)
        out[f"{mode}_peak_rss_median"] = peaks[len(peaks) // 2]
    out["ratio_save_to_keep"] = out["save_peak_rss_median"] / out["keep_peak_rss_median"]
    out["load_after"] = os.getloadavg()
    print(f"client peak RSS: keep {out['keep_peak_rss_median'] / 1e6:.1f} MB, save "
          f"{out['save_peak_rss_median'] / 1e6:.1f} MB ({out['ratio_save_to_keep']:.2f}x); "
          f"C {out['check']['c_bytes'] / 1e6:.1f} MB in {out['check']['pieces']} pieces, "
          f"equal to scipy's: {out['check']['equal']}", file=sys.stderr)
    write_json(out, args.json)


if __name__ == "__main__":
    main()
