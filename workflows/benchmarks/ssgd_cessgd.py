"""SSGD side by side with CESSGD (the SSGD paper's public C/MPI code), paired in one run.

For K = 2 and 4 (one part per worker: K Dask worker processes for
us, ``mpiexec -n K`` for CESSGD), strategies DSGD, P2P and H&C, it runs in turn, ``--repeats``
times, ``daskhpc.ssgd.fit(..., exchange="direct")``, ``exchange="graph"`` and CESSGD on
ml-latest-small with F = 16, the same row parts and the same column blocks, and reports
per-epoch times and the paired ratios ours / CESSGD. It then measures the per-message
cost of both exchange modes with ``daskhpc.runtime.calibrate_exchange`` on two workers.

Build CESSGD first (docs/benchmarks.md, "Peers"), then::

    flock /tmp/daskhpc-bench.lock .venv/bin/python workflows/benchmarks/ssgd_cessgd.py \\
        --cessgd /work/peers/cessgd/src-repo/bin/cessgd \\
        --cessgd-noshuffle /work/peers/cessgd/src-repo/bin-noshuffle/cessgd \\
        --ks 4 2 --out ssgd-cessgd.json
    .venv/bin/python workflows/benchmarks/ssgd_cessgd.py --markdown ssgd-cessgd.json

Every run is also appended to ``OUT.rows.jsonl`` as it ends; a run of ours that fails
is recorded with its error, the cluster is re-created and the benchmark goes on.

``--cessgd-noshuffle`` (optional) adds a fourth side: CESSGD built with its own
``-DNO_SHUFFLE`` switch (sweeps in stored order). The published code draws each sweep's
permutation with ``srand(time(NULL))`` before every swap (``util.c: shuffle``), about
1.4 us per nonzero on this machine (36 ms for a 25,000-nonzero block against 0.15 ms
seeded once), which dominates its epoch here; without it what is left is its sweeps in
stored order, MPI exchanges and loss evaluation.

Same input on both sides:

* ratings: ``daskhpc.datasets.ratings()`` written as MatrixMarket with our numbering
  (the reader's dense re-indexing of the sorted user and movie ids, plus one), all
  100,836 ratings train (``test_fraction=0``: CESSGD has no test set);
* partition: our ``hp`` rows (column-net hypergraph, Mt-KaHyPar, SOED) and our seeded
  random column blocks, written once per K with ``daskhpc.hypergraph.write_pair_file``
  (rows, ``-``, columns); CESSGD reads it with ``-p`` (no ``-d``: its columns come from
  the file), we with ``partition_file=``. Both then run ring strata with seed 0: part p
  updates column block (p + k) mod K in sub-epoch k.
* optimiser: our ``lr=0.02, reg=0.1`` equals CESSGD's ``-e 0.01 -l 0.1`` (its update has
  a factor 2 on both terms); both decay ``lr0 / (1 + 0.05 n^1.5)``.

What the epoch times are:

* ours: ``time_s`` of the history rows, from the frame's unit reports: the end of the
  last sweep of epoch e (over all parts, worker clocks) minus that of epoch e-1. It
  covers everything between: sweeps (the training loss is accumulated in the sweep),
  messages, task scheduling. Epoch 0 is left out (it is measured from its first sweep's
  start).
* CESSGD: its ``-DTAKE_TIMES`` timer ``sgdtime`` (monotonic clock), printed by rank 0
  after each epoch as the maximum over ranks of the cumulative time; the epoch time is the
  difference of consecutive prints. It covers the K sweeps (each with a fresh random
  permutation of the block's nonzeros), the sub-epoch exchanges, and the full loss
  evaluation after every epoch (a pass over all nonzeros plus an ``MPI_Allreduce``). The
  ``MPI_Reduce`` and ``printf`` of the timer itself fall outside. Epoch 0 is left out.
  Its end-of-run breakdown (per timer the maximum over ranks of the run's total, divided
  by the epochs: sweeps ``comp``, exchanges ``comm``, step size ``prep``) is kept;
  ``epoch - comp - comm - prep`` is then mostly the loss evaluation.

Also checked per run: CESSGD's printed plan statistics (max-max, sum-max, total messages
and volume) equal ``daskhpc.ssgd.plan`` of the same partition file, and its final
objective (0.5 sum(e^2 + reg(|w|^2 + |h|^2))) is close to ours (different initial values).
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
QUIET = {  # per-worker background work that competes for 2 cores (as in ssgd.py)
    "distributed.worker.profile.enabled": False,
    "distributed.admin.system-monitor.gil.enabled": False,
    "distributed.admin.system-monitor.interval": "1s",
    "distributed.admin.tick.interval": "1s",
}
CESSGD_COMM = {"dsgd": 0, "p2p": 1, "hc": 3}    # its -c codes
OURS = ("direct", "graph")
LR, REG, RANK = 0.02, 0.1, 16


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def wait_quiet(max_load: float | None, timeout: float = 60.0) -> None:
    """Wait (at most ``timeout`` s) for a 1-minute load average below ``max_load``."""
    deadline = time.monotonic() + timeout
    while max_load and os.getloadavg()[0] > max_load and time.monotonic() < deadline:
        time.sleep(2.0)


def stats(xs) -> dict:
    xs = np.asarray(xs, float)
    if not xs.size:
        return {"median": float("nan"), "min": float("nan"), "max": float("nan"), "n": 0}
    return {"median": float(np.median(xs)), "min": float(xs.min()), "max": float(xs.max()),
            "n": int(xs.size)}


# -- inputs -----------------------------------------------------------------------------
def write_inputs(work: Path, Ks, epochs: int) -> tuple[Path, dict]:
    """The .mtx of ml-latest-small and one pair partition file per K (hp rows)."""
    from daskhpc import datasets
    from daskhpc.hypergraph import write_pair_file
    from daskhpc.ssgd import prepare

    work.mkdir(parents=True, exist_ok=True)
    data = datasets.ratings()
    mtx = work / "ml-latest-small.mtx"
    parts = {}
    for K in Ks:
        s = prepare(data, K, partition="hp", test_fraction=0.0, epochs=epochs, rank=RANK)
        if not mtx.exists():
            r = s.ratings
            with open(mtx, "w") as f:
                f.write("%%MatrixMarket matrix coordinate real general\n")
                f.write(f"{r.shape[0]} {r.shape[1]} {r.nnz}\n")
                np.savetxt(f, np.column_stack([r.rows + 1, r.cols + 1, r.vals]),
                           fmt="%d %d %.17g")
        parts[K] = work / f"ml-latest-small.k{K}.part"
        write_pair_file(parts[K], s.assignment.row_parts, s.assignment.col_blocks)
    return mtx, parts


# -- CESSGD -----------------------------------------------------------------------------
def run_cessgd(args, binary: str, K: int, strategy: str, mtx: Path, part: Path) -> dict:
    cmd = [args.mpiexec, "-n", str(K), binary, "-i", str(args.epochs), "-f", str(RANK),
           "-e", str(LR / 2), "-l", str(REG), "-c", str(CESSGD_COMM[strategy]), "-s", "0",
           "-p", str(part), str(mtx)]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    wall = time.perf_counter() - t0
    if out.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr[-2000:]}")
    return {"cmd": " ".join(cmd), "wall_s": wall, **parse_cessgd(out.stdout)}


def parse_cessgd(text: str) -> dict:
    lines = text.splitlines()
    cum = [float(m.group(4)) for m in
           (re.match(r"\[i(\d+)\] (\S+) (\S+) (\S+)", x) for x in lines) if m]
    after = {x: lines[i + 1].split() for i, x in enumerate(lines[:-1])}

    def nums(prefix):
        for head, vals in after.items():
            if head.startswith(prefix):
                return vals
        raise ValueError(f"no {prefix!r} block in CESSGD output:\n{text}")

    t = [float(v) for v in nums("SetupTime")]
    st = [int(v) for v in nums("mmMsg")[:6]]
    loss = nums("MatrixName")
    return {"epoch_ms": list(np.diff(cum)),      # epochs 1..E-1 (cum[i]: after epoch i)
            "epoch0_ms": cum[0],
            "breakdown_ms": dict(zip(("setup", "prep", "comp", "comm", "epoch"), t[:5])),
            "plan": dict(zip(("max_max_msgs", "sum_max_msgs", "tot_msgs", "max_max_vol",
                              "sum_max_vol", "tot_vol"), st)),
            "init_loss": float(loss[4]), "final_loss": float(loss[5])}


# -- ours -------------------------------------------------------------------------------
def run_ours(client, K: int, strategy: str, exchange: str, part: Path, epochs: int,
             shuffle: bool = True) -> dict:
    from daskhpc import datasets, ssgd

    res = ssgd.fit(datasets.ratings(), K, client=client, strategy=strategy,
                   partition_file=str(part), epochs=epochs, test_fraction=0.0,
                   eval_every=0, lr=LR, reg=REG, rank=RANK, exchange=exchange,
                   shuffle=shuffle, progress=False)
    rep = res.report()
    m = rep["measured"]
    return {"epoch_ms": [1000 * h["time_s"] for h in res.history[1:]],
            "epoch0_ms": 1000 * res.history[0]["time_s"], "run_s": rep["timing"]["run_s"],
            "exchange": rep["execution"]["exchange"], "final_loss": rep["quality"]["final_objective"],
            "planned_bytes": m.get("planned_bytes"),
            "measured_bytes": m.get("inter_worker_bytes")}


def our_plan(K: int, strategy: str, part: Path) -> dict:
    from daskhpc import datasets, ssgd

    p = ssgd.plan(datasets.ratings(), K, strategy=strategy, partition_file=str(part),
                  test_fraction=0.0, rank=RANK)["plan"]
    return {k: p[k] for k in ("max_max_msgs", "sum_max_msgs", "tot_msgs", "max_max_vol",
                              "sum_max_vol", "tot_vol")}


def worker_cpu(client) -> float:
    """CPU seconds used so far by the cluster's worker processes (idle during CESSGD)."""
    import psutil

    pids = client.run(os.getpid).values()
    return sum(sum(psutil.Process(p).cpu_times()[:2]) for p in pids)


def pairs(args, K: int, mtx: Path, part: Path, log=None) -> list[dict]:
    """The alternating runs of one K; every row is also appended to ``log`` (JSON lines).

    A run that fails (e.g. the scheduler dropping all workers of a 2-core machine at load
    15) is recorded with its ``error``, the cluster is re-created and the next run goes
    on; the summary pairs only runs that completed.
    """
    import contextlib

    import dask

    from daskhpc.runtime import connect

    peers = cessgd_sides(args)
    sides = [*OURS, *peers]
    todo = [(r, st, side) for r in range(args.repeats) for st in args.strategies
            # rotate who goes first so no side always follows the same one
            for side in sides[r % len(sides):] + sides[:r % len(sides)]]
    rows = []
    while todo:
        with contextlib.ExitStack() as stack:
            stack.enter_context(dask.config.set(QUIET))
            client = stack.enter_context(connect(n_workers=K, dashboard_address=":0",
                                                 config=QUIET))
            for ex in OURS:                               # compile, caches, connections
                run_ours(client, K, "hc", ex, part, 2, not args.no_shuffle)
            if not rows:
                for binary in peers.values():
                    run_cessgd(args, binary, K, "hc", mtx, part)
            while todo:
                r, st, side = todo.pop(0)
                wait_quiet(args.max_load, args.load_timeout)
                before = load()
                row = {"K": K, "strategy": st, "side": side, "repeat": r,
                       "load_before": before, "time": time.strftime("%H:%M:%S")}
                try:
                    if side in peers:
                        cpu0 = worker_cpu(client)
                        got = run_cessgd(args, peers[side], K, st, mtx, part)
                        got["idle_workers_cpu_s"] = worker_cpu(client) - cpu0
                    else:
                        got = run_ours(client, K, st, side, part, args.epochs,
                                       not args.no_shuffle)
                except Exception as exc:                  # noqa: BLE001 - keep the run
                    row.update(error=f"{type(exc).__name__}: {exc}", load_after=load())
                    got = None
                else:
                    row.update(load_after=load(), **got,
                               median_epoch_ms=float(np.median(got["epoch_ms"])))
                print(json.dumps({k: v for k, v in row.items() if k != "epoch_ms"}),
                      flush=True)
                rows.append(row)
                if log is not None:
                    with open(log, "a") as f:
                        f.write(json.dumps(row) + "\n")
                if got is None and side not in peers:
                    break                                 # re-create the cluster
    return rows


def cessgd_sides(args) -> dict:
    """``{side: binary}``: CESSGD as published, and its build with ``-DNO_SHUFFLE``."""
    out = {"cessgd": args.cessgd}
    if args.cessgd_noshuffle:
        out["cessgd-noshuffle"] = args.cessgd_noshuffle
    return out


def summarise(rows: list[dict], Ks, strategies, peers) -> list[dict]:
    """Per (K, strategy): every side's epoch times pooled over the repeats (median, min,
    max) and its run medians; per pair (same repeat) the ratio of run medians ours/peer."""
    out = []
    for K in Ks:
        for st in strategies:
            got = {side: [r for r in rows if r["K"] == K and r["strategy"] == st
                          and r["side"] == side and "error" not in r]
                   for side in (*OURS, *peers)}
            row = {"K": K, "strategy": st}
            for side, rs in got.items():
                row[side] = stats([x for r in rs for x in r["epoch_ms"]])
                row[side]["run_medians"] = [r["median_epoch_ms"] for r in rs]
            for peer in peers:
                c = {r["repeat"]: r["median_epoch_ms"] for r in got[peer]}
                for side in OURS:
                    ratio = [r["median_epoch_ms"] / c[r["repeat"]] for r in got[side]
                             if r["repeat"] in c]
                    row[f"{side}/{peer}"] = stats(ratio)
                comp = [r["breakdown_ms"] for r in got[peer]]
                row[f"{peer}_breakdown_ms"] = {k: float(np.median([b[k] for b in comp]))
                                               for k in (comp[0] if comp else ())}
            row["final_loss"] = {side: float(np.median([r["final_loss"] for r in rs]))
                                 for side, rs in got.items()}
            out.append(row)
    return out


# -- per-message cost -------------------------------------------------------------------
def calibration(args) -> dict:
    import dask

    from daskhpc.runtime import calibrate_exchange, connect

    got = {ex: [] for ex in OURS}
    with dask.config.set(QUIET), connect(n_workers=2, dashboard_address=":0",
                                         config=QUIET) as client:
        for ex in OURS:                                   # warm-up
            calibrate_exchange(client, ex, sizes=(1024,), steps=args.steps)
        for r in range(args.calibrate_repeats):
            for ex in (OURS if r % 2 == 0 else OURS[::-1]):
                wait_quiet(args.max_load, args.load_timeout)
                c = calibrate_exchange(client, ex, sizes=(1024,), steps=args.steps)
                got[ex].append(c["samples"][0]["seconds"])
                print(json.dumps({"calibrate": ex, "repeat": r, "load": load(),
                                  "ms_per_message": 1000 * got[ex][-1]}), flush=True)
    ratio = [g / d for g, d in zip(got["graph"], got["direct"])]
    return {"bytes": 1024, "steps": args.steps,
            **{f"{ex}_ms": stats(1000 * np.array(v)) for ex, v in got.items()},
            "graph/direct": stats(ratio), "per_repeat": ratio, "graph/direct_of_medians":
            float(np.median(got["graph"]) / np.median(got["direct"]))}


def markdown(out: dict) -> str:
    """Markdown tables (as in docs/benchmarks.md) from a result file (``--markdown``)."""
    def ms(d):
        return f"{d['median']:.1f} ({d['min']:.1f}-{d['max']:.1f})"

    def ratio(d):
        return f"{d['median']:.2f} ({d['min']:.2f}-{d['max']:.2f})"

    names = {"dsgd": "DSGD", "p2p": "P2P", "hc": "H&C"}
    summ = out.get("summary", [])
    peers = [k for k in ("cessgd", "cessgd-noshuffle") if summ and k in summ[0]]
    lines = []
    if summ:
        head = ["K", "strategy", "ours direct", "ours graph", *peers,
                *[f"{o}/{p}" for p in peers for o in OURS]]
        lines += ["| " + " | ".join(head) + " |", "|" + " ---: |" * len(head)]
        for r in summ:
            cells = [str(r["K"]), names[r["strategy"]], *[ms(r[s]) for s in (*OURS, *peers)],
                     *[ratio(r[f"{o}/{p}"]) for p in peers for o in OURS]]
            lines.append("| " + " | ".join(cells) + " |")
        lines += ["", ("| K | strategy | peer | comp | comm | prep | epoch | final objective "
                       "ours / peer |"), "|" + " ---: |" * 8]
        for r in summ:
            for p in peers:
                b = r[f"{p}_breakdown_ms"]
                if not b:
                    continue
                lines.append(f"| {r['K']} | {names[r['strategy']]} | {p} | {b['comp']:.1f} | "
                             f"{b['comm']:.1f} | {b['prep']:.3f} | {b['epoch']:.1f} | "
                             f"{r['final_loss']['direct']:.0f} / {r['final_loss'][p]:.0f} |")
        match = [r.get("plan_matches_ours") for r in out["runs"] if "plan_matches_ours" in r]
        lines += ["", (f"plan statistics equal ours in {sum(map(bool, match))} of {len(match)} "
                       "CESSGD runs")]
        loads = [x for r in out["runs"] for x in (r["load_before"][0], r["load_after"][0])]
        errors = [f"{r['K']}/{r['strategy']}/{r['side']}/{r['repeat']}: {r['error']}"
                  for r in out["runs"] if "error" in r]
        lines.append(f"failed runs (left out): {len(errors)}")
        lines += [f"  {e}" for e in errors]
        lines.append(f"1-min load during the pairs: median {np.median(loads):.1f}, "
                     f"min {min(loads):.1f}, max {max(loads):.1f}")
    c = out.get("calibration")
    if c:
        lines += ["", "| 1 KB message, 2 workers | graph ms | direct ms | graph / direct |",
                  "| --- | ---: | ---: | ---: |",
                  (f"| median (min-max) of {c['graph/direct']['n']} repeats | "
                   f"{ms(c['graph_ms'])} | {ms(c['direct_ms'])} | "
                   f"{ratio(c['graph/direct'])} per repeat; "
                   f"{c['graph/direct_of_medians']:.1f} of the medians |")]
        if "per_repeat" in c:
            lines.append("per repeat: " + ", ".join(f"{x:.1f}x" for x in c["per_repeat"]))
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cessgd", default="/work/peers/cessgd/src-repo/bin/cessgd")
    ap.add_argument("--cessgd-noshuffle", default="",
                    help="also time this CESSGD binary, built with -DNO_SHUFFLE")
    ap.add_argument("--mpiexec", default=str(Path(sys.executable).parent / "mpiexec"))
    ap.add_argument("--work", default="/work/peers/cessgd/run",
                    help="where the .mtx and the partition files are written")
    ap.add_argument("--no-shuffle", action="store_true",
                    help="our sweeps in stored order too (shuffle=False): the visiting "
                         "order of --cessgd-noshuffle")
    ap.add_argument("--ks", type=int, nargs="*", default=[2, 4])
    ap.add_argument("--strategies", nargs="*", default=["dsgd", "p2p", "hc"])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--calibrate-repeats", type=int, default=7)
    ap.add_argument("--steps", type=int, default=40, help="ping-pong messages per unit")
    ap.add_argument("--only", nargs="*", default=["pairs", "calibrate"])
    ap.add_argument("--max-load", type=float, default=None,
                    help="before each run wait for a 1-minute load average below this")
    ap.add_argument("--load-timeout", type=float, default=60.0,
                    help="... but at most this many seconds")
    ap.add_argument("--out", default="ssgd-cessgd.json")
    ap.add_argument("--markdown", default="",
                    help="only print the docs tables of this result file")
    a = ap.parse_args(argv)
    if a.markdown:
        with open(a.markdown) as f:
            print(markdown(json.load(f)))
        return
    out = {"machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
           "load_start": load(), "started": time.strftime("%Y-%m-%d %H:%M:%S"),
           "argv": sys.argv}
    if "pairs" in a.only:
        mtx, parts = write_inputs(Path(a.work), a.ks, a.epochs)
        out["plans"] = {f"{K}-{st}": our_plan(K, st, parts[K])
                        for K in a.ks for st in a.strategies}
        rows = []
        for K in a.ks:
            rows += pairs(a, K, mtx, parts[K], log=a.out + ".rows.jsonl")
        for r in rows:
            if r["side"] in cessgd_sides(a) and "error" not in r:
                r["plan_matches_ours"] = r["plan"] == out["plans"][f"{r['K']}-{r['strategy']}"]
        out["runs"] = rows
        out["summary"] = summarise(rows, a.ks, a.strategies, cessgd_sides(a))
        print(json.dumps(out["summary"], indent=1), flush=True)
    if "calibrate" in a.only:
        out["calibration"] = calibration(a)
        print(json.dumps(out["calibration"], indent=1), flush=True)
    out["load_end"] = load()
    out["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
