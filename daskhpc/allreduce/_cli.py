"""``daskhpc plan allreduce`` / ``daskhpc run allreduce``: the CLI plug-in.

Inputs: none (or the word ``uniform``) for the thesis's uniform model (``--N``,
``--parts``, ``--density``, ``--seed``), or one file per rank: ``.npy`` (a dense 1-D
array) or ``.npz`` with arrays ``idx`` and ``val`` (and ``N``).

Examples
--------
>>> import argparse
>>> p = argparse.ArgumentParser()
>>> _ = p.add_argument("inputs", nargs="*"); _ = p.add_argument("--parts", type=int)
>>> _ = p.add_argument("--seed", type=int, default=0)
>>> add_arguments(p, "plan")
>>> a = p.parse_args(["--N", "1000", "--parts", "4", "--density", "0.01"])
>>> plan(a)["plan"]["tot_msgs"] > 0
True
"""

from __future__ import annotations

from daskhpc.errors import InputError

NAME = "allreduce"
HELP = "sparse allreduce (SSAR_Rec_Dbl, split-allgather, DSAR, dense baselines; auto)"
CHECKPOINTS = False     # a call is short: nothing to resume
DASHBOARD = "daskhpc.allreduce._dashboard"    # bytes per stage of every call (PANELS)
EXCHANGE = True         # daskhpc.cli adds --exchange direct|graph (for --engine program)


def MPI_TEST_ARGS():  # noqa: N802 - the launcher tests' convention (docs/hpc.md)
    """Arguments after ``allreduce`` for a few-second run on 3 workers (integer values:
    every algorithm's sum is exactly the serial one)."""
    return ["--N", "100000", "--parts", "3", "--density", "0.01", "--dtype", "int64",
            "--repeat", "3", "--check-serial"]


def add_arguments(parser, mode: str) -> None:
    """Add the allreduce options (``mode`` is ``"plan"`` or ``"run"``)."""
    from ._registry import ALGORITHMS, DEFAULT_GROUP

    g = parser.add_argument_group("allreduce")
    g.add_argument("--N", type=int, help="vector length (uniform model)")
    g.add_argument("--density", type=float, help="items per rank / N (uniform model)")
    g.add_argument("--dtype", default="float64", help="value type (float64)")
    g.add_argument("--algorithm", default="auto", choices=["auto", *sorted(ALGORITHMS)],
                   help="auto: the least Table 3.1 time with the cost model (default)")
    g.add_argument("--group", type=int, default=DEFAULT_GROUP,
                   help=f"ranks per sparse group of dsar_early_switch ({DEFAULT_GROUP})")
    g.add_argument("--alpha", type=float, help="seconds per message for auto (calibrated)")
    g.add_argument("--beta", type=float, help="seconds per byte for auto (calibrated)")
    if mode == "run":
        g.add_argument("--repeat", type=int, default=1, help="calls to time (1)")
        g.add_argument("--engine", choices=("direct", "program"), default="direct",
                       help="direct: one small graph per call (default); program: the "
                            "calls as a Program on the workflow frame (what other "
                            "workflows embed)")
        g.add_argument("--check-serial", action="store_true",
                       help="compare with the dense rank-order sum")


def _inputs(args) -> list:
    return [i for i in (getattr(args, "inputs", None) or []) if i != "uniform"]


def check(args) -> None:
    """The vector files, read and checked before the cluster starts (exit 2)."""
    from ._setup import validate_input

    validate_input(_inputs(args), args.N)


def _call_args(args) -> dict:
    from ._setup import read_vectors

    inputs = _inputs(args)
    opts = {"algorithm": args.algorithm, "group": args.group, "alpha": args.alpha,
            "beta": args.beta}
    if hasattr(args, "repeat"):
        opts["repeat"] = args.repeat
    if not inputs:
        return dict(N=args.N, nparts=args.parts, density=args.density,
                    seed=getattr(args, "seed", 0) or 0, dtype=args.dtype, **opts)
    vecs, N = read_vectors(inputs, args.N)
    return dict(vectors=vecs, nparts=args.parts, N=N, **opts)


def plan(args) -> dict:
    """``daskhpc plan allreduce [files] --N N --parts P --density d --algorithm A``."""
    from ._api import plan as plan_

    return plan_(**_call_args(args))


def run(args, client) -> dict:
    """``daskhpc run allreduce [files] --N N --parts P --density d --repeat R``."""
    from daskhpc.runtime import worker_addresses

    from ._run import allreduce

    kw = _call_args(args)
    if kw.get("nparts") is None and "vectors" not in kw:
        kw["nparts"] = len(worker_addresses(client))
    res = allreduce(client=client, engine=args.engine, check_serial=args.check_serial,
                    exchange=getattr(args, "exchange", None),
                    progress=getattr(args, "progress", None), **kw)
    return res.report()


def demo(client) -> dict:
    """N = 2^20, 4 ranks, density 0.1 %, auto, 5 calls, checked against the dense sum."""
    from ._run import allreduce

    return allreduce(N=2 ** 20, nparts=4, density=1e-3, algorithm="auto", client=client,
                     repeat=5, check_serial=True).report()
