"""The ``daskhpc`` command line (the contract: docs/cli.md).

::

    daskhpc partition <model> <input> --parts K [--partitioner ...] [--objective ...] ...
    daskhpc plan <workflow> <inputs...> --parts K [workflow options] [--json OUT]
    daskhpc run  <workflow> <inputs...> [--parts K] [--workers N | --scheduler-file F | ...]
    daskhpc demo [--json OUT]
    daskhpc info [--calibrate [--save [--name NAME]]] [--json OUT]

Exit status: 0 success; 2 bad input or options (one line naming file, line and problem);
1 any other failure, with its cause (``--debug`` shows the traceback).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import os
import sys
import time
import traceback
import warnings

from daskhpc import _workflows, datasets
from daskhpc._version import __version__
from daskhpc._numba import prepare_kernels, usable_cores
from daskhpc._workflows import RunOptions, suggest
from daskhpc._terminal import json_on_stdout, stage
from daskhpc.errors import InputError
from daskhpc.io import expand_patterns, formats_of, read
from daskhpc.report import new_report, prediction_lines, write_report


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", metavar="OUT", help="write the JSON report here ('-' for stdout)")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p.set_defaults(parser=p)        # the command's parser, for one-line option errors


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
            wf = _workflows.load(name)
        except Exception as e:  # noqa: BLE001 - one broken plug-in must not break the CLI
            broken = wsub.add_parser(name, help=f"(unavailable: {e})")
            broken.set_defaults(broken=f"workflow {name!r} failed to load: {e}")
            continue
        w = wsub.add_parser(name, help=wf.help, description=wf.help)
        wf.add_arguments(w, mode)
        w.add_argument("--debug", action="store_true", help="show tracebacks")
        w.set_defaults(parser=w)


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
    p = sub.add_parser("predict", help="apply a saved model (run --save DIR) to a file",
                       description="Apply the model a run saved (--save DIR) to INPUT: "
                                   "ssgd a ratings file (user, item, rating), linear a "
                                   "LIBSVM file, cpals a .tns file of coordinates and "
                                   "values, gcn a graph as run gcn takes it. One CSV row "
                                   "per input record, and the figures its answers allow.")
    p.add_argument("model", metavar="DIR", help="a directory written by --save DIR")
    p.add_argument("input", metavar="INPUT", help="the records to predict")
    p.add_argument("--output", metavar="FILE",
                   help="write the predictions as CSV to FILE (default: the first rows "
                        "on stdout)")
    _common(p)
    i = sub.add_parser("info", help="versions, partitioner backends, MPI")
    i.add_argument("--calibrate", action="store_true",
                   help="measure alpha and beta on a cluster (LocalCluster unless given one)")
    i.add_argument("--save", action="store_true",
                   help="with --calibrate: keep them for --network calibrated, in "
                        "daskhpc-calibration.yaml of Dask's config directory ($DASK_CONFIG, "
                        "default ~/.config/dask)")
    i.add_argument("--name", metavar="NAME",
                   help="with --save: the cluster's name (default: local, or the "
                        "scheduler's address); --network calibrated:NAME selects it")
    i.add_argument("--workers", type=int, metavar="N",
                   help="LocalCluster workers (default daskhpc.runtime.workers)")
    i.add_argument("--scheduler-file", metavar="F")
    i.add_argument("--scheduler-address", metavar="A")
    _common(i)
    return parser


def cmd_partition(args) -> dict:
    from daskhpc._partition_cmd import format_table, partition_report

    _check_parts(args.parts)
    asked = args.epsilon is not None            # a promise the partition must keep
    if not asked:
        args.epsilon = _partition_defaults()["epsilon"]
    _workflows.check_bounds("--epsilon", args.epsilon, 0)
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


def _check_parts(parts) -> None:
    """``--parts`` below 1 is an error (never "the default"): exit 2 before any work."""
    if parts is not None:
        _workflows.check_parts(parts)


@contextlib.contextmanager
def _client_for(run):
    """A client of the cluster ``run`` (RunOptions) names (a new LocalCluster by default);
    a Ctrl-C inside closes it without the lost-data log lines of a cluster closed mid-run."""
    from daskhpc.runtime import connect

    joins = run.scheduler_file or run.scheduler_address
    what = (f"waiting for the scheduler of {joins}" if joins else
            f"starting a LocalCluster of {run.workers or 'the default number of'} workers")
    if os.environ.get("DASKHPC_MPI_CLIENT") == "1":     # the client task of a launcher
        job = {"slurm": "srun", "mpi": "MPI"}.get(os.environ.get("DASKHPC_LAUNCHER"), "MPI")
        what = f"joining the {job} job's scheduler"
    with stage(what):
        client = connect(run.scheduler_address, scheduler_file=run.scheduler_file,
                         n_workers=run.workers, dashboard_address=run.dashboard_address)
    if joins:
        from daskhpc.runtime import wait_for_cluster

        try:        # the workflow counts the workers: at least one must be there
            wait_for_cluster(client, run.worker_timeout)
        except BaseException:
            client.close()
            raise
    with client:
        try:
            yield client
        except KeyboardInterrupt:
            # the scheduler would log every part lost by closing its workers mid-run
            logging.getLogger("distributed").setLevel(logging.CRITICAL + 1)
            raise


def _workflow_call(args):
    """The workflow, its Call and RunOptions of a parsed ``plan``/``run`` command."""
    values = vars(args)
    if values.get("broken"):
        raise RuntimeError(values["broken"])
    wf = _workflows.load(args.workflow)
    _check_parts(values.get("parts"))
    call, run = wf.call_of(args)
    # a bundled data set by its name (daskhpc run ssgd ratings), unless a file has it;
    # a pattern the shell did not expand ('dir/*.parquet', quoted) names its files
    call.inputs = expand_patterns([i if i in wf.by_name else datasets.resolve(i)
                                   for i in call.inputs])
    return wf, call, run


def _check_network(network, mode: str) -> None:
    """A bad ``--network`` is a one-line error before anything is read or started."""
    from daskhpc.comm import network_model

    if network == "calibrate":
        if mode == "plan":
            raise InputError("--network calibrate measures a cluster: it is for daskhpc run "
                             "(plan takes a profile, or calibrated)")
        return
    if network is not None:
        network_model(network)


def cmd_plan(args) -> dict:
    wf, call, _ = _workflow_call(args)
    _check_network(call.network, "plan")
    with formats_of(call.inputs, call.format):   # --format, checked before any work
        wf.check(call)                 # options and inputs first (exit 2, one line)
        prepare_kernels(args.workflow, command="plan", file=sys.stderr)
        report = wf.plan(call)
    print("\n".join([wf.summary(report), *prediction_lines(report)]))
    return report


def cmd_run(args) -> dict:
    wf, call, run = _workflow_call(args)
    _check_network(run.network, "run")
    with formats_of(call.inputs, call.format):
        wf.check(call)                 # read and validate before the cluster starts
    prepare_kernels(args.workflow, command="run", file=sys.stderr)     # once, not per worker
    with formats_of(call.inputs, call.format), _client_for(run) as client:
        link = getattr(client, "dashboard_link", None)
        if link:
            pages = link.rsplit("/", 1)[0] + "/daskhpc"
            print(f"dashboard: {link} (daskhpc pages: {pages})", file=sys.stderr)
        report = wf.run(call, dataclasses.replace(run, client=client, json=None))
    print("\n".join([wf.summary(report), *prediction_lines(report)]))
    if not run.json:
        print("(the full report: --json FILE, or --json - for stdout)")
    return report


def cmd_demo(args) -> dict:
    from daskhpc._partition_cmd import demo_partitions, format_table

    _check_parts(args.parts)
    run = RunOptions(workers=args.workers)
    t0 = time.perf_counter()
    print(f"Partitioning the bundled data into {args.parts} parts (km1 objective):",
          flush=True)
    # no cluster yet: Mt-KaHyPar may use every core (the same partitions)
    rows = demo_partitions(args.parts, stage=stage, threads=usable_cores())
    print()
    print(format_table(rows, ["data", "model", "partitioner", "km1", "km1/random", "soed",
                              "cut", "imbalance", "time_s"]))
    report = new_report("demo", parts=args.parts, partitions=rows, workflows={})
    names = sorted(_workflows.available())
    if names and not args.no_cluster:
        prepare_kernels(*names, command="demo", file=sys.stderr)
        with _client_for(run) as client:
            print(f"\nEvery workflow on bundled data, LocalCluster of {args.workers} workers "
                  f"(dashboard {client.dashboard_link}):", flush=True)
            for name in names:
                wf = _workflows.load(name)
                print(f"\n== {name}: {wf.help} ==", flush=True)
                got = wf.demo(client)
                if got is None:
                    continue
                report["workflows"][name] = got
                print(wf.summary(got))
    report["timing"] = {"run_s": round(time.perf_counter() - t0, 2)}
    print(f"\ndemo done in {report['timing']['run_s']:.0f} s"
          + ("" if args.json else
             "; every number above and more: daskhpc demo --json demo.json"))
    return report


#: rows ``daskhpc predict`` shows without ``--output``
SHOWN_ROWS = 10


def cmd_predict(args) -> dict:
    from daskhpc._saved import load, write_csv

    result = load(args.model)
    wf = _workflows.load(result.workflow)
    args.input = datasets.resolve(str(args.input))     # a bundled data set by its name
    got = wf.predict(result, args.input)
    columns, quality = got["columns"], got.get("quality", {})
    n = len(next(iter(columns.values()))) if columns else 0
    if args.output:
        write_csv(args.output, columns)
        print(f"{n} predictions written to {args.output}")
    else:
        print(write_csv(None, columns, rows=SHOWN_ROWS), end="")
        if n > SHOWN_ROWS:
            print(f"... {n} rows (all of them: --output FILE)")
    if quality:
        print(f"{result.workflow} model on {args.input}: "
              + ", ".join(f"{k} {v:.6g}" for k, v in quality.items()))
    return new_report("predict", model=str(args.model), input=str(args.input),
                      model_workflow=result.workflow, rows=n, output=args.output,
                      quality=quality)


def cmd_info(args) -> dict:
    from daskhpc._info import calibrate_and_save, collect_info, format_info

    info = collect_info()
    print(format_info(info))
    if args.calibrate:
        run = RunOptions(workers=args.workers, scheduler_file=args.scheduler_file,
                         scheduler_address=args.scheduler_address)
        with _client_for(run) as client:
            cal = calibrate_and_save(client, save=args.save, name=args.name)
        info["calibration"] = cal
        t = cal["transfer"]
        print(f"\ncluster {cal['cluster']}: {cal['workers']} workers on {cal['hosts']} "
              f"host{'s' if cal['hosts'] != 1 else ''}, timed between {cal['pair'][0]} and "
              f"{cal['pair'][1]}")
        print(f"alpha = {t['alpha']:.3e} s per message, beta = {t['beta']:.3e} s per byte "
              f"({1 / t['beta'] / 1e9:.2f} GB/s) (a Dask transfer)")
        print(f"compute, every worker at once: {cal['flop_s']:.3e} s per flop of a sparse "
              f"kernel ({1e-9 / cal['flop_s']:.2f} GFlop/s; {cal['cache_flop_s']:.3e} in "
              f"{cal['cache_bytes'] / 2**20:.2f} MiB of cache), {cal['dense_flop_s']:.3e} s per "
              f"flop of a dense product ({1e-9 / cal['dense_flop_s']:.2f} GFlop/s); a step's "
              f"floor {cal['floor_s'] * 1e3:.2f} ms")
        print(f"link: {'full' if cal['duplex'] else 'half'} duplex (two opposite transfers "
              f"at once take {cal['duplex_ratio']:.2f}x one); every worker sending at once: "
              f"beta = {cal['ring_beta']:.3e} s per byte, all to all {cal['fan_beta']:.3e}")
        for mode, fit in cal["exchange"].items():
            print(f"  program messages, {mode} exchange: alpha = {fit['alpha']:.3e} s, "
                  f"beta = {fit['beta']:.3e} s/byte")
        if cal.get("saved_to"):
            print(f"saved to {cal['saved_to']}")
    return new_report("info", **info)


COMMANDS = {"partition": cmd_partition, "plan": cmd_plan, "run": cmd_run,
            "demo": cmd_demo, "predict": cmd_predict, "info": cmd_info}


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


def parse(argv) -> argparse.Namespace:
    """Parsed ``argv``; an unknown option is one line naming it and the option of its
    command it most likely meant (exit 2), not a page of usage."""
    args, unknown = build_parser().parse_known_args(argv)
    if unknown:
        parser = vars(args).get("parser")
        if parser is None:
            build_parser().parse_args(argv)         # the top-level error, exit 2
        print(f"daskhpc: {unknown_words(parser, unknown)}", file=sys.stderr)
        raise SystemExit(2)
    return args


def unknown_words(parser: argparse.ArgumentParser, unknown: list) -> str:
    """What is wrong with the ``unknown`` words of a command line, in one line: an unexpected
    argument, or an unknown option and the one it most likely meant."""
    options = [w for w in unknown if w.startswith("-") and len(w) > 1]
    if not options:
        return f"unexpected argument {unknown[0]!r} ({parser.prog} --help shows the usage)"
    word = options[0].split("=")[0]
    near = suggest(parser, [word])
    return (f"unknown option {word}{near}" if near else
            f"unknown option {word} ({parser.prog} --help lists the options)")


def _os_words(e: Exception) -> str:
    """An OSError as ``FILE: what is wrong`` (not ``[Errno 2] ...``); other errors as they are."""
    if isinstance(e, OSError) and e.filename is not None and e.strerror:
        return f"{e.filename}: {e.strerror[:1].lower()}{e.strerror[1:]}"
    return str(e)


def _main(argv, debug, report_hook) -> int:
    args = None
    try:
        args = parse(argv)
        opts = vars(args)
        with _progress_setting(opts.get("progress")), json_on_stdout(opts.get("json") == "-"):
            report = COMMANDS[args.command](args)
            if report_hook is not None and report is not None:
                report = report_hook(report)
        if opts.get("json") and report is not None:
            write_report(report, opts["json"])
        return 0
    except SystemExit as e:  # argparse: 2 for bad options, 0 for --help
        return int(e.code or 0)
    except (InputError, FileNotFoundError, IsADirectoryError, PermissionError) as e:
        if debug:
            traceback.print_exc()
        print(f"daskhpc: error: {_os_words(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("daskhpc: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 - the CLI reports every other failure as status 1
        if debug:
            traceback.print_exc()
        report = getattr(e, "report", None)     # a finished run that failed its promise
        out = vars(args).get("json") if args is not None else None
        if report is not None and out:
            with contextlib.suppress(Exception):
                write_report(report, out)
        if getattr(e, "one_line", False):      # the message says it all (no scheduler, ...)
            print(f"daskhpc: failed: {e}", file=sys.stderr)
            return 1
        where = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
        at = f" (at {os.path.basename(where.filename)}:{where.lineno})" if where else ""
        print(f"daskhpc: failed: {type(e).__name__}: {e}{at}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
