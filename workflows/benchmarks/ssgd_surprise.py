"""Biased and unbiased SSGD against Surprise's SVD: test RMSE on ml-latest-small.

One seeded 90/10 split of the ratings (``numpy.random.default_rng(seed).permutation``,
the first tenth held out); every model trains on the same 90 % with the same epochs and
factors and predicts the same 10 %, unknown users/items included (each library's own
rule for them). Only public APIs: ``daskhpc.ssgd.MatrixFactorization`` and Surprise's
``SVD`` (``pip install scikit-surprise``; without it the Surprise rows are skipped).

    python workflows/benchmarks/ssgd_surprise.py --factors 100 50 --out ssgd-surprise.json

``--workers 2`` adds the biased model fitted on a 2-worker LocalCluster (K = 2, H&C):
the same algorithm on two parts (another update order than one part, so slightly other
numbers). Results and the command are in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np


def read(path):
    import pandas as pd

    df = pd.read_csv(path)
    return df[df.columns[:3]].copy()


def split(df, seed: int, fraction: float = 0.1):
    perm = np.random.default_rng(seed).permutation(len(df))
    n = int(len(df) * fraction)
    return df.iloc[perm[n:]], df.iloc[perm[:n]]


def rmse(pred, truth) -> float:
    return float(np.sqrt(np.mean((np.asarray(pred) - np.asarray(truth)) ** 2)))


def run_ssgd(train, test, factors, epochs, biased, client=None, nparts=None):
    from daskhpc.ssgd import MatrixFactorization

    t0 = time.perf_counter()
    mf = MatrixFactorization(n_factors=factors, epochs=epochs, biased=biased, client=client,
                             nparts=nparts).fit(train)
    fit_s = time.perf_counter() - t0
    pred = mf.predict(test.iloc[:, :2])
    return {"model": ("ssgd biased" if biased else "ssgd unbiased") +
            (f" K={nparts} on {nparts} workers" if client is not None else ""),
            "factors": factors, "epochs": epochs, "lr": mf.lr, "reg": mf.reg,
            "test_rmse": rmse(pred, test.iloc[:, 2]), "fit_s": round(fit_s, 2)}


def run_surprise(train, test, factors, epochs, lo, hi, seed):
    from surprise import SVD, Dataset, Reader

    t0 = time.perf_counter()
    data = Dataset.load_from_df(train, Reader(rating_scale=(lo, hi)))
    algo = SVD(n_factors=factors, n_epochs=epochs, random_state=seed)
    algo.fit(data.build_full_trainset())
    fit_s = time.perf_counter() - t0
    pred = [algo.predict(u, i).est for u, i in zip(test.iloc[:, 0], test.iloc[:, 1])]
    return {"model": "surprise SVD", "factors": factors, "epochs": epochs,
            "lr": algo.lr_bu, "reg": algo.reg_bu, "test_rmse": rmse(pred, test.iloc[:, 2]),
            "fit_s": round(fit_s, 2)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", help="ratings CSV (userId,movieId,rating,...; default: the "
                                   "bundled ml-latest-small)")
    ap.add_argument("--factors", type=int, nargs="+", default=[100, 50])
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0, help="seed of the 90/10 split")
    ap.add_argument("--workers", type=int, default=0,
                    help="also fit the biased model on a LocalCluster of this many workers")
    ap.add_argument("--out", help="write the results as JSON here")
    args = ap.parse_args(argv)
    import daskhpc as dh

    df = read(args.data or dh.datasets.path("ratings"))
    train, test = split(df, args.seed)
    lo, hi = float(train.iloc[:, 2].min()), float(train.iloc[:, 2].max())
    rows = []
    try:
        import surprise  # noqa: F401
        have_surprise = True
    except ImportError:
        have_surprise = False
        print("scikit-surprise is not installed: its rows are skipped", file=sys.stderr)
    client = dh.connect(n_workers=args.workers) if args.workers else None
    try:
        for F in args.factors:
            start = len(rows)
            if have_surprise:
                rows.append(run_surprise(train, test, F, args.epochs, lo, hi, args.seed))
            rows.append(run_ssgd(train, test, F, args.epochs, True))
            rows.append(run_ssgd(train, test, F, args.epochs, False))
            if client is not None:
                rows.append(run_ssgd(train, test, F, args.epochs, True, client, args.workers))
            for r in rows[start:]:
                print(f"{r['model']:<32} F={r['factors']:<4} test RMSE {r['test_rmse']:.4f}  "
                      f"fit {r['fit_s']:6.1f} s", flush=True)
    finally:
        if client is not None:
            client.close()
    out = {"data": os.path.basename(str(args.data or "ml-latest-small")),
           "train": len(train), "test": len(test), "split_seed": args.seed,
           "load": os.getloadavg(), "results": rows}
    for F in args.factors:
        ref = [r["test_rmse"] for r in rows if r["model"] == "surprise SVD" and r["factors"] == F]
        ours = [r["test_rmse"] for r in rows if r["model"] == "ssgd biased" and r["factors"] == F]
        if ref and ours:
            out.setdefault("biased_vs_surprise", {})[str(F)] = ours[0] / ref[0] - 1.0
            print(f"F={F}: biased SSGD test RMSE {100 * (ours[0] / ref[0] - 1):+.2f} % vs "
                  "Surprise SVD")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
