"""``daskhpc plan linear`` / ``daskhpc run linear``: the CLI plug-in.

Examples
--------
>>> import argparse
>>> from daskhpc import datasets
>>> p = argparse.ArgumentParser()
>>> _ = p.add_argument("inputs", nargs="*"); _ = p.add_argument("--parts", type=int)
>>> _ = p.add_argument("--seed", type=int, default=0)
>>> add_arguments(p, "plan")
>>> a = p.parse_args([datasets.path("libsvm"), "--parts", "4", "--batch", "8"])
>>> plan(a)["plan"]["steps_per_epoch"]
2037
"""

from __future__ import annotations

from daskhpc.errors import InputError

NAME = "linear"
HELP = "data-parallel logistic regression / linear SVM, Top-k SGD, over the sparse allreduce"
CHECKPOINTS = True      # daskhpc.cli adds --checkpoint DIR and --resume (w after every epoch)
DASHBOARD = "daskhpc.linear._dashboard"       # the accuracy curve (PANELS)
EXCHANGE = True         # daskhpc.cli adds --exchange direct|graph to `run linear`


def MPI_TEST_ARGS():  # noqa: N802 - the launcher tests' convention (docs/hpc.md)
    """Arguments after ``linear`` for a few-second run on 3 workers: a9a, 2 epochs of
    B = 512, hinge loss (its gradients are integers on a9a's binary features, so the run
    equals the plain serial reference bit for bit)."""
    from daskhpc import datasets

    return [datasets.path("libsvm"), "--test", datasets.path("libsvm-test"), "--parts", "3",
            "--batch", "512", "--epochs", "2", "--loss", "hinge", "--check-serial"]


def add_arguments(parser, mode: str) -> None:
    """Add the linear options (``mode`` is ``"plan"`` or ``"run"``)."""
    from daskhpc.allreduce import ALGORITHMS

    from ._setup import Options

    d = Options()
    g = parser.add_argument_group("linear")
    g.add_argument("--test", help="LIBSVM test file (a9a.t)")
    g.add_argument("--loss", choices=("log", "hinge"), default=d.loss)
    g.add_argument("--batch", type=int, default=d.batch, help=f"B rows per part ({d.batch})")
    g.add_argument("--epochs", type=int, default=d.epochs)
    g.add_argument("--lr", type=float, default=d.lr)
    g.add_argument("--lr-decay", type=float, default=d.lr_decay,
                   help="epoch e uses lr / (1 + lr_decay e)")
    g.add_argument("--reg", type=float, default=d.reg)
    g.add_argument("--topk", help="k (exact Top-k) or 'approx' (with --k)")
    g.add_argument("--k", type=int, help="expected items of --topk approx")
    g.add_argument("--no-error-feedback", action="store_true",
                   help="Top-k without the residual (for comparison)")
    g.add_argument("--allreduce", default="auto", choices=["auto", *sorted(ALGORITHMS)])
    g.add_argument("--group", type=int, default=d.group)
    g.add_argument("--alpha", type=float)
    g.add_argument("--beta", type=float)
    if mode == "run":
        g.add_argument("--check-serial", action="store_true",
                       help="also train with the plain serial reference and compare w")


def _topk(v):
    if v is None or v == "approx":
        return v
    try:
        return int(v)
    except ValueError:
        raise InputError(f"--topk must be an integer or 'approx', got {v!r}") from None


def _call(args) -> dict:
    inputs = list(getattr(args, "inputs", None) or [])
    if len(inputs) != 1:
        raise InputError(f"linear takes one LIBSVM training file, got {len(inputs)}")
    cached = getattr(args, "_linear_input", None)      # what check read
    return dict(X=inputs[0] if cached is None else cached, nparts=args.parts or 4,
                test=args.test if cached is None else None, loss=args.loss,
                batch=args.batch, epochs=args.epochs, lr=args.lr, lr_decay=args.lr_decay,
                reg=args.reg, topk=_topk(args.topk), k=args.k,
                error_feedback=not args.no_error_feedback, allreduce=args.allreduce,
                group=args.group, alpha=args.alpha, beta=args.beta,
                seed=getattr(args, "seed", 0) or 0)


def check(args) -> None:
    """Options and the data, read and checked before the cluster starts (exit 2)."""
    from ._setup import validate_input

    args._linear_input = validate_input(**_call(args))


def plan(args) -> dict:
    """``daskhpc plan linear a9a --parts 4 ...``: steps, messages and bytes per epoch."""
    from ._api import plan as plan_

    return plan_(**_call(args))


def run(args, client) -> dict:
    """``daskhpc run linear a9a --test a9a.t --parts 4 ...`` on a connected client."""
    from ._fit import fit

    kw = _call(args)
    res = fit(client=client, check_serial=bool(getattr(args, "check_serial", False)),
              checkpoint=getattr(args, "checkpoint", None),
              resume=bool(getattr(args, "resume", False)),
              progress=getattr(args, "progress", None),
              exchange=getattr(args, "exchange", None), **kw)
    return res.report()


def demo(client) -> dict:
    """a9a / a9a.t, 4 parts, B = 512, 3 epochs, logistic loss, checked against serial."""
    from daskhpc import datasets

    from ._fit import fit

    return fit(datasets.path("libsvm"), nparts=4, batch=512, epochs=3, client=client,
               test=datasets.path("libsvm-test"), check_serial=True).report()
