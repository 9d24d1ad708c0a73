"""The default options against scikit-learn ``SGDClassifier(loss="log_loss", max_iter=5,
tol=None)`` (seeds 0-2) on four sets: a9a / a9a.t (bundled), a9a with its positives thinned
to 3.7 % (the tests' set), an imbalanced set made here (50,000 x 300 binary features, 3 %
positives, an 80/20 split) and a high-dimensional sparse one (22,000 x 4,700 counts,
MaxAbsScaler, the first of 3 stratified folds as the test rows). Ours: ``fit_local`` with
every option at its default at P = 2 and 4 (a cluster of that many workers trains the same
model), seeds 0-2. Public API only; the sets are made as ``tests/linear/conftest.py``
makes them.

    python workflows/benchmarks/linear_accuracy.py [--out r.json]
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

import numpy as np
from report_out import write_json

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "linear"))


def sets():
    import scipy.sparse as sp
    from conftest import make_rare_binary, make_wide_sparse, thin_positives
    from sklearn.model_selection import StratifiedKFold, train_test_split
    from sklearn.preprocessing import MaxAbsScaler

    from daskhpc import datasets

    a, at = datasets.libsvm(), datasets.libsvm("test")
    Xt = sp.csr_matrix((at.matrix.data, at.matrix.indices, at.matrix.indptr),
                       shape=(at.matrix.shape[0], a.matrix.shape[1]))
    yield "a9a", a.matrix, a.labels, Xt, at.labels
    X, y = thin_positives(a.matrix, a.labels, 0)
    X2, y2 = thin_positives(Xt, at.labels, 1)
    yield "a9a, 3.7 % positives", X, y, X2, y2
    X, y = make_rare_binary()
    X, Xt, y, yt = train_test_split(X, y, test_size=0.2, random_state=0)
    yield "imbalanced 50,000 x 300, 3 %", X, y, Xt, yt
    X, y = make_wide_sparse()
    test, train = next(StratifiedKFold(3).split(X, y))[::-1]
    sc = MaxAbsScaler().fit(X[train])
    yield "sparse 22,000 x 4,700", sc.transform(X[train]), y[train], sc.transform(X[test]), \
        y[test]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="-")
    args = p.parse_args(argv)
    import scipy.sparse as sp
    from sklearn.linear_model import SGDClassifier

    import daskhpc.linear as lin

    rows = []
    for name, X, y, Xt, yt in sets():
        X, Xt = sp.csr_matrix(X), sp.csr_matrix(Xt)
        for A in (X, Xt):
            A.indices, A.indptr = A.indices.astype(np.int32), A.indptr.astype(np.int32)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sk = [SGDClassifier(loss="log_loss", max_iter=5, tol=None, random_state=s)
                  .fit(X, y).score(Xt, yt) for s in range(3)]
        row = {"set": name, "sklearn": float(np.mean(sk))}
        for P in (2, 4):
            runs = [lin.fit_local(X, y, nparts=P, seed=s, test=(Xt, yt)) for s in range(3)]
            row[f"P{P}"] = float(np.mean([r.history[-1]["test_accuracy"] for r in runs]))
            row[f"P{P}_batch"] = runs[0].report()["options"]["batch"]
        rows.append(row)
        print(f"{name}: sklearn {row['sklearn']:.4f}, P = 2 (B = {row['P2_batch']}) "
              f"{row['P2']:.4f}, P = 4 (B = {row['P4_batch']}) {row['P4']:.4f}", flush=True)
    write_json({"rows": rows}, args.out)


if __name__ == "__main__":
    main()
