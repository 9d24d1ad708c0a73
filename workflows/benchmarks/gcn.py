"""GCN epoch time: daskhpc.gcn's serial epoch against PyG (1 thread), and 2 Dask workers
against our serial epoch, side by side in one run.

Usage (from the repository root; PyG lives in a separate venv, never a daskhpc dependency):

    python3 -m venv /work/bench-venv
    /work/bench-venv/bin/pip install torch==2.13.0 torch_geometric
    .venv/bin/python workflows/benchmarks/gcn.py [--epochs 200] \
        [--peer-python /work/bench-venv/bin/python]
    .venv/bin/python workflows/benchmarks/gcn.py --cluster [--epochs 30] [--repeats 3]

``--cluster``: per graph (Facebook page-page; soc-Slashdot0902 with 64 seeded random
features) our serial training epoch and the distributed one (K = 2 parts, HP rows, on a
LocalCluster of 2 single-threaded workers; messages pushed directly, and as task
results), alternated ``--repeats`` times in one process (the machine is shared:
alternating keeps the comparison fair), each the median of its epochs after the first;
and, to read them: the program's steps per epoch, the kit's floor per step in the graph
exchange (the frame's toy program: a ring exchange and an allreduce of 100 words, no
work), where each worker's epoch went (the report's ``execution["steps"]``: compute,
wait and send ms per epoch, per repeat), the K = 2 compute critical path (per step the
slower part's compute, measured part by part in-process: the epoch on two idle cores at
no cost per step), and the cores the machine gave two compute-bound processes at that
moment.

Both sides train the same 2-layer GCN (16 hidden, dropout 0.5, Adam lr 0.01, weight decay
5e-4 on layer 1, row-normalised sparse features, 200 epochs) on the same graph, split and
normalisation; the time of a training epoch (forward, backward, optimiser step; no
evaluation pass) is the median over the epochs after the first (compilation, caches).
Our side also reports the epoch with the evaluation pass (eval_every=1) and the test
accuracy both reach. Results: docs/benchmarks.md, "GCN".
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numba
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data" / "graphs"

PYG = r'''
import json, sys, time
import numpy as np, torch
import torch.nn.functional as F
from torch_geometric.nn import GCNConv
torch.set_num_threads(1)
z = np.load(sys.argv[1])
epochs = int(sys.argv[2])
n = int(z["n"])
ei = torch.tensor(np.stack([z["col"], z["row"]]), dtype=torch.long)   # j -> i for a_ij
X = torch.sparse_coo_tensor(np.stack([z["xr"], z["xc"]]), z["xv"], (n, int(z["f"]))).float()
X = X.coalesce() if sys.argv[3] == "sparse" else X.to_dense()
y = torch.tensor(z["y"])
tr, te = torch.tensor(z["train"]), torch.tensor(z["test"])
class GCN(torch.nn.Module):
    def __init__(s, i, h, o):
        super().__init__()
        s.conv1, s.conv2 = GCNConv(i, h, cached=True), GCNConv(h, o, cached=True)
    def forward(s, x, e):
        if x.is_sparse:     # F.dropout refuses sparse tensors: drop stored values
            x = torch.sparse_coo_tensor(x.indices(), F.dropout(x.values(), p=0.5,
                                        training=s.training), x.shape)
        else:
            x = F.dropout(x, p=0.5, training=s.training)
        x = s.conv1(x, e).relu()
        x = F.dropout(x, p=0.5, training=s.training)
        return s.conv2(x, e)
torch.manual_seed(0)
m = GCN(X.shape[1], 16, int(y.max()) + 1)
opt = torch.optim.Adam([dict(params=m.conv1.parameters(), weight_decay=5e-4),
                        dict(params=m.conv2.parameters(), weight_decay=0)], lr=0.01)
times = []
for ep in range(epochs):
    t0 = time.perf_counter()
    m.train(); opt.zero_grad()
    out = m(X, ei)
    loss = F.cross_entropy(out[tr], y[tr]); loss.backward(); opt.step()
    times.append(time.perf_counter() - t0)
m.eval()
acc = float((m(X, ei).argmax(1)[te] == y[te]).float().mean())
print(json.dumps({"epoch_ms": 1000 * float(np.median(times[1:])), "test_acc": acc,
                  "torch": torch.__version__}))
'''


def export(g, path):
    """The graph as arrays the PyG side reads (the raw pattern; GCNConv normalises)."""
    A = g.A.tocoo()
    X = g.X.tocoo()
    np.savez(path, n=g.n, row=A.row, col=A.col, xr=X.row, xc=X.col, xv=X.data,
             f=g.X.shape[1], y=g.y, train=np.flatnonzero(g.masks["train"]),
             test=np.flatnonzero(g.masks["test"]))


def ours(source, epochs, eval_every):
    from daskhpc.gcn import prepare, serial_fit

    g = prepare(source, 1, partition="rp", epochs=1).graph   # read once: PyG gets it too
    res = serial_fit(g, epochs=epochs, eval_every=eval_every)
    t = [h["time_s"] for h in res.history]
    return g, {"epoch_ms": 1000 * float(np.median(t[1:])),
               "test_acc": res.info["quality"]["final_test_acc"]}


GRAPHS = {"facebook": str(DATA / "facebook_page_page"),
          "slashdot": str(DATA / "soc-Slashdot0902.txt.gz")}


def _split_ms(rep) -> dict | None:
    """Per worker, per epoch: its steps' compute, wait and send ms (the report's
    ``execution["steps"]``; wait and send are null in the graph exchange)."""
    sp = rep["execution"].get("steps")
    if not sp:
        return None
    n = sp["units"]
    return {w[-5:]: {k[:-2]: None if v[k] is None else round(1e3 * v[k] / n, 2)
                     for k in ("compute_s", "wait_s", "send_s")}
            for w, v in sp["per_worker"].items()}


def _median_epoch(history) -> float:
    return float(np.median([h["time_s"] for h in history[1:]]))


def _floor_per_step(client, units: int = 30) -> float:
    """The kit's time per step with no work in the graph exchange: the frame's toy program
    on 2 parts."""
    import functools

    from daskhpc.runtime import Job, run_job
    from daskhpc.testing import toy_program, toy_row

    prog = functools.partial(_toy, units)
    out = run_job(client, Job("toy", 2, units, row=toy_row, program=prog, statics=[100] * 2,
                              in_loop=True, exchange="graph"), progress_bar=False)
    return _median_epoch(out.history) / toy_program(2, 1, length=100).nsteps


def _toy(units, first):
    from daskhpc.testing import toy_program

    return toy_program(2, units, length=100, first_unit=first)


@numba.njit
def _busy(n):  # pragma: no cover - numba
    s = 0.0
    for i in range(n):
        s += (i * 0.5) % 3.0
    return s


def _spin(n):
    _busy(10)
    t = time.perf_counter()
    _busy(n)
    return time.perf_counter() - t


def parallel_capacity(n: int = 30_000_000) -> float:
    """Cores this machine gives two compute-bound processes now: 2 x (time alone) / (time
    of each when both run at once); 2.0 on two idle cores."""
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(2) as ex:
        list(ex.map(_spin, [10, 10]))
        alone = ex.submit(_spin, n).result()
        both = max(ex.map(_spin, [n, n]))
    return 2 * alone / both


def critical_path(s) -> float:
    """Per epoch, the sum over the program's steps of the slowest part's compute, measured
    part by part in this process (run_local): a K-part epoch on K idle cores with no cost
    per step."""
    from collections import defaultdict
    from dataclasses import replace

    from daskhpc.comm import run_local
    from daskhpc.gcn import program, statics

    spent = defaultdict(float)

    def timed(t, fn):
        def step(ctx, *args):
            t0 = time.perf_counter()
            out = fn(ctx, *args)
            spent[t, ctx.part] = time.perf_counter() - t0
            return out
        return step

    prog = program(s)
    prog.steps = [replace(st, fn=timed(t, st.fn)) for t, st in enumerate(prog.steps)]
    run_local(prog, statics(s))
    body = range(1 + (prog.nsteps - 1 - s.L) // s.options.epochs, prog.nsteps - s.L)
    per = [max(spent[t, p] for p in range(s.K)) for t in body]   # epochs 1 .. E-1
    return float(sum(per)) / (s.options.epochs - 1)


def cluster(epochs: int, repeats: int, names, in_loop="auto",
            exchanges=("direct", "graph"), weights: str = "nnz") -> list:
    """Serial vs 2 workers per training epoch (module docstring), alternated.

    The graph is read and its rows partitioned once (``prepare``); every run below trains
    on that graph (``Setup.graph``) and, on the cluster, on those rows (a partition file).
    """
    from daskhpc.gcn import fit, prepare, serial_fit
    from daskhpc.runtime import connect

    rows = []
    with connect(n_workers=2, threads_per_worker=1) as client, \
            tempfile.TemporaryDirectory() as tmp:
        for name in names:
            s = prepare(GRAPHS[name], 2, partition="hp", epochs=epochs, eval_every=0,
                        weights=weights)
            parts = Path(tmp) / f"{name}.k2.part"
            np.savetxt(parts, s.assignment.parts, fmt="%d")
            ser, floor, ideal, cap, loads = [], [], [], [], []
            dist = {x: [] for x in exchanges}
            nbytes, steps, loop, split = {}, None, None, {}
            for _ in range(repeats):
                loads.append(os.getloadavg()[0])
                ser.append(_median_epoch(serial_fit(s.graph, epochs=epochs,
                                                    eval_every=0).history))
                for x in exchanges:
                    res = fit(s.graph, nparts=2, partition_file=str(parts), epochs=epochs,
                              eval_every=0, in_loop=in_loop, exchange=x, client=client,
                              progress=False)
                    rep = res.report()
                    dist[x].append(_median_epoch(res.history))
                    split.setdefault(x, []).append(_split_ms(rep))
                    nbytes[x] = int(rep["measured"]["inter_worker_bytes"] / epochs)
                    steps = rep["timing"]["steps_per_epoch"]
                    loop = rep["execution"]["in_loop"]
                floor.append(_floor_per_step(client))
                ideal.append(critical_path(replace(s, options=replace(s.options, epochs=5))))
                cap.append(parallel_capacity())
            g = s.graph
            row = {"graph": name, "nodes": g.n, "nnz_A_hat": int(g.A.nnz),
                   "features": int(g.X.shape[1]), "directed": not g.symmetric,
                   "weights": weights, "epochs": epochs, "repeats": repeats,
                   "serial_epoch_ms": [round(1000 * t, 1) for t in ser],
                   "serial_median_ms": round(1000 * float(np.median(ser)), 1)}
            for x in exchanges:
                row[f"k2_{x}_epoch_ms"] = [round(1000 * t, 1) for t in dist[x]]
                row[f"k2_{x}_median_ms"] = round(1000 * float(np.median(dist[x])), 1)
                row[f"speedup_{x}"] = round(float(np.median(ser) / np.median(dist[x])), 3)
                row[f"bytes_per_epoch_{x}"] = nbytes[x]
                row[f"k2_{x}_split_ms"] = split[x]
            row.update({
                "k2_compute_critical_path_ms": round(1000 * float(np.median(ideal)), 1),
                "parallel_capacity_cores": [round(c, 2) for c in cap],
                "steps_per_epoch": steps, "in_loop": bool(loop),
                "kit_graph_floor_per_step_ms": round(1000 * float(np.median(floor)), 2),
                "load_avg": [round(v, 1) for v in loads]})
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cluster", action="store_true",
                    help="2 Dask workers against our serial epoch (no PyG)")
    ap.add_argument("--graphs", default="facebook,slashdot", help="--cluster: graphs")
    ap.add_argument("--repeats", type=int, default=3, help="--cluster: alternations")
    ap.add_argument("--in-loop", choices=("auto", "yes", "no"), default="auto")
    ap.add_argument("--exchanges", default="direct,graph", help="--cluster: exchange modes")
    ap.add_argument("--weights", default="nnz", choices=("nnz", "nnz+features", "cost"),
                    help="--cluster: the partition's row weights (gcn.fit's weights=)")
    ap.add_argument("--epochs", type=int, default=None,
                    help="epochs (200; --cluster: 30)")
    ap.add_argument("--peer-epochs", type=int, default=50,
                    help="PyG epochs (its epoch time is the median of these; accuracy "
                         "needs --peer-epochs 200)")
    ap.add_argument("--peer-python", default="/work/bench-venv/bin/python")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if args.cluster:
        loop = {"auto": "auto", "yes": True, "no": False}[args.in_loop]
        rows = cluster(args.epochs or 30, args.repeats, args.graphs.split(","), loop,
                       tuple(args.exchanges.split(",")), args.weights)
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
        return rows
    args.epochs = args.epochs or 200
    rows = []
    for name, source in (("cora", "cora"), ("facebook", str(DATA / "facebook_page_page"))):
        g, train = ours(source, args.epochs, 0)
        _, with_eval = ours(source, args.epochs, 1)
        row = {"graph": name, "nodes": g.n, "nnz_A_hat": int(g.A.nnz),
               "features": int(g.X.shape[1]), "daskhpc_epoch_ms": round(train["epoch_ms"], 2),
               "daskhpc_epoch_with_eval_ms": round(with_eval["epoch_ms"], 2),
               "daskhpc_test_acc": train["test_acc"]}
        if Path(args.peer_python).exists():
            with tempfile.TemporaryDirectory() as d:
                f = Path(d) / "g.npz"
                export(g, f)
                for layout in ("sparse", "dense"):
                    res = subprocess.run([args.peer_python, "-c", PYG, str(f),
                                          str(args.peer_epochs), layout],
                                         capture_output=True, text=True,
                                         env={**os.environ, "OMP_NUM_THREADS": "1"})
                    if res.returncode:
                        row[f"pyg_{layout}_error"] = res.stderr.strip().splitlines()[-1]
                        continue
                    peer = json.loads(res.stdout.strip().splitlines()[-1])
                    row[f"pyg_{layout}_epoch_ms"] = round(peer["epoch_ms"], 2)
                    if args.peer_epochs == args.epochs:
                        row[f"pyg_{layout}_test_acc"] = peer["test_acc"]
                    row["torch"] = peer["torch"]
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return rows


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
