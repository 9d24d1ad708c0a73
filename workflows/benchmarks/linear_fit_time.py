"""The in-process estimator's fit time against scikit-learn's on a9a, through the public
API: ``daskhpc.linear.SGDClassifier()`` (no client, every option at its default: 5 epochs)
and scikit-learn ``SGDClassifier(loss="log_loss", max_iter=5, tol=None)`` on the same
32-bit index CSR matrix, one warm-up fit each, then ``--repeats`` fits alternating; the
medians, their ratio and both test accuracies.

    python workflows/benchmarks/linear_fit_time.py [--repeats 5] [--out r.json]

Run it in a fresh process (the warm-up loads the compiled epoch from numba's cache).
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import numpy as np
from report_out import write_json


def _csr32(A):
    import scipy.sparse as sp

    A = sp.csr_matrix(A)
    A.indices, A.indptr = A.indices.astype(np.int32), A.indptr.astype(np.int32)
    return A


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--out", default="-")
    args = p.parse_args(argv)

    import scipy.sparse as sp
    from sklearn.linear_model import SGDClassifier as SkSGD

    import daskhpc.linear as lin
    from daskhpc import datasets

    tr, te = datasets.libsvm(), datasets.libsvm("test")
    X, y = _csr32(tr.matrix), tr.labels
    Xt = _csr32(sp.csr_matrix((te.matrix.data, te.matrix.indices, te.matrix.indptr),
                              shape=(te.matrix.shape[0], X.shape[1])))
    makers = {"daskhpc": lambda: lin.SGDClassifier(),
              "sklearn": lambda: SkSGD(loss="log_loss", max_iter=5, tol=None,
                                       random_state=0)}
    times = {k: [] for k in makers}
    acc = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")               # sklearn's ConvergenceWarning
        for k, make in makers.items():                # warm-up (numba's cache, imports)
            acc[k] = float(make().fit(X, y).score(Xt, te.labels))
        for _ in range(args.repeats):
            for k, make in makers.items():            # alternating: the same load
                t0 = time.perf_counter()
                make().fit(X, y)
                times[k].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    out = {"data": "a9a / a9a.t (bundled)", "repeats": args.repeats,
           "fit_s": {k: [round(t, 5) for t in v] for k, v in times.items()},
           "median_fit_s": {k: round(v, 5) for k, v in med.items()},
           "ratio": round(med["daskhpc"] / med["sklearn"], 3),
           "test_accuracy": acc}
    print(f"a9a, 5 epochs, median of {args.repeats}: daskhpc {med['daskhpc'] * 1e3:.1f} ms, "
          f"sklearn {med['sklearn'] * 1e3:.1f} ms, ratio {out['ratio']:.2f}x; test accuracy "
          f"{acc['daskhpc']:.4f} vs {acc['sklearn']:.4f}")
    write_json(out, args.out)


if __name__ == "__main__":
    main()
