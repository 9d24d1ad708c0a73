"""Linear classifiers benchmark: data-parallel SGD on a9a with the sparse allreduce, on a
Dask cluster, next to the same Program in one process and sklearn's SGDClassifier.

Run it alone on the machine (timings are sensitive to other load)::

    flock /tmp/daskhpc-bench.lock python workflows/benchmarks/linear.py --out lin.json

Sections (``--only`` picks some):

epochs     a9a (train) / a9a.t (test), P = 4 parts on 4 workers, logistic loss: seconds
           per epoch and bytes per epoch (sent by the parts, and measured between
           workers) for batch sizes B = 8, 64, 512 (B = 8 and 64 in both exchange
           modes of the runtime, direct and graph), allreduce ``auto`` and
           ``dense_rabenseifner``, Top-k (k = 12) with and without error feedback;
           ``fit_local`` (the same Program in one process) per epoch beside it
sklearn    SGDClassifier (log_loss and hinge, max_iter = epochs, tol=None) on the same
           files: fit time and test accuracy, seeds 0-4
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np
from report_out import write_json


def epochs(args, out):
    import daskhpc as dh
    import daskhpc.linear as lin
    from daskhpc import datasets

    tr, te = datasets.libsvm(), datasets.libsvm("test")
    client = dh.connect(n_workers=4)
    rows = []
    runs = [(8, {}, 1), (8, {"exchange": "graph"}, 1), (64, {}, 2),
            (64, {"exchange": "graph"}, 2), (512, {}, 3),
            (64, {"allreduce": "dense_rabenseifner"}, 2),
            (64, {"topk": 12}, 2), (64, {"topk": 12, "error_feedback": False}, 2)]
    for B, kw, n in runs:
        t0 = time.perf_counter()
        r = lin.fit(tr, nparts=4, batch=B, epochs=n, test=te, client=client, **kw)
        wall = time.perf_counter() - t0
        loc = lin.fit_local(tr, nparts=4, batch=B, epochs=n, test=te,
                            **{k: v for k, v in kw.items() if k != "exchange"})
        rep = r.report()
        h = r.history[-1]
        row = {"B": B, **kw, "exchange": rep["execution"]["exchange"], "epochs": n, "calls_per_epoch": rep["steps"]["iterations_per_epoch"],
               "algorithms": rep["plan"]["algorithms"],
               "steps_per_epoch": rep["plan"]["steps_per_epoch"],
               "epoch_s": [x["time_s"] for x in r.history], "wall_s": wall,
               "ms_per_step": 1e3 * float(np.median([x["time_s"] for x in r.history])) /
               rep["plan"]["steps_per_epoch"],
               "local_epoch_s": [x["time_s"] for x in loc.history],
               "sent_bytes_per_epoch": h["sent_bytes"], "planned_bytes": h["planned_bytes"],
               "measured_bytes": h["measured_bytes"],
               "framing_bytes_per_message": rep["measured"].get("framing_bytes_per_message"),
               "test_accuracy": h["test_accuracy"],
               "identical_to_fit_local": bool(np.array_equal(r.w, loc.w))}
        rows.append(row)
        print(json.dumps(row))
    client.close()
    out["epochs"] = rows


def sklearn(args, out):
    import scipy.sparse as sp
    from sklearn.linear_model import SGDClassifier

    from daskhpc import datasets

    tr, te = datasets.libsvm(), datasets.libsvm("test")

    def csr32(A, width):
        A = sp.csr_matrix(A)
        A = sp.csr_matrix((A.data, A.indices.astype(np.int32), A.indptr.astype(np.int32)),
                          shape=(A.shape[0], width))
        return A

    X, Xt = csr32(tr.matrix, tr.matrix.shape[1]), csr32(te.matrix, tr.matrix.shape[1])
    rows = []
    for loss in ("log_loss", "hinge"):
        for n in (1, 5):
            acc, ts = [], []
            for seed in range(5):
                import warnings

                m = SGDClassifier(loss=loss, max_iter=n, tol=None, random_state=seed)
                t0 = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    m.fit(X, tr.labels)
                ts.append(time.perf_counter() - t0)
                acc.append(float(m.score(Xt, te.labels)))
            rows.append({"loss": loss, "epochs": n, "fit_s_median": float(np.median(ts)),
                         "test_accuracy": acc})
            print(json.dumps(rows[-1]))
    out["sklearn"] = rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="-")
    p.add_argument("--only", nargs="*", default=["epochs", "sklearn"])
    args = p.parse_args(argv)
    out = {"argv": sys.argv, "load_before": os.getloadavg()}
    for name in args.only:
        globals()[name](args, out)
    out["load_after"] = os.getloadavg()
    write_json(out, args.out)


if __name__ == "__main__":
    main()
