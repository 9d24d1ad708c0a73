"""Time to scikit-learn's accuracy on a9a, side by side in one
run. Public API only.

    python workflows/benchmarks/linear_tta.py --data DIR [--workers 2] [--rounds 10]
        [--out r.json]

``DIR`` holds the LIBSVM files ``a9a`` and ``a9a.t`` (or ``libsvm/`` with them). Each
round fits, one after the other on the same matrices (32-bit index CSR):

* scikit-learn ``SGDClassifier(loss="log_loss", max_iter=5, tol=None,
  random_state=round)``: its fit time and its 5-epoch test accuracy (the target);
* ``daskhpc.linear.fit`` with every option at its default but ``epochs`` (1, then more
  while the accuracy is below scikit-learn's mean), on a ``--workers`` LocalCluster
  started once (one part per worker; a warm-up fit first): its ``run_s``, its wall time
  from the call and its test accuracy after every epoch.

Reported per round: ours / scikit-learn by ``run_s`` and by the wall time; then their
medians, the 1-minute load at the start and the end.
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


def _matrices(data: str):
    import scipy.sparse as sp

    from daskhpc.io import read

    train, test = _files(data)
    tr, te = read(train, format="libsvm"), read(test, format="libsvm")
    F = tr.matrix.shape[1]

    def csr32(A):
        A = sp.csr_matrix(A)
        A.indices, A.indptr = A.indices.astype(np.int32), A.indptr.astype(np.int32)
        return A

    Xt = sp.csr_matrix((te.matrix.data, te.matrix.indices, te.matrix.indptr),
                       shape=(te.matrix.shape[0], F))
    return csr32(tr.matrix), tr.labels, csr32(Xt), te.labels


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, help="directory with a9a and a9a.t")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--max-epochs", type=int, default=5)
    p.add_argument("--out", default="-")
    args = p.parse_args(argv)

    from sklearn.linear_model import SGDClassifier

    import daskhpc as dh

    X, y, Xt, yt = _matrices(args.data)
    load0 = os.getloadavg()[0]
    rounds = []
    with dh.connect(n_workers=args.workers) as client:
        dh.linear.fit(X, y, test=(Xt, yt), epochs=1, client=client, progress=False)
        for r in range(args.rounds):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t = time.perf_counter()
                model = SGDClassifier(loss="log_loss", max_iter=5, tol=None,
                                      random_state=r).fit(X, y)
                sk_s = time.perf_counter() - t
            target = float(model.score(Xt, yt))
            for epochs in range(1, args.max_epochs + 1):
                t = time.perf_counter()
                res = dh.linear.fit(X, y, test=(Xt, yt), epochs=epochs, client=client,
                                    progress=False)
                wall = time.perf_counter() - t
                accs = [h["test_accuracy"] for h in res.history]
                if accs[-1] >= target:
                    break
            rep = res.report()
            rounds.append({
                "sklearn_fit_s": sk_s, "sklearn_accuracy": target, "epochs": epochs,
                "batch": rep["options"]["batch"], "accuracy": accs,
                "epoch_s": [h["time_s"] for h in res.history],
                "run_s": rep["timing"]["run_s"], "wall_s": wall,
                "reached": accs[-1] >= target,
                "ratio_run": rep["timing"]["run_s"] / sk_s, "ratio_wall": wall / sk_s})
            print(f"round {r}: sklearn {sk_s * 1e3:.1f} ms ({target:.4f}); ours "
                  f"{epochs} epoch(s) {accs[-1]:.4f} run_s {rep['timing']['run_s'] * 1e3:.1f}"
                  f" ms wall {wall * 1e3:.1f} ms: {rounds[-1]['ratio_run']:.2f}x "
                  f"({rounds[-1]['ratio_wall']:.2f}x by wall)", file=sys.stderr)

    def med(k):
        return float(np.median([x[k] for x in rounds]))

    out = {"workers": args.workers, "load": [load0, os.getloadavg()[0]], "rounds": rounds,
           "median": {k: med(k) for k in ("sklearn_fit_s", "run_s", "wall_s", "ratio_run",
                                          "ratio_wall")},
           "reached_every_round": all(x["reached"] for x in rounds)}
    print(f"median: ours / sklearn {out['median']['ratio_run']:.2f}x by run_s, "
          f"{out['median']['ratio_wall']:.2f}x by wall; load {out['load']}", file=sys.stderr)
    write_json(out, args.out)


if __name__ == "__main__":
    main()
