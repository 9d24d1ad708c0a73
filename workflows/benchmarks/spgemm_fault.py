"""Time a lost worker costs SpGEMM: A·A on ``grid="2x2x1"`` (2 cells per worker), 2
workers with nannies, b = 4, the worker that starts batch 2's first cell product killed
(``daskhpc.testing.KillOnce``); undisturbed runs alternate with killed ones.

    python workflows/benchmarks/spgemm_fault.py email-Enron.txt.gz --repeat 5

Prints, per run, the consumer, whether a checkpoint was written, whether a worker was
killed, ``timing["run_s"]`` and the report's recoveries (``recovery_s``, ``time_lost_s``,
the batches run again). Public API only.
"""

from __future__ import annotations

import argparse
import tempfile

from daskhpc.io import read
from daskhpc.runtime import connect
from daskhpc.spgemm import multiply
from daskhpc.testing import KillOnce


def at_batch2(key) -> bool:
    """The first cell product of batch 2 (its key's name ends in ``-cblock``)."""
    return isinstance(key, tuple) and str(key[0]).endswith("-cblock") and key[1] == 2


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("matrix", help="A (any format daskhpc.io.read takes)")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    a = read(args.matrix).matrix
    with connect(n_workers=2) as client:
        # a warm-up: the kernels loaded on both workers before anything is timed
        multiply(a, client=client, grid="2x2x1", batches=4, consume="count", plan=False)
        for _ in range(args.repeat):
            for consume, ck in (("count", False), ("keep", False), ("keep", True)):
                for kill in (False, True):
                    client.wait_for_workers(2, timeout=60)
                    d = tempfile.mkdtemp()
                    if kill:
                        client.register_plugin(KillOnce(at_batch2, d + "/k"), name="kill")
                    res = multiply(a, client=client, grid="2x2x1", batches=4,
                                   consume=consume, plan=False,
                                   checkpoint=d + "/ck" if ck else None)
                    if kill:
                        client.unregister_worker_plugin("kill")
                    print(consume, ck, kill, res.timing["run_s"], res.recoveries, flush=True)


if __name__ == "__main__":
    main()
