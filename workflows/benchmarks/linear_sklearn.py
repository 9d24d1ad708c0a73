"""Linear classifiers against scikit-learn on a9a: test accuracy and the time to it, side by
side in one run. Public API only.

    python workflows/benchmarks/linear_sklearn.py --data DIR [--workers 2] [--out r.json]

``DIR`` holds the LIBSVM files ``a9a`` and ``a9a.t`` (or a ``libsvm/`` directory with
them). Rows (each fit timed on its own; sklearn runs get 32-bit index CSR, ours the same
matrices):

* ours, ``daskhpc.linear.SGDClassifier()`` (every option at its default: log loss, L2,
  alpha 1e-4, the ``optimal`` schedule, 5 epochs, B = 8, 4 parts; no client: in this
  process), and ``daskhpc.linear.LogisticRegression()`` (C = 1, 10 epochs), with the
  test accuracy after every epoch of the same run through ``daskhpc.linear.fit_local``;
* with ``--workers W``: ``daskhpc.linear.fit`` with the defaults on a W-worker
  LocalCluster (one part per worker), the wall time of the run;
* sklearn ``SGDClassifier(loss="log_loss", max_iter=5, tol=None)`` over seeds 0-2 (the
  setting of the tests), its default ``SGDClassifier(loss="log_loss")`` (max_iter 1000,
  tol 1e-3) and ``LogisticRegression()`` (lbfgs, C = 1).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import numpy as np
from report_out import write_json


def _files(data: str):
    for d in (data, os.path.join(data, "libsvm")):
        if os.path.exists(os.path.join(d, "a9a")) and os.path.exists(os.path.join(d, "a9a.t")):
            return os.path.join(d, "a9a"), os.path.join(d, "a9a.t")
    sys.exit(f"{data}: no a9a and a9a.t (nor libsvm/a9a and libsvm/a9a.t)")


def _timed(fit, score):
    t0 = time.perf_counter()
    model = fit()
    return {"fit_s": round(time.perf_counter() - t0, 3), "test_accuracy": float(score(model))}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, help="directory with a9a and a9a.t")
    p.add_argument("--workers", type=int, default=0, help="also train on a cluster")
    p.add_argument("--out", default="-")
    args = p.parse_args(argv)

    import scipy.sparse as sp
    from sklearn import linear_model as sk

    import daskhpc.linear as lin
    from daskhpc.io import read

    train, test = _files(args.data)
    tr, te = read(train, format="libsvm"), read(test, format="libsvm")
    F = tr.matrix.shape[1]
    Xt = sp.csr_matrix((te.matrix.data, te.matrix.indices, te.matrix.indptr),
                       shape=(te.matrix.shape[0], F))

    def csr32(A):
        A = sp.csr_matrix(A)
        A.indices, A.indptr = A.indices.astype(np.int32), A.indptr.astype(np.int32)
        return A

    X, Xt = csr32(tr.matrix), csr32(Xt)
    y, yt = tr.labels, te.labels
    rows = []
    lin.SGDClassifier(max_iter=1).fit(X[:64], y[:64])       # numba kernels loaded once
    rows.append({"run": "ours SGDClassifier() (defaults, no client)",
                 **_timed(lambda: lin.SGDClassifier().fit(X, y), lambda m: m.score(Xt, yt))})
    rows.append({"run": "ours LogisticRegression() (C=1, 10 epochs, no client)",
                 **_timed(lambda: lin.LogisticRegression().fit(X, y),
                          lambda m: m.score(Xt, yt))})
    local = lin.fit_local(X, y, test=(Xt, yt))
    rows.append({"run": "ours fit_local (defaults; per epoch)",
                 "fit_s": round(sum(h["time_s"] for h in local.history), 3),
                 "test_accuracy": local.history[-1]["test_accuracy"],
                 "per_epoch": [round(h["test_accuracy"], 4) for h in local.history]})
    if args.workers:
        import daskhpc as dh

        with dh.connect(n_workers=args.workers) as client:
            r = lin.fit(X, y, test=(Xt, yt), client=client, progress=False)
            rows.append({"run": f"ours fit on {args.workers} workers (defaults)",
                         "fit_s": round(r.report()["timing"]["run_s"], 3),
                         "test_accuracy": r.history[-1]["test_accuracy"],
                         "per_epoch": [round(h["test_accuracy"], 4) for h in r.history]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                       # ConvergenceWarning
        runs = [_timed(lambda s=s: sk.SGDClassifier(loss="log_loss", max_iter=5, tol=None,
                                                    random_state=s).fit(X, y),
                       lambda m: m.score(Xt, yt)) for s in range(3)]
        rows.append({"run": "sklearn SGDClassifier(log_loss, max_iter=5, tol=None), seeds 0-2",
                     "fit_s": round(float(np.mean([r["fit_s"] for r in runs])), 3),
                     "test_accuracy": float(np.mean([r["test_accuracy"] for r in runs])),
                     "per_seed": [round(r["test_accuracy"], 4) for r in runs]})
        rows.append({"run": "sklearn SGDClassifier(log_loss) (max_iter=1000, tol=1e-3)",
                     **_timed(lambda: sk.SGDClassifier(loss="log_loss", random_state=0)
                              .fit(X, y), lambda m: m.score(Xt, yt))})
        rows.append({"run": "sklearn LogisticRegression() (lbfgs, C=1)",
                     **_timed(lambda: sk.LogisticRegression(max_iter=1000).fit(X, y),
                              lambda m: m.score(Xt, yt))})
    out = {"data": {"train": train, "test": test, "shape": list(X.shape)},
           "load": os.getloadavg(), "rows": rows}
    for r in rows:
        print(f"{r['run']:<66} {r['test_accuracy']:.4f} {r['fit_s']:>8.2f} s",
              file=sys.stderr)
    write_json(out, args.out)


if __name__ == "__main__":
    main()
