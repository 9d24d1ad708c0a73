"""``daskhpc plan spgemm`` / ``daskhpc run spgemm`` / the spgemm part of ``daskhpc demo``.

::

    daskhpc run spgemm A.mtx [--b B.mtx | --aat] --grid QxQxL --memory-per-worker 512MB
                       --batches auto|N --consume keep|write:DIR|count|prune:K --json OUT
                       [--checkpoint DIR [--resume]]
    daskhpc plan spgemm A.mtx --grid 32x32x4 --memory-per-worker 1GB --json OUT
"""

from __future__ import annotations

import time

import scipy.sparse as sp

from daskhpc.errors import InputError
from daskhpc.report import new_report

NAME = "spgemm"
HELP = "batched 2D/3D sparse SUMMA SpGEMM (C = A·B, A·Aᵀ) with a memory budget"
#: ``daskhpc run spgemm`` takes ``--checkpoint DIR`` and ``--resume`` (the lead's CLI
#: adds them): every finished batch is recorded in DIR, a resumed run skips them.
CHECKPOINTS = True
DASHBOARD = "daskhpc.spgemm._dashboard"      # its panels on the dashboard (PANELS)


def MPI_TEST_ARGS():  # noqa: N802 - the launcher tests' convention (docs/hpc.md)
    """Arguments after ``spgemm`` for a few-second run on 3 workers under mpiexec."""
    from daskhpc import datasets

    return [datasets.path("ratings"), "--aat", "--grid", "1x1x3", "--batches", "3",
            "--consume", "count", "--check-serial"]


def add_arguments(parser, mode: str) -> None:
    """Options of ``plan spgemm`` and ``run spgemm`` (the lead's CLI adds the common ones)."""
    parser.add_argument("--b", dest="b_path", metavar="B", help="second factor (default: A)")
    parser.add_argument("--aat", action="store_true", help="multiply A by its transpose")
    parser.add_argument("--grid", help="QxQxL process grid (default: one cell per worker, "
                                       "the largest square layers that fit: 2 workers "
                                       "1x1x2, 8 workers 2x2x2)")
    parser.add_argument("--layers", type=int, default=None,
                        help="layers l when the grid comes from the worker count "
                             "(default: chosen)")
    parser.add_argument("--memory-per-worker", help="budget per worker, e.g. 512MB")
    parser.add_argument("--batches", default="auto", help="auto (Symbolic3D) or a number")
    parser.add_argument("--no-permute", action="store_true",
                        help="keep the given row/column order (default: random permutation)")
    if mode == "plan":
        parser.add_argument("--alpha", type=float, help="latency per message (s)")
        parser.add_argument("--beta", type=float, help="seconds per byte")
        return
    parser.add_argument("--consume", default="keep",
                        help="keep | count | write:DIR | prune:K | threshold:X")
    parser.add_argument("--window", type=int, default=1, help="batches in flight")
    parser.add_argument("--local", choices=["fused", "staged"], default="fused",
                        help="fused: one accumulator over all stages (default); "
                             "staged: the paper's Local-Multiply per stage + Merge-Layer")
    parser.add_argument("--check-serial", action="store_true",
                        help="compare with scipy's single-threaded product")


def check(args) -> None:
    """Every option and the inputs, before a cluster starts (``daskhpc run``/``plan``):
    a typo costs no cluster start-up and no worker traceback."""
    import os

    from ._consumers import Write, parse_consumer
    from ._memory import parse_bytes

    if getattr(args, "window", 1) < 1:
        raise InputError(f"--window must be at least 1 (batches in flight), not {args.window}")
    _batches(args.batches)
    if args.memory_per_worker is not None:
        parse_bytes(args.memory_per_worker)
    if args.grid:
        from daskhpc.spgemm._grid import Grid

        Grid.parse(args.grid)
    if getattr(args, "consume", None) is not None:
        consumer = parse_consumer(args.consume)
        if isinstance(consumer, Write):          # the workers write there: it must exist
            try:
                os.makedirs(consumer.directory, exist_ok=True)
            except OSError as e:
                raise InputError(f"--consume write:{consumer.directory}: cannot create the "
                                 f"directory ({e.strerror})") from e
    a, b, info = args._spgemm_inputs = _inputs(args)
    from ._prep import check_inputs

    try:                    # shapes, NaN, empty: before the cluster starts
        check_inputs(a, b)
    except InputError as e:
        names = [info["path"]] + ([info["b"]["path"]] if "b" in info else [])
        raise InputError(f"{' and '.join(names)}: {e}") from None


def _inputs(args):
    cached = getattr(args, "_spgemm_inputs", None)
    if cached is not None:
        return cached
    from daskhpc.io import read

    if not args.inputs:
        raise InputError("give the matrix A")
    if len(args.inputs) > 2 or (len(args.inputs) == 2 and args.b_path):
        raise InputError("give A (and B with --b, or as a second input), not more")
    a_in = read(args.inputs[0])
    if a_in.matrix is None:
        raise InputError(f"{args.inputs[0]}: a matrix is needed, not a tensor")
    a = a_in.matrix
    b_path = args.b_path or (args.inputs[1] if len(args.inputs) == 2 else None)
    if b_path and args.aat:
        raise InputError("--b and --aat exclude each other")
    if args.aat:
        b = sp.csr_array(a.T)
    elif b_path:
        b_in = read(b_path)
        if b_in.matrix is None:
            raise InputError(f"{b_path}: a matrix is needed, not a tensor")
        b = b_in.matrix
    else:
        b = a
    info = {"path": args.inputs[0], "shape": list(a.shape), "nnz": int(a.nnz)}
    if b_path:
        info["b"] = {"path": b_path, "shape": list(b.shape), "nnz": int(b.nnz)}
    if args.aat:
        info["product"] = "A·Aᵀ"
    return a, b, info


def _grid_arg(args, nworkers: int):
    from daskhpc.spgemm._grid import Grid

    if args.grid:
        return Grid.parse(args.grid)
    return Grid.for_workers(nworkers, args.layers)


def _seed(args):
    return None if args.no_permute else (args.seed if args.seed is not None else 0)


def plan(args) -> dict:
    """Symbolic only: b, per-step volumes, Table II, alpha-beta estimate; no cluster."""
    from daskhpc.spgemm._api import plan as make_plan

    a, b, info = _inputs(args)
    nparts = args.parts or 1
    grid = _grid_arg(args, nparts)
    t0 = time.perf_counter()
    out = make_plan(a, b, grid=grid, memory_per_worker=args.memory_per_worker,
                    workers=args.parts or grid.p, batches=_batches(args.batches),
                    seed=_seed(args), alpha=args.alpha, beta=args.beta)
    quality = out.pop("quality")
    quality["batches"] = out["batches"]
    return new_report(NAME, input=info, parts=grid.p, seed=_seed(args), grid=out.pop("grid"),
                      plan=out, timing={"plan_s": time.perf_counter() - t0}, quality=quality)


def run(args, client) -> dict:
    """Multiply on the connected cluster and report."""
    from daskhpc.runtime import worker_addresses
    from daskhpc.spgemm._api import multiply, warn_over_budget

    a, b, info = _inputs(args)
    grid = _grid_arg(args, len(worker_addresses(client)))
    res = multiply(a, b, client=client, grid=grid, memory_per_worker=args.memory_per_worker,
                   local=args.local, batches=_batches(args.batches), consume=args.consume,
                   window=args.window, seed=_seed(args),
                   checkpoint=getattr(args, "checkpoint", None),
                   resume=bool(getattr(args, "resume", False)),
                   check_serial=bool(args.check_serial),
                   progress=getattr(args, "progress", None))
    res.info["input"] = info
    return warn_over_budget(res.report())     # over the budget: a warning (issue 22)


def demo(client) -> dict:
    """Cora (bundled, 2,708 nodes): A·A on a 1x1x2 grid in 2 batches, counted, checked."""
    from daskhpc.datasets import cora
    from daskhpc.spgemm._api import multiply

    a = cora().adjacency
    t0 = time.perf_counter()
    res = multiply(a, a, client=client, grid="1x1x2", memory_per_worker="2MB",
                   consume="count", check_serial=True)
    res.info.update(command="daskhpc demo", demo_s=time.perf_counter() - t0,
                    input={"path": "daskhpc.datasets.cora", "shape": list(a.shape),
                           "nnz": int(a.nnz)})
    return res.report()


def _batches(text):
    if text in (None, "auto"):
        return "auto"
    try:
        n = int(text)
    except (TypeError, ValueError):
        n = 0
    if n < 1:
        raise InputError(f"--batches must be auto or a positive integer, not {text!r}")
    return n
