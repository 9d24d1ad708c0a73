"""SSGD and CP-ALS at the papers' sizes against CESSGD and SPLATT, paired in one run.

On the inputs of ``paper_inputs.py`` (``ratings``, ``tensor``), in alternating rounds:

* ``ssgd``: ``daskhpc.ssgd.fit(ratings.csv, 2, strategy="dsgd", partition="random")`` on 2
  single-threaded workers against CESSGD built with ``-DNO_SHUFFLE`` on 2 MPI ranks
  (``-c 0``, its own random rows and columns), both F = 16, the same step size and
  regularisation (``ssgd_cessgd.py`` says why ``lr=0.02`` is its ``-e 0.01``), no test set,
  both sweeping in stored order (ours ``shuffle=False``).
  CESSGD reads MatrixMarket: ``ratings.mtx`` is written once beside the CSV (1-based ids).
* ``cpals``: ``daskhpc.cpals.fit(tensor.tns, 16, 2, partition="random")`` on 2 workers
  against ``splatt cpd -t 2`` (one process, 2 OpenMP threads, passive waiting), tol 0.

Per side and round: the median epoch/iteration after the first, the time outside them (the
call's wall less every epoch: read, partition, plan, set-up, collecting the result), and
for the peers their peak RSS (sampled with psutil every 20 ms over the process tree: the
largest rank and the sum). Our client's and workers' memory is ``paper_memory.py``'s.

    python workflows/benchmarks/paper_inputs.py --scale 0.1 --dir /tmp/paper-0.1 ratings tensor
    python workflows/benchmarks/paper_peers.py ssgd cpals --dir /tmp/paper-0.1 --rounds 2

Build the peers first (docs/benchmarks.md, "Peers"); ``--cessgd`` and ``--splatt`` name the
binaries.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

from paper_inputs import mem_available         # the scripts beside this one
from report_out import write_json
from ssgd_cessgd import LR, REG, RANK, parse_cessgd


def sampled(cmd: list[str], env=None) -> tuple[str, float, dict]:
    """Run ``cmd``; its stdout, wall seconds and the peak RSS of its process tree."""
    import psutil

    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    peaks, total, stop = {}, [0], threading.Event()

    def sample():
        root = psutil.Process(proc.pid)
        while not stop.is_set():
            try:
                tree = [root] + root.children(recursive=True)
                rss = {p.pid: p.memory_info().rss for p in tree}
            except psutil.Error:
                rss = {}
            for pid, v in rss.items():
                peaks[pid] = max(peaks.get(pid, 0), v)
            total[0] = max(total[0], sum(rss.values()))
            time.sleep(0.02)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    stop.set()
    t.join()
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {err[-2000:]}")
    return out, wall, {"largest_mib": max(peaks.values(), default=0) / 2**20,
                       "sum_mib": total[0] / 2**20}


def ratings_mtx(csv: Path) -> Path:
    """``ratings.csv`` as 1-based MatrixMarket for CESSGD, written once in blocks."""
    import pyarrow.csv as pc

    mtx = csv.with_suffix(".mtx")
    if mtx.exists():
        return mtx
    tmp = mtx.with_suffix(".part")
    m, n, nnz = 0, 0, 0
    body = tmp.with_suffix(".body")
    with open(body, "w") as f:
        for b in pc.open_csv(csv, read_options=pc.ReadOptions(block_size=1 << 24)):
            u = b.column(0).to_numpy().astype(np.int64) + 1
            i = b.column(1).to_numpy().astype(np.int64) + 1
            r = b.column(2).to_numpy()
            m, n, nnz = max(m, int(u.max())), max(n, int(i.max())), nnz + len(u)
            np.savetxt(f, np.column_stack([u, i, r]), fmt="%d %d %g")
    with open(tmp, "w") as f:
        f.write("%%MatrixMarket matrix coordinate real general\n")
        f.write(f"{m} {n} {nnz}\n")
    with open(tmp, "ab") as f, open(body, "rb") as g:
        while chunk := g.read(1 << 24):
            f.write(chunk)
    body.unlink()
    tmp.rename(mtx)
    return mtx


def cessgd(args, mtx: Path) -> dict:
    cmd = [args.mpiexec, "-n", "2", args.cessgd, "-i", str(args.epochs), "-f", str(RANK),
           "-e", str(LR / 2), "-l", str(REG), "-c", "0", "-s", "0", str(mtx)]
    out, wall, rss = sampled(cmd)
    got = parse_cessgd(out)
    epochs = [got["epoch0_ms"] / 1e3] + [e / 1e3 for e in got["epoch_ms"]]
    return {"epoch_s": float(np.median(epochs[1:])), "outside_s": wall - sum(epochs),
            "wall_s": wall, "setup_s": got["breakdown_ms"]["setup"] / 1e3, "rss": rss}


def splatt(args, tns: Path) -> dict:
    cmd = [args.splatt, "cpd", str(tns), "-r", str(RANK), "-i", str(args.iters), "--tol", "0",
           "-t", "2", "--nowrite", "-v", "--seed", "1"]
    # passive waiting: spinning OpenMP threads collapse when another process holds a core
    env = {**os.environ, "OMP_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "1",
           "OMP_WAIT_POLICY": "PASSIVE"}
    out, wall, rss = sampled(cmd, env)
    its = [float(x) for x in re.findall(r"its =\s*\d+ \(([0-9.]+)s\)", out)]
    cpd = float(re.search(r"CPD\s+([0-9.]+)s", out).group(1))
    return {"epoch_s": float(np.median(its[1:])), "outside_s": wall - cpd, "wall_s": wall,
            "rss": rss}


def ours(args, workflow: str, path: Path) -> dict:
    import daskhpc as dh

    with dh.connect(n_workers=2) as client:
        t0 = time.perf_counter()
        if workflow == "ssgd":
            res = dh.ssgd.fit(str(path), 2, client=client, strategy="dsgd",
                              partition="random", epochs=args.epochs, test_fraction=0.0,
                              eval_every=0, lr=LR, reg=REG, rank=RANK, shuffle=False,
                              progress=False)
        else:
            res = dh.cpals.fit(str(path), RANK, 2, client=client, iters=args.iters, tol=0.0,
                               partition="random")
        wall = time.perf_counter() - t0
    steps = [h["time_s"] for h in res.history]
    return {"epoch_s": float(np.median(steps[1:])), "outside_s": wall - sum(steps),
            "wall_s": wall}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("workflows", nargs="+", choices=["ssgd", "cpals"])
    ap.add_argument("--dir", required=True, help="what paper_inputs.py wrote")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=10, help="SSGD epochs")
    ap.add_argument("--iters", type=int, default=10, help="CP-ALS iterations")
    ap.add_argument("--cessgd", default="/work/peers/cessgd/src-repo/bin-noshuffle/cessgd")
    ap.add_argument("--splatt", default="/work/peers/splatt/build/serial/bin/splatt")
    ap.add_argument("--mpiexec", default=str(Path(sys.executable).parent / "mpiexec"))
    ap.add_argument("--out", default=None, help="write the JSON here (default: stdout)")
    args = ap.parse_args(argv)

    d = Path(args.dir)
    made = json.loads((d / "inputs.json").read_text())["inputs"]
    out = {"dir": str(d), "rounds": []}
    for wf in args.workflows:
        name, file = {"ssgd": ("ratings", "ratings.csv"), "cpals": ("tensor", "tensor.tns")}[wf]
        if name not in made:
            raise SystemExit(f"{d}: no {name} (run paper_inputs.py {name} first)")
        if 10 * made[name]["raw_bytes"] > mem_available():
            raise SystemExit(f"{wf}: needs about {10 * made[name]['raw_bytes'] / 2**30:.1f} "
                             f"GiB, MemAvailable is {mem_available() / 2**30:.1f} GiB")
        path = d / file
        peer = (lambda: cessgd(args, ratings_mtx(path))) if wf == "ssgd" else \
            (lambda: splatt(args, path))
        for r in range(args.rounds):
            for side in (("peer", "ours") if r % 2 == 0 else ("ours", "peer")):
                row = peer() if side == "peer" else ours(args, wf, path)
                row.update(workflow=wf, side=side, round=r, load=os.getloadavg()[0])
                out["rounds"].append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
        mine = [x for x in out["rounds"] if x["workflow"] == wf]
        med = {s: {k: float(np.median([x[k] for x in mine if x["side"] == s]))
                   for k in ("epoch_s", "outside_s")} for s in ("ours", "peer")}
        out[wf] = {**med, "ours_over_peer": med["ours"]["epoch_s"] / med["peer"]["epoch_s"]}
    write_json(out, args.out or "-")
    return out


if __name__ == "__main__":
    main()
