"""Where a unit's time goes, per workflow, on 1 and 2 workers.

::

    OPENBLAS_NUM_THREADS=1 DASKHPC_SHARED_DATA=<data> \\
        python workflows/benchmarks/step_split.py [--rounds 3] [--out split.json]

Each workflow runs ``--rounds`` fits on one 2-worker LocalCluster (one thread per
worker): with one part (one worker: the serial kernels in one loop) and with two parts
(one per worker, the direct exchange), alternating. From each fit's report, through the
public API only:

unit       the median unit (epoch, iteration) after the first (``history[i]["time_s"]``)
compute    per unit, the busiest worker's seconds in its step functions (with reports and
           checkpoints)                        (``execution["steps"]``)
wait       per unit, its wait for the other worker's messages (the same)
send       per unit, its writing of its own messages (the same)
others     per unit, the other worker's wait
own        the run's own cost: ``run_s`` minus the sum of the units' times

Medians over the rounds are printed with the 1-minute load at the start and end.

ssgd      DSGD on the bundled ml-latest-small, F = 16, ``--epochs`` epochs, no test split
cpals     CP-ALS R = 16 on the bundled UMLS tensor, ``--iters`` iterations, tol 0
gcn-cora  GCN on the bundled Cora, ``--epochs`` epochs, no evaluation
gcn-fb    GCN on facebook_page_page (``graphs/`` under ``--data``; skipped without it)
linear    logistic regression on the bundled a9a sample, 2 epochs
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

from report_out import write_json

DATA = os.environ.get("DASKHPC_SHARED_DATA")
SECTIONS = ("ssgd", "cpals", "gcn-cora", "gcn-fb", "linear")


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def _say(*parts) -> None:
    print(*parts, file=sys.stderr, flush=True)


def fitter(name: str, client, args):
    """``fit(nparts) -> result`` of one section, or None when its data is missing."""
    import daskhpc as dh

    if name == "ssgd":
        R = dh.datasets.ratings()
        return lambda K: dh.ssgd.fit(R, K, strategy="dsgd", epochs=args.epochs, eval_every=0,
                                     test_fraction=0, client=client, progress=False)
    if name == "cpals":
        X = dh.datasets.tensor()
        return lambda K: dh.cpals.fit(X, 16, nparts=K, iters=args.iters, tol=0,
                                      client=client, progress=False)
    if name in ("gcn-cora", "gcn-fb"):
        graph = "cora"
        if name == "gcn-fb":
            if not args.data or not (Path(args.data) / "graphs" / "facebook_page_page").exists():
                return None
            graph = str(Path(args.data) / "graphs" / "facebook_page_page")
        return lambda K: dh.gcn.fit(graph, nparts=K, epochs=args.epochs, eval_every=0,
                                    client=client, progress=False)
    if name == "linear":
        data = dh.datasets.libsvm()
        return lambda K: dh.linear.fit(data, nparts=K, epochs=2, client=client,
                                       progress=False)
    raise ValueError(name)


def figures(res) -> dict:
    """A fit's unit, the busiest worker's split, the others' wait and the run's own cost
    (ms; the module docstring)."""
    rep = res.report()
    times = [h["time_s"] for h in res.history]
    unit = statistics.median(times[1:] if len(times) > 1 else times)
    out = {"unit": 1e3 * unit,
           "own": 1e3 * (rep["timing"]["run_s"] - sum(times))}
    sp = rep.get("execution", {}).get("steps")
    if sp and sp.get("units"):
        n = sp["units"]
        per = list(sp["per_worker"].values())
        busy = max(per, key=lambda v: v["compute_s"] + (v["send_s"] or 0.0))
        out.update(compute=1e3 * busy["compute_s"] / n,
                   wait=1e3 * (busy["wait_s"] or 0.0) / n,
                   send=1e3 * (busy["send_s"] or 0.0) / n,
                   others=max([1e3 * (v["wait_s"] or 0.0) / n for v in per
                               if v is not busy] or [0.0]))
    return out


def section(name: str, client, args) -> dict | None:
    fit = fitter(name, client, args)
    if fit is None:
        _say(f"{name}: skipped (no data)")
        return None
    fit(1), fit(2)                                                     # warm-up
    got: dict = {1: [], 2: []}
    load = [_load()]
    for r in range(args.rounds):
        for K in ((1, 2) if r % 2 == 0 else (2, 1)):
            got[K].append(figures(fit(K)))
    load.append(_load())
    row = {"load": load}
    for K, runs in got.items():
        row[f"{K}w"] = {k: round(statistics.median(r[k] for r in runs), 3)
                        for k in runs[0]}
    row["2w_over_1w"] = round(row["1w"]["unit"] / row["2w"]["unit"], 3)
    _say(f"{name}: " + "; ".join(
        f"{K}: " + ", ".join(f"{k} {v:.2f}" for k, v in row[K].items())
        for K in ("1w", "2w")) + f"; 1w/2w {row['2w_over_1w']}; load {load}")
    return row


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", nargs="*", choices=SECTIONS, default=list(SECTIONS))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--data", default=DATA)
    p.add_argument("--out", default="-")
    args = p.parse_args(argv)
    import daskhpc as dh

    out = {}
    with dh.connect(n_workers=2, threads_per_worker=1) as client:
        for name in args.only:
            out[name] = section(name, client, args)
    write_json(out, args.out)


if __name__ == "__main__":
    main()
