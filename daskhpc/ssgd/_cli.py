"""``daskhpc plan ssgd`` / ``daskhpc run ssgd``: the CLI plug-in (see daskhpc._workflows).

The lead's ``daskhpc.cli`` adds ``inputs``, ``--parts``, ``--seed``, ``--json``,
``--partition-file`` (and, for ``run``, the cluster options); this module adds the SSGD
options and turns parsed arguments into calls of :mod:`daskhpc.ssgd`.

Examples
--------
>>> import argparse
>>> p = argparse.ArgumentParser()
>>> _ = p.add_argument("inputs", nargs="+"); _ = p.add_argument("--parts", type=int)
>>> _ = p.add_argument("--seed", type=int, default=0)
>>> _ = p.add_argument("--partition-file")
>>> add_arguments(p, "plan")
>>> a = p.parse_args(["r.csv", "--parts", "4", "--strategy", "p2p"])
>>> a.strategy, a.rank, a.partition
('p2p', 16, 'hp')
"""

from __future__ import annotations

from daskhpc.errors import InputError

NAME = "ssgd"
CHECKPOINTS = True      # daskhpc.cli adds --checkpoint DIR and --resume to `run ssgd`
DASHBOARD = "daskhpc.ssgd._dashboard"      # its panels on the dashboard (PANELS)
EXCHANGE = True         # daskhpc.cli adds --exchange direct|graph to `run ssgd`
HELP = "matrix completion by stratified SGD (DSGD, P2P, Hold-and-Combine)"


def MPI_TEST_ARGS():  # noqa: N802 - the launcher tests' convention (docs/hpc.md)
    """Arguments after ``ssgd`` for a few-second run on 3 workers under mpiexec."""
    from daskhpc import datasets

    return [datasets.path("ratings"), "--parts", "3", "--epochs", "2", "--check-serial"]

_D = None


def _defaults():
    global _D
    if _D is None:
        from ._setup import DEFAULTS

        _D = DEFAULTS
    return _D


def add_arguments(parser, mode: str) -> None:
    """Add the SSGD options (``mode`` is ``"plan"`` or ``"run"``)."""
    d = _defaults()
    g = parser.add_argument_group("ssgd")
    g.add_argument("--rank", type=int, default=d.rank, help="F, latent factors (16)")
    g.add_argument("--epochs", type=int, default=d.epochs, help="SGD epochs (20)")
    g.add_argument("--strategy", choices=("dsgd", "p2p", "hc"), default=d.strategy,
                   help="communication: dense blocks, P2P d-gap rows, Hold-and-Combine (hc)")
    g.add_argument("--partition", choices=("hp", "random"), default=d.partition,
                   help="row partition: hypergraph (SOED) or seeded random (hp)")
    g.add_argument("--partitioner", default=d.partitioner,
                   help="hypergraph partitioner for --partition hp: auto (Mt-KaHyPar, or label "
                        "propagation where Mt-KaHyPar would take minutes), mtkahypar, kahypar, lp")
    g.add_argument("--epsilon", type=float, default=d.epsilon,
                   help="allowed nonzero imbalance of the row blocks (0.03)")
    g.add_argument("--strata", choices=("ring", "random"), default=d.strata,
                   help="ring strata with a fixed seed, or a new ring seed every epoch")
    g.add_argument("--ring-seed", type=int, default=d.ring_seed, help="seed of the ring (0)")
    g.add_argument("--lr", type=float, default=d.lr, help=f"initial learning rate ({d.lr})")
    g.add_argument("--reg", type=float, default=d.reg, help=f"regularisation ({d.reg})")
    g.add_argument("--init-scale", type=float, default=None,
                   help="initial factors U[0, s); default 2 sqrt(mean rating / F)")
    g.add_argument("--test-fraction", type=float, default=d.test_fraction,
                   help="ratings held out for the test RMSE (0.1)")
    g.add_argument("--keep-empty", action="store_true",
                   help="refuse a matrix with empty rows or columns (default: drop them, "
                        "with a note)")
    g.add_argument("--d-gap", dest="method", choices=("bitwise", "connectivity"),
                   default=d.method, help="d-gap rows by Algorithm 2 (bitwise) or the "
                   "connectivity sets (same result)")
    if mode == "run":
        g.add_argument("--eval-every", type=int, default=d.eval_every,
                       help="test RMSE every N epochs (0: after the last one only)")
        g.add_argument("--check-serial", action="store_true",
                       help="also run the serial reference and compare W and H bit for bit")
        g.add_argument("--no-order-plugin", action="store_true",
                       help="do not register the stratum-order scheduler plugin")


def _options(args) -> dict:
    keys = ("rank", "epochs", "strategy", "partition", "partitioner", "epsilon", "strata",
            "ring_seed", "lr", "reg", "init_scale", "test_fraction", "method")
    out = {k: getattr(args, k) for k in keys if hasattr(args, k)}
    out["seed"] = getattr(args, "seed", 0) or 0
    out["keep_empty"] = bool(getattr(args, "keep_empty", False))
    out["format"] = getattr(args, "format", None)
    if hasattr(args, "eval_every"):
        out["eval_every"] = args.eval_every
    return out


def check(args) -> None:
    """The SSGD options and the input, before a cluster starts (``daskhpc run``/``plan``:
    exit 2, one line, no cluster start-up for a typo or a bad file).

    Reads and validates the ratings once (empty rows dropped or refused, ids mapped), and
    the partition file against them when ``--parts`` is given; ``run``/``plan`` reuse
    what was read (``args._ssgd_input``).
    """
    from ._assign import read_partition
    from ._problem import check_parts
    from ._setup import Options, load

    path = _input(args)
    opts = Options(**_options(args))
    opts.check()                                   # options first: they cost nothing
    inp = load(path, format=opts.format, keep_empty=opts.keep_empty)
    K = getattr(args, "parts", None)
    if K is not None:
        check_parts(K, inp.ratings)
    pfile = getattr(args, "partition_file", None)
    if pfile is not None:
        read_partition(pfile, *inp.ratings.shape, K, inp)
    args._ssgd_input = inp


def _input(args):
    """The input of the command: what ``check`` read, else the one path."""
    cached = getattr(args, "_ssgd_input", None)
    if cached is not None:
        return cached
    inputs = list(getattr(args, "inputs", []) or [])
    if len(inputs) != 1:
        raise InputError(f"ssgd takes one ratings file, got {len(inputs)}: {inputs}")
    return inputs[0]


def _parts(args, default: int | None = None) -> int:
    K = getattr(args, "parts", None)
    K = default if K is None else K          # --parts 0 is an error, not the default
    if K is None:
        raise InputError("--parts is required for ssgd")
    return int(K)


def plan(args) -> dict:
    """``daskhpc plan ssgd RATINGS --parts K ...``: the JSON report, no cluster."""
    from ._api import plan as plan_

    return _noted(plan_(_input(args), _parts(args),
                        partition_file=getattr(args, "partition_file", None),
                        **_options(args)))


def run(args, client) -> dict:
    """``daskhpc run ssgd RATINGS [--parts K] ...`` on a connected client."""
    from daskhpc.runtime import worker_addresses

    from ._api import fit

    nworkers = len(worker_addresses(client))
    res = fit(_input(args), _parts(args, nworkers), client=client,
              partition_file=getattr(args, "partition_file", None),
              check_serial=bool(getattr(args, "check_serial", False)),
              order_plugin=not getattr(args, "no_order_plugin", False),
              progress=getattr(args, "progress", None),
              checkpoint=getattr(args, "checkpoint", None),
              resume=bool(getattr(args, "resume", False)),
              exchange=getattr(args, "exchange", None), **_options(args))
    return _noted(res.report())


def _noted(report: dict) -> dict:
    """Print the input's notes (empty rows dropped) on stderr: the user must see them."""
    import sys

    for note in (report.get("input") or {}).get("notes", []):
        print(f"note: {note}", file=sys.stderr)
    return report


def demo(client) -> dict:
    """ml-latest-small, K = 2, Hold-and-Combine, 5 epochs, checked against serial."""
    from daskhpc import datasets

    from ._api import fit

    res = fit(datasets.path("ratings"), 2, client=client, strategy="hc", epochs=5,
              partition="hp", check_serial=True)
    return res.report()
