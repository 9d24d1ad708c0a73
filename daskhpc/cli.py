"""The ``daskhpc`` command line (contract: ../shared/CLI.md).

::

    daskhpc partition <model> <input> --parts K [--partitioner ...] [--objective ...] ...
    daskhpc plan <workflow> <inputs...> --parts K [workflow options] [--json OUT]
    daskhpc run  <workflow> <inputs...> [--parts K] [--workers N | --scheduler-file F | ...]
    daskhpc demo [--json OUT]
    daskhpc info [--calibrate [--save]] [--json OUT]

Exit status: 0 success; 2 bad input or options (one line naming file, line and problem);
1 any other failure, with its cause (``--debug`` shows the traceback).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import time
import traceback
import warnings

from daskhpc import __version__, _workflows
from daskhpc._numba import prepare_kernels
from daskhpc._terminal import json_on_stdout, stage
from daskhpc.errors import InputError
from daskhpc.report import new_report, summarize, write_report


# -- parsers --------------------------------------------------------------
def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", metavar="OUT", help="write the JSON report here ('-' for stdout)")
    p.add_argument("--debug", action="store_true", help="show tracebacks")


def _partition_defaults() -> dict:
    """``daskhpc.partitioner.*`` from dask.config (daskhpc.yaml, environment)."""
    from daskhpc import _config

    return {k: _config.get(f"partitioner.{k}") for k in
            ("default", "epsilon", "seed", "threads", "preset")}


def _partition_parser(sub) -> None:
    from daskhpc._partition_cmd import MODELS
    from daskhpc.hypergraph import OBJECTIVES

    p = sub.add_parser("partition", help="partition a matrix or tensor with a hypergraph model")
    p.add_argument("model", choices=MODELS)
    p.add_argument("input", help="MatrixMarket, SNAP, FROSTT .tns, LIBSVM or ratings file")
    p.add_argument("--format", help="override the format detected from the extension")
    p.add_argument("--parts", type=int, required=True, metavar="K")
    d = _partition_defaults()
    p.add_argument("--partitioner", default=d["default"],
                   choices=["mtkahypar", "kahypar", "random", "block", "graph", "lp", "auto"],
                   help="backend; auto picks Mt-KaHyPar or lp by the instance's size "
                        "(docs/partitioning.md)")
    p.add_argument("--objective", default="km1", choices=OBJECTIVES)
    p.add_argument("--epsilon", type=float, default=None,
                   help=f"allowed imbalance ({d['epsilon']}); given explicitly, a partition "
                        "that does not meet it is an error (exit 1)")
    p.add_argument("--seed", type=int, default=d["seed"])
    p.add_argument("--threads", type=int, default=d["threads"], help="Mt-KaHyPar threads")
    p.add_argument("--preset", default=d["preset"],
                   choices=["deterministic", "default", "quality", "large_k"],
                   help="Mt-KaHyPar preset; deterministic gives the same partition per seed")
    p.add_argument("--net-cost", type=int, default=1, help="cost of every net (F or R words)")
    p.add_argument("--save-partition", metavar="FILE", help="one part id per line")
    _common(p)


def _workflow_parser(sub, mode: str) -> None:
    helptext = {"plan": "communication plan of a workflow (no cluster)",
                "run": "run a workflow on a Dask cluster"}[mode]
    p = sub.add_parser(mode, help=helptext)
    wsub = p.add_subparsers(dest="workflow", metavar="WORKFLOW")
    wsub.required = True
    for name in sorted(_workflows.available()):
        try:
            mod = _workflows.load(name)
        except Exception as e:  # noqa: BLE001 - one broken plug-in must not break the CLI
            broken = wsub.add_parser(name, help=f"(unavailable: {e})")
            broken.set_defaults(broken=f"workflow {name!r} failed to load: {e}")
            continue
        w = wsub.add_parser(name, help=getattr(mod, "HELP", name))
        w.add_argument("inputs", nargs="*", help="input file(s)")
        w.add_argument("--parts", type=int, metavar="K", help="number of parts (workers)")
        w.add_argument("--seed", type=int, default=0)
        w.add_argument("--partition-file", metavar="FILE", help="use a saved partition")
        w.add_argument("--format", metavar="FMT",
                       help="format of the input file(s), instead of the one the name "
                            "says: mtx, snap, tns, libsvm, ratings, edges; snap:weights "
                            "reads a third column as edge values (default snap:ignore)")
        if mode == "run":
            w.add_argument("--workers", type=int, metavar="N", help="LocalCluster workers")
            w.add_argument("--scheduler-file", metavar="F")
            w.add_argument("--scheduler-address", metavar="A")
            w.add_argument("--dashboard-address", metavar="ADDR")
            if getattr(mod, "CHECKPOINTS", False):
                w.add_argument("--checkpoint", metavar="DIR",
                               help="write a checkpoint after every epoch/batch to DIR (a "
                                    "directory all workers see) and recover from it when a "
                                    "worker is lost")
                w.add_argument("--resume", action="store_true",
                               help="continue from the last checkpoint in --checkpoint DIR "
                                    "(a fresh start if there is none)")
            w.add_argument("--progress", action=argparse.BooleanOptionalAction,
                           help="progress on stderr: by default a bar on a terminal and "
                                "nothing when piped; --progress prints lines in a log too")
            if getattr(mod, "EXCHANGE", False):
                w.add_argument("--exchange", choices=["direct", "graph"],
                               help="messages between workers pushed by the sender (direct, "
                                    "the default: daskhpc.runtime.exchange) or as task "
                                    "dependencies (graph, the reference); the same numbers")
        mod.add_arguments(w, mode)
        _common(w)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="daskhpc", description="Communication-bound sparse HPC algorithms on Dask.")
    parser.add_argument("--version", action="version", version=f"daskhpc {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    _partition_parser(sub)
    _workflow_parser(sub, "plan")
    _workflow_parser(sub, "run")
    d = sub.add_parser("demo", help="every landed workflow on bundled data (LocalCluster)")
    d.add_argument("--parts", type=int, default=4, metavar="K")
    d.add_argument("--workers", type=int, default=2, metavar="N")
    d.add_argument("--no-cluster", action="store_true", help="only the partition comparison")
    _common(d)
    i = sub.add_parser("info", help="versions, partitioner backends, MPI")
    i.add_argument("--calibrate", action="store_true",
                   help="measure alpha and beta on a cluster (LocalCluster unless given one)")
    i.add_argument("--save", action="store_true",
                   help="with --calibrate: write them to ~/.config/dask/daskhpc-calibration.yaml")
    i.add_argument("--workers", type=int, metavar="N",
                   help="LocalCluster workers (default daskhpc.runtime.workers)")
    i.add_argument("--scheduler-file", metavar="F")
    i.add_argument("--scheduler-address", metavar="A")
    _common(i)
    return parser


# -- commands ---------------------------------------------------------------
def cmd_partition(args) -> dict:
    from daskhpc._partition_cmd import format_table, partition_report
    from daskhpc.io import read

    _check_parts(args)
    asked = args.epsilon is not None            # a promise the partition must keep
    if not asked:
        args.epsilon = _partition_defaults()["epsilon"]
    if not args.epsilon >= 0:
        raise InputError(f"--epsilon must be a number >= 0 (an allowed imbalance such as "
                         f"0.03), not {args.epsilon}")
    with stage(f"reading {os.path.basename(args.input)}"):
        data = read(args.input, format=args.format)
    report, p = partition_report(args, data, stage=stage)
    if args.save_partition:
        p.save(args.save_partition)
    m = report["partition"]
    row = {"model": report["model"]["name"], "vertices": report["model"]["vertices"],
           "nets": report["model"]["nets"], "parts": args.parts,
           "partitioner": args.partitioner, "objective": args.objective,
           "km1": m["km1"], "soed": m["soed"], "cut": m["cut"],
           "imbalance": f"{m['imbalance']:.4f}", "balanced": m.get("balanced"),
           "time_s": f"{report['timing']['partition_s']:.2f}"}
    print(format_table([row], list(row)))
    for note in m.get("balance_notes", []):
        print(f"note: {note}")
    if m.get("balanced") is False:
        per = m.get("imbalance_per_constraint") or [m["imbalance"]]
        c = max(range(len(per)), key=per.__getitem__)
        what = f"constraint {c}: imbalance {per[c]:.3f}" if len(per) > 1 else \
            f"imbalance {per[c]:.3f}"
        text = (f"the partition is not balanced ({what} > epsilon {args.epsilon:g}; "
                f"{args.partitioner} did not meet it)")
        if asked:
            raise Unbalanced(f"{text}; a larger --epsilon, another --partitioner or fewer "
                             "--parts", report)
        print(f"daskhpc: warning: {text}; --epsilon makes this an error", file=sys.stderr)
    return report


class Unbalanced(RuntimeError):
    """An explicit ``--epsilon`` the partition does not meet (exit 1, report written)."""

    one_line = True

    def __init__(self, message: str, report: dict):
        super().__init__(message)
        self.report = report


def _check_parts(args) -> None:
    """``--parts`` below 1 is an error (never "the default"): exit 2 before any work."""
    parts = getattr(args, "parts", None)
    if parts is not None and parts < 1:
        raise InputError(f"--parts must be at least 1, not {parts}")


def _check_cluster_args(args) -> None:
    """The cluster options, checked before anything is read or started (exit 2)."""
    if os.environ.get("DASKHPC_MPI_CLIENT") == "1":
        return      # python -m daskhpc.mpi checked them (its --scheduler-file is written)
    workers = getattr(args, "workers", None)
    joins = [o for o, v in (("--scheduler-file", getattr(args, "scheduler_file", None)),
                            ("--scheduler-address", getattr(args, "scheduler_address", None)))
             if v]
    if len(joins) == 2:
        raise InputError("give --scheduler-file or --scheduler-address, not both")
    if workers is not None and joins:
        raise InputError(f"--workers starts a local cluster; {joins[0]} joins a running one "
                         "(its workers are the job's): drop one of them")
    if getattr(args, "dashboard_address", None) and joins:
        raise InputError(f"--dashboard-address applies to a local cluster, not to {joins[0]} "
                         "(the running scheduler has its dashboard already)")
    if workers is not None and workers < 1:
        raise InputError(f"--workers must be at least 1, not {workers}")
    from daskhpc.runtime import check_dashboard_address

    check_dashboard_address(getattr(args, "dashboard_address", None))


@contextlib.contextmanager
def _client_for(args):
    """A client of the cluster the options name (a new LocalCluster by default); a
    Ctrl-C inside closes it without the lost-data log lines of a cluster closed mid-run."""
    from daskhpc.runtime import connect

    _check_cluster_args(args)
    joins = getattr(args, "scheduler_file", None) or getattr(args, "scheduler_address", None)
    workers = getattr(args, "workers", None)
    what = (f"waiting for the scheduler of {joins}" if joins else
            f"starting a LocalCluster of {workers or 'the default number of'} workers")
    if os.environ.get("DASKHPC_MPI_CLIENT") == "1":
        what = "joining the MPI job's scheduler"
    with stage(what):
        client = connect(getattr(args, "scheduler_address", None),
                         scheduler_file=getattr(args, "scheduler_file", None),
                         n_workers=workers,
                         dashboard_address=getattr(args, "dashboard_address", None))
    with client:
        try:
            yield client
        except KeyboardInterrupt:
            # the scheduler would log every part lost by closing its workers mid-run
            logging.getLogger("distributed").setLevel(logging.CRITICAL + 1)
            raise


def _workflow_module(args):
    if getattr(args, "broken", None):
        raise RuntimeError(args.broken)
    return _workflows.load(args.workflow)


def _print_summary(mod, report: dict, args) -> None:
    """The human lines (on stderr when ``--json -`` puts the report on stdout)."""
    text = mod.summary(report) if hasattr(mod, "summary") else summarize(report)
    print(text)


def _formats(args):
    """``--format`` for the command's input files, checked before any work starts."""
    from daskhpc.io import formats_of

    return formats_of(getattr(args, "inputs", None) or (), getattr(args, "format", None))


def cmd_plan(args) -> dict:
    mod = _workflow_module(args)
    _check_parts(args)
    with _formats(args):
        if hasattr(mod, "check"):     # options and inputs first (exit 2, one line)
            mod.check(args)
        prepare_kernels(args.workflow, command="plan", file=sys.stderr)
        report = mod.plan(args)
    _print_summary(mod, report, args)
    return report


def cmd_run(args) -> dict:
    mod = _workflow_module(args)
    if getattr(args, "resume", False) and not getattr(args, "checkpoint", None):
        raise InputError("--resume needs --checkpoint DIR (the directory to resume from)")
    _check_parts(args)
    _check_cluster_args(args)
    with _formats(args):
        if hasattr(mod, "check"):     # read and validate before the cluster starts
            mod.check(args)
    # numba compiles here, once, saying so; the workers then load the kernels
    prepare_kernels(args.workflow, command="run", file=sys.stderr)
    with _formats(args), _client_for(args) as client:
        link = getattr(client, "dashboard_link", None)
        if link:
            pages = link.rsplit("/", 1)[0] + "/daskhpc"
            print(f"dashboard: {link} (daskhpc pages: {pages})", file=sys.stderr)
        report = mod.run(args, client)
    _print_summary(mod, report, args)
    if not getattr(args, "json", None):
        print("(the full report: --json FILE, or --json - for stdout)")
    return report


def cmd_demo(args) -> dict:
    from daskhpc._partition_cmd import demo_partitions, format_table

    _check_parts(args)
    if not args.no_cluster:
        _check_cluster_args(args)
    t0 = time.perf_counter()
    print(f"Partitioning the bundled data into {args.parts} parts (km1 objective):",
          flush=True)
    rows = demo_partitions(args.parts, stage=stage)
    print()
    print(format_table(rows, ["data", "model", "partitioner", "km1", "km1/random", "soed",
                              "cut", "imbalance", "time_s"]))
    report = new_report("demo", parts=args.parts, partitions=rows, workflows={})
    names = sorted(_workflows.available())
    if names and not args.no_cluster:
        prepare_kernels(*names, command="demo", file=sys.stderr)
        with _client_for(args) as client:
            print(f"\nEvery workflow on bundled data, LocalCluster of {args.workers} workers "
                  f"(dashboard {client.dashboard_link}):", flush=True)
            for name in names:
                mod = _workflows.load(name)
                if not hasattr(mod, "demo"):
                    continue
                print(f"\n== {name}: {getattr(mod, 'HELP', name)} ==", flush=True)
                report["workflows"][name] = mod.demo(client)
                _print_summary(mod, report["workflows"][name], args)
    report["timing"] = {"run_s": round(time.perf_counter() - t0, 2)}
    print(f"\ndemo done in {report['timing']['run_s']:.0f} s"
          + ("" if getattr(args, "json", None) else
             "; every number above and more: daskhpc demo --json demo.json"))
    return report


def cmd_info(args) -> dict:
    from daskhpc._info import calibrate_and_save, collect_info, format_info

    info = collect_info()
    print(format_info(info))
    if args.calibrate:
        with _client_for(args) as client:
            cal = calibrate_and_save(client, save=args.save)
        info["calibration"] = cal
        print(f"\nalpha = {cal['alpha']:.3e} s per message, beta = {cal['beta']:.3e} s per byte "
              f"({1 / cal['beta'] / 1e9:.2f} GB/s) on {cal['workers']} workers (a Dask transfer)")
        for mode, fit in cal["exchange"].items():
            print(f"  program messages, {mode} exchange: alpha = {fit['alpha']:.3e} s, "
                  f"beta = {fit['beta']:.3e} s/byte")
        if cal.get("saved_to"):
            print(f"saved to {cal['saved_to']}")
    return new_report("info", **info)


COMMANDS = {"partition": cmd_partition, "plan": cmd_plan, "run": cmd_run,
            "demo": cmd_demo, "info": cmd_info}


def main(argv: list[str] | None = None, *, report_hook=None) -> int:
    """Entry point of the ``daskhpc`` console script; returns the exit status.

    ``report_hook(report) -> report`` may add to the report before it is written
    (``python -m daskhpc.mpi`` adds its ``mpi`` section this way).
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    debug = "--debug" in argv or os.environ.get("DASKHPC_DEBUG")
    with _one_line_warnings(debug):
        return _main(argv, debug, report_hook)


@contextlib.contextmanager
def _one_line_warnings(debug):
    """Warnings a user should read (a damaged checkpoint step, ...) as one line each."""
    if debug:
        yield
        return
    saved = warnings.formatwarning
    warnings.formatwarning = lambda message, category, *a, **k: \
        f"daskhpc: warning: {message}\n"
    try:
        yield
    finally:
        warnings.formatwarning = saved


def _progress_setting(on):
    """``--progress``/``--no-progress``: the setting every progress display reads."""
    if on is None:
        return contextlib.nullcontext()
    import dask.config

    return dask.config.set({"daskhpc.runtime.progress": bool(on)})


def _main(argv, debug, report_hook) -> int:
    args = None
    try:
        args = build_parser().parse_args(argv)
        with _progress_setting(getattr(args, "progress", None)), \
                json_on_stdout(getattr(args, "json", None) == "-"):
            report = COMMANDS[args.command](args)
            if report_hook is not None and report is not None:
                report = report_hook(report)
        if getattr(args, "json", None) and report is not None:
            write_report(report, args.json)
        return 0
    except SystemExit as e:  # argparse: 2 for bad options, 0 for --help
        return int(e.code or 0)
    except (InputError, FileNotFoundError, IsADirectoryError, PermissionError) as e:
        if debug:
            traceback.print_exc()
        print(f"daskhpc: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("daskhpc: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 - the CLI reports every other failure as status 1
        if debug:
            traceback.print_exc()
        report = getattr(e, "report", None)     # a finished run that failed its promise
        if report is not None and getattr(args, "json", None):
            with contextlib.suppress(Exception):
                write_report(report, args.json)
        if getattr(e, "one_line", False):      # the message says it all (no scheduler, ...)
            print(f"daskhpc: failed: {e}", file=sys.stderr)
            return 1
        where = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
        at = f" (at {os.path.basename(where.filename)}:{where.lineno})" if where else ""
        print(f"daskhpc: failed: {type(e).__name__}: {e}{at}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
