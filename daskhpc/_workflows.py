"""The Workflow protocol: one typed surface every workflow plugs in through.

A :class:`Workflow` subclass, registered in the entry-point group ``daskhpc.workflows``
(``cpals = "daskhpc.cpals._cli:CPALS"``), declares its options as a dataclass of
:func:`option` fields; :class:`RunOptions` is how any run runs. The command line, the demo,
the launchers, the kernel warm-up and the dashboard are generated from the class
(docs/architecture.md, "Writing a workflow"). No dask here.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import importlib
import math
import numbers
import os
import socket
import sys
from abc import ABC, abstractmethod
from dataclasses import MISSING, dataclass, field, fields
from importlib.metadata import entry_points
from typing import Any, Callable, ClassVar

from daskhpc.errors import InputError
from daskhpc.report import summarize, write_report

GROUP = "daskhpc.workflows"

#: How a Program's messages travel between workers (docs/decisions.md): pushed by the
#: sender, one task per worker and window (direct), or as task dependencies (graph).
EXCHANGES = ("direct", "graph")
#: The name of the direct exchange's worker plugin (``runtime._exchange``).
EXCHANGE_PLUGIN = "daskhpc-exchange"


def option(default=None, help: str = "", *, flag: str | None = None, choices=None,
           bounds: tuple | None = None, closed: str = "both", metavar: str | None = None,
           type: Callable | None = None, modes: tuple = ("plan", "run"), cli: bool = True):
    """A dataclass field that is also a command-line option.

    Parameters
    ----------
    default
        The default (a bool makes a switch: ``--x`` for False, ``flag="--no-x"`` for True).
    help : str
        One line for ``--help``; the default is appended unless the text says it.
    flag : str, optional
        The option's name (default ``--field-name``).
    choices, bounds : optional
        The values allowed, or the interval ``(low, high)`` a number lies in (None: that side
        unbounded; ``closed``: ``both``, ``left``, ``right`` or ``neither``, as
        scikit-learn's ``Interval``); API values are checked too, with one wording.
    metavar, type, modes
        As argparse's (``type``: the default's, or a parser raising InputError); the
        commands that take it (``plan``, ``run``); ``cli=False``: API only (a callback).

    Examples
    --------
    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class Options:
    ...     rank: int = option(10, "R, components", bounds=(1, None))
    >>> Options().rank
    10
    """
    meta = {"help": help, "flag": flag, "choices": choices, "metavar": metavar,
            "type": type, "modes": tuple(modes), "cli": cli, "bounds": bounds,
            "closed": closed}
    if isinstance(default, (list, dict, set)):
        return field(default_factory=lambda: default.copy(), metadata=meta)
    return field(default=default, metadata=meta)


def check_declared(obj) -> None:
    """The :func:`option` fields of dataclass ``obj`` checked against what they declare (the
    default's type, ``choices``, ``bounds``): a one-line InputError naming the option."""
    for f in fields(obj):
        m, v = f.metadata, getattr(obj, f.name)
        if "bounds" not in m or (v is None and (f.default is None or "None" in str(f.type))):
            continue
        flag = m["flag"] if m["flag"] and not m["flag"].startswith("--no-") else \
            "--" + f.name.replace("_", "-")
        kind = _kind(f)
        if kind is bool and not isinstance(v, bool) and type(v).__name__ != "bool_":
            raise InputError(f"{flag} must be True or False, not {v!r}")
        if m["choices"] and v not in m["choices"]:
            raise InputError(f"unknown {flag} {v!r}; choose one of {list(m['choices'])}")
        if kind in (int, float):
            if isinstance(v, bool) or not isinstance(
                    v, numbers.Integral if kind is int else numbers.Real):
                raise InputError(f"{flag} must be {'an integer' if kind is int else 'a number'}"
                                 f", not {v!r}")
            if m["bounds"]:
                check_bounds(flag, v, *m["bounds"], closed=m["closed"])


def _kind(f):
    """bool, int or float: the type of a field's default (else its ``type``); None: unchecked."""
    d = f.default if f.default is not MISSING else None
    t = type(d) if d is not None else f.metadata.get("type")
    return t if t in (bool, int, float) else None


def check_bounds(flag: str, value, low=None, high=None, closed: str = "both") -> None:
    """A one-line InputError unless ``value`` lies in the interval (``closed``: which ends
    belong to it: ``both``, ``left``, ``right``, ``neither``)."""
    left, right = closed in ("both", "left"), closed in ("both", "right")
    ok = (low is None or (value >= low if left else value > low)) and \
        (high is None or (value <= high if right else value < high)) and \
        math.isfinite(value)
    if ok:
        return
    if high is None:
        want = f"at least {low}" if left else f"greater than {low}"
    elif low is None:
        want = f"at most {high}" if right else f"less than {high}"
    else:
        want = f"in {'[' if left else '('}{low}, {high}{']' if right else ')'}"
    raise InputError(f"{flag} must be {want}, not {value!r}")


def check_parts(nparts, most: int | None = None, what: str = "") -> int:
    """``--parts`` checked, the one place: a positive integer, at most ``most`` (the count of
    ``what`` the parts divide, each part needing one)."""
    if isinstance(nparts, bool) or not isinstance(nparts, numbers.Integral):
        raise InputError(f"--parts must be an integer, not {nparts!r}")
    check_bounds("--parts", nparts, 1)
    if most is not None and nparts > most:
        raise InputError(f"--parts {nparts} is more than the {most} {what}: every part "
                         f"needs one; use fewer parts")
    return int(nparts)


def exchange_mode(exchange: str | None = None) -> str:
    """``exchange``, or the configured default (``daskhpc.runtime.exchange``), checked:
    the one place an exchange mode is validated.

    Examples
    --------
    >>> exchange_mode("graph")
    'graph'
    >>> exchange_mode("fast")
    Traceback (most recent call last):
    ...
    daskhpc.errors.InputError: --exchange must be direct or graph, not 'fast'
    """
    if exchange is None:
        from daskhpc import _config

        exchange = _config.get("runtime.exchange", "direct")
    if exchange not in EXCHANGES:
        raise InputError(f"--exchange must be direct or graph, not {exchange!r}")
    return exchange


@dataclass
class RunOptions:
    """How a run runs: the same options for every workflow.

    Every ``fit``/``multiply``/``allreduce`` takes ``run=RunOptions(...)`` or the same
    names as keywords; ``daskhpc run`` makes its flags from these fields. Validated once,
    when made (one-line :class:`~daskhpc.errors.InputError`).

    Examples
    --------
    >>> r = RunOptions(checkpoint="ck", resume=True)
    >>> r.resume, r.max_restarts, r.frame()["checkpoint"]
    (True, 3, 'ck')
    >>> RunOptions(resume=True)
    Traceback (most recent call last):
    ...
    daskhpc.errors.InputError: --resume needs --checkpoint DIR (the directory to resume from)
    """

    client: Any = option(None, "a distributed.Client (default: the current client, "
                               "or a cluster started from the options below)", cli=False)
    workers: int | None = option(None, "start a LocalCluster of N worker processes (default: "
                                       "daskhpc.runtime.workers, the cores)", metavar="N",
                                 type=int, bounds=(1, None))
    scheduler_file: str | None = option(None, "join the running scheduler that wrote this "
                                              "file (dask-mpi, dask-jobqueue, ...)",
                                        metavar="F")
    scheduler_address: str | None = option(None, "join the running scheduler at this "
                                                 "address (tcp://HOST:PORT)", metavar="A")
    worker_timeout: float | None = option(None, "seconds to wait for the workers a cluster "
                                                "object was scaled to and has not got yet "
                                                "(dask-jobqueue; default "
                                                "daskhpc.runtime.worker-timeout, 120)",
                                          cli=False)
    dashboard_address: str | None = option(None, "dashboard of the LocalCluster (HOST:PORT "
                                                 "or :PORT; default localhost:8787 or the "
                                                 "next free port)", metavar="ADDR")
    checkpoint: str | None = option(None, "write a checkpoint after every unit (epoch, "
                                          "iteration, batch) to DIR, a directory every worker "
                                          "sees, and recover from it when a worker is lost",
                                    metavar="DIR")
    resume: bool = option(False, "continue from the last checkpoint in --checkpoint DIR (a "
                                 "fresh start if there is none)")
    max_restarts: int = option(3, "lost workers a run recovers from before it gives up",
                               metavar="N", bounds=(0, None))
    progress: bool | None = option(None, "progress on stderr: by default a bar on a terminal "
                                         "and nothing when piped; --progress prints lines "
                                         "in a log too", type=bool)
    callback: Callable | None = option(None, "callback(row) with every unit's history row",
                                       cli=False)
    exchange: str | None = option(None, "messages between workers pushed by the sender "
                                        "(direct, the default: daskhpc.runtime.exchange) or "
                                        "as task dependencies (graph, the reference); the "
                                        "same numbers", choices=EXCHANGES)
    network: str | None = option(None, "the network a run is predicted on: calibrate "
                                       "(measure this cluster first), calibrated (what "
                                       "daskhpc info --calibrate --save kept; "
                                       "calibrated:NAME), infiniband-100g, ethernet-10g or "
                                       "default; what --partition auto chooses with and the "
                                       "report's plan.predicted_s_per_step (default: "
                                       "calibrated if saved, else default; with --partition "
                                       "auto on a cluster: calibrate)", metavar="PROFILE")
    check_serial: bool = option(False, "also run the serial reference and compare (the "
                                       "report's serial_check)")
    save: str | None = option(None, "keep the result (the model, its history and report) in "
                                    "DIR; daskhpc.load(DIR) reads it back", metavar="DIR")
    json: str | None = option(None, "write the JSON report here ('-': stdout, the summary "
                                    "then goes to stderr)", metavar="OUT")
    command: str | None = option(None, "the command recorded in the report", cli=False)

    def __post_init__(self):
        self.check()

    def check(self) -> None:
        """Every bad combination -> one-line InputError (before anything starts)."""
        if self.resume and not self.checkpoint:
            raise InputError("--resume needs --checkpoint DIR (the directory to resume from)")
        check_declared(self)
        if self.worker_timeout is not None and not isinstance(self.worker_timeout, str) and (
                isinstance(self.worker_timeout, bool) or
                not isinstance(self.worker_timeout, (int, float)) or self.worker_timeout < 0):
            raise InputError(f"worker_timeout must be seconds >= 0, not "
                             f"{self.worker_timeout!r}")
        if os.environ.get("DASKHPC_MPI_CLIENT") == "1":
            return      # python -m daskhpc.mpi checked the cluster options and wrote the file
        joins = [o for o, v in (("--scheduler-file", self.scheduler_file),
                                ("--scheduler-address", self.scheduler_address)) if v]
        if len(joins) == 2:
            raise InputError("give --scheduler-file or --scheduler-address, not both")
        if self.workers is not None and joins:
            raise InputError(f"--workers starts a local cluster; {joins[0]} joins a running "
                             "one (its workers are the job's): drop one of them")
        if self.dashboard_address and joins:
            raise InputError(f"--dashboard-address applies to a local cluster, not to "
                             f"{joins[0]} (the running scheduler has its dashboard already)")
        if self.dashboard_address is not None:
            check_dashboard_address(self.dashboard_address)

    @classmethod
    def of(cls, run: RunOptions | None = None, /, **keywords) -> RunOptions:
        """``run`` with ``keywords`` applied (the keywords of every ``fit``); an unknown
        keyword is a TypeError naming it, as Python's own.

        Examples
        --------
        >>> RunOptions.of(None, check_serial=True).check_serial
        True
        >>> RunOptions.of(RunOptions(max_restarts=1), resume=False).max_restarts
        1
        """
        names = {f.name for f in fields(cls)}
        bad = sorted(set(keywords) - names)
        if bad:
            near = difflib.get_close_matches(bad[0], names, 1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise TypeError(f"unexpected keyword argument {bad[0]!r}{hint}")
        if run is None:
            return cls(**keywords)
        return dataclasses.replace(run, **keywords) if keywords else run

    @classmethod
    def split(cls, run: RunOptions | None, keywords: dict) -> tuple[RunOptions, dict]:
        """``(RunOptions.of(run, <the run keywords>), <the other keywords>)``: for a
        ``fit(..., run=None, **options)`` whose keywords mix both."""
        names = {f.name for f in fields(cls)}
        mine = {k: v for k, v in keywords.items() if k in names}
        return cls.of(run, **mine), {k: v for k, v in keywords.items() if k not in names}

    def frame(self) -> dict:
        """The keywords of :func:`daskhpc.runtime.run_job` these options set."""
        return {"checkpoint": self.checkpoint, "resume": self.resume,
                "max_restarts": self.max_restarts, "callback": self.callback,
                "progress_bar": self.progress}

    def finish(self, result):
        """``result``, saved to ``save`` (its report's ``saved`` section says where) before
        its report is written to ``json``, where they are set."""
        if self.save:
            result.info["saved"] = {"dir": str(self.save),
                                    **(result.info.get("saved") or {})}
            result.save(self.save)
        if self.json:
            write_report(result.report(), self.json)
        return result

    def joins(self) -> bool:
        """Whether the options name a running scheduler (rather than a new cluster)."""
        return bool(self.scheduler_file or self.scheduler_address)


def check_dashboard_address(address) -> None:
    """Refuse a dashboard address LocalCluster could not bind (``HOST:PORT``, ``:PORT``)
    before the cluster starts, instead of its "Cluster failed to start".

    Examples
    --------
    >>> check_dashboard_address("localhost:8787"); check_dashboard_address(":0")
    >>> check_dashboard_address("nonsense")
    Traceback (most recent call last):
    ...
    daskhpc.errors.InputError: --dashboard-address must be HOST:PORT or :PORT, not 'nonsense'
    """
    if address is None or address is False:
        return
    host, sep, port = str(address).rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise InputError(f"--dashboard-address must be HOST:PORT or :PORT, not {address!r}")
    if host:
        try:
            socket.getaddrinfo(host.strip("[]"), int(port))
        except (OSError, UnicodeError) as e:
            raise InputError(f"--dashboard-address {address}: unknown host {host!r}") from e


@dataclass
class Call:
    """One command's inputs (files or dataset names) and ``options`` (the workflow's
    ``Options``); ``data`` is what :meth:`Workflow.check` read, for ``plan`` and ``run``."""

    inputs: list
    options: Any
    parts: int | None = None
    partition_file: str | None = None
    format: str | None = None
    data: Any = None
    workflow: str = ""
    #: ``--network``: the network ``plan`` predicts on (None: not asked)
    network: str | None = None

    def values(self, mode: str = "run") -> dict:
        """The options as keywords: the fields ``mode`` takes (``plan`` leaves out what
        only a run uses, such as epochs of evaluation), and those that are not flags."""
        return {f.name: getattr(self.options, f.name) for f in fields(self.options)
                if mode in f.metadata.get("modes", (mode,)) or not f.metadata.get("cli", True)}

    def one_input(self, what: str):
        """The one input of a workflow that takes one (what ``check`` read, if it did)."""
        if self.data is not None:
            return self.data
        if len(self.inputs) != 1:
            raise InputError(f"{self.workflow} takes one {what}, got {len(self.inputs)}: "
                             f"{list(self.inputs)}")
        return self.inputs[0]

    def parts_or(self, default: int | None, name: str) -> int:
        """``--parts``, else ``default``; neither: a one-line error."""
        K = self.parts if self.parts is not None else default
        if K is None:
            raise InputError(f"--parts is required for {name}")
        return int(K)


class Workflow(ABC):
    """A workflow: what the command line, the demo, the launchers, the kernel warm-up and
    the dashboard need to know of it, as typed hooks with defaults.

    Subclasses set the class attributes and override :meth:`plan` and :meth:`run` (and,
    where useful, the other hooks): docs/architecture.md, "Writing a workflow".

    Attributes
    ----------
    name, help : str
        The command's name and its one line in ``daskhpc run --help``.
    Options : type
        The workflow's own options, a dataclass of :func:`option` fields (its flags).
    inputs : str
        What the positional inputs are (``--help``).
    checkpoints, exchange : bool
        Whether ``run`` takes ``--checkpoint/--resume`` and ``--exchange``.
    kernels, dashboard : str or None
        The module with ``WARMUP``, and the one with ``PANELS``, the workflow's dashboard
        panels (default: the package's ``_kernels`` and ``_dashboard``, if any).
    """

    name: ClassVar[str]
    help: ClassVar[str]
    Options: ClassVar[type]
    inputs: ClassVar[str] = "input file(s)"
    checkpoints: ClassVar[bool] = True
    exchange: ClassVar[bool] = True
    #: inputs the workflow itself knows by name (gcn: ``cora``); other bundled data sets'
    #: names (``ratings``, ``tensor``, ...) are their files on the command line
    by_name: ClassVar[tuple] = ()
    kernels: ClassVar[str | None] = None
    dashboard: ClassVar[str | None] = None

    def check(self, call: Call) -> None:
        """Read and validate the inputs before any cluster starts (one-line InputError);
        keep what was read in ``call.data``. Options were checked when made."""

    @abstractmethod
    def plan(self, call: Call) -> dict:
        """``daskhpc plan``: the JSON report, no cluster."""

    @abstractmethod
    def run(self, call: Call, run: RunOptions) -> dict:
        """``daskhpc run``: the JSON report of a run on ``run.client``."""

    def demo(self, client) -> dict | None:
        """``daskhpc demo``: a small run on bundled data (None: no demo)."""
        return None

    def summary(self, report: dict) -> str:
        """The lines the command line prints for ``report``."""
        return summarize(report)

    def predict(self, result, path: str) -> dict:
        """``daskhpc predict DIR INPUT``: the saved ``result`` (:func:`daskhpc.load`) applied
        to the file ``path``, by default by the package's ``_result.predict_file``.

        Returns ``{"columns": {name: array}, "quality": {name: number}}``: a row per input
        record (written as CSV), and the figures the input's known answers allow.
        """
        apply = getattr(self._module(f"{self._package()}._result"), "predict_file", None)
        if apply is not None:
            return apply(result, path)
        raise InputError(f"daskhpc predict: a saved {self.name} result has no model to "
                         f"apply to {path} (load it in Python: daskhpc.load(DIR))")

    def small_run(self) -> list:
        """Arguments after the name for a few-second run on 3 workers (the launchers' and
        the report contract's tests); empty: none."""
        return []

    def warmup(self, command: str = "run") -> list:
        """The kernel warm-up functions of ``command`` (``plan``: ``WARMUP_PLAN``)."""
        module = self.kernels_module()
        attr = "WARMUP_PLAN" if command == "plan" else "WARMUP"
        found = getattr(module, attr, ()) if module is not None else ()
        return [_resolve(f) for f in (found if isinstance(found, (tuple, list)) else (found,))]

    def kernels_module(self):
        """The module of the workflow's numba kernels (None: it has none)."""
        return self._module(self.kernels or f"{self._package()}._kernels")

    def panels(self) -> dict:
        """``{key: (Component class, title)}``: the workflow's dashboard panels."""
        module = self._module(self.dashboard or f"{self._package()}._dashboard")
        return dict(getattr(module, "PANELS", {})) if module is not None else {}

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser, mode: str) -> None:
        """The flags of ``daskhpc plan|run <name>``: the common ones, ``Options``, and for
        ``run`` the :class:`RunOptions`."""
        parser.add_argument("inputs", nargs="*", help=cls.inputs)
        parser.add_argument("--parts", type=int, metavar="K",
                            help="number of parts (default for run: one per worker)")
        parser.add_argument("--partition-file", metavar="FILE",
                            help="use a saved partition (one part id per line)")
        parser.add_argument("--format", metavar="FMT",
                            help="format of the input file(s), instead of the one the name "
                                 "says: mtx, snap, tns, libsvm, ratings, edges; snap:weights "
                                 "reads a third column as edge values (default snap:ignore)")
        add_fields(parser.add_argument_group(cls.name), cls.Options, mode)
        skip = set() if cls.checkpoints else {"checkpoint", "resume", "max_restarts"}
        skip |= set() if cls.exchange else {"exchange"}
        add_fields(parser.add_argument_group("run" if mode == "run" else "output"),
                   RunOptions, mode if mode == "run" else "plan-output", skip=skip)

    @classmethod
    def call_of(cls, args: argparse.Namespace) -> tuple[Call, RunOptions]:
        """The hooks' arguments from parsed flags (options checked on the way)."""
        values = vars(args)
        options = options_of(cls.Options, values)
        # (``args.command`` is argparse's subcommand, "run": not RunOptions.command, the
        # command line the report records, which the report then takes from sys.argv)
        run = options_of(RunOptions, {k: v for k, v in values.items() if k != "command"})
        call = Call(list(values.get("inputs") or ()), options, values.get("parts"),
                    values.get("partition_file"), values.get("format"), workflow=cls.name,
                    network=values.get("network"))
        return call, run

    def _package(self) -> str:
        return type(self).__module__.rsplit(".", 1)[0]

    @staticmethod
    def _module(name: str):
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name != name:
                raise
            return None


def options_of(cls: type, values: dict):
    """Dataclass ``cls`` from the ``values`` named as its fields (others: defaults), checked:
    what its fields declare (:func:`check_declared`), then its ``check()`` (if any)."""
    obj = cls(**{f.name: values[f.name] for f in fields(cls) if f.name in values})
    if not isinstance(obj, RunOptions):      # (checked when made)
        check_declared(obj)
        check = getattr(obj, "check", None)
        if check is not None:
            check()
    return obj


def checked_options(cls: type, keywords: dict, what: str):
    """``cls(**keywords)``, checked; an unknown keyword is a TypeError naming it (``what``: the
    workflow)."""
    unknown = set(keywords) - {f.name for f in fields(cls)}
    if unknown:
        raise TypeError(f"unknown {what} option(s): {sorted(unknown)}")
    return options_of(cls, keywords)


def add_fields(group, cls: type, mode: str, skip=()) -> None:
    """Add one flag per :func:`option` field of dataclass ``cls`` taken by ``mode``."""
    for f in fields(cls):
        m = f.metadata
        if not m.get("cli", False) or f.name in skip:
            continue
        if mode == "plan-output":      # plan takes the report's destination and the network
            if f.name not in ("json", "network"):
                continue
        elif mode not in m["modes"]:
            continue
        default = f.default if f.default is not MISSING else f.default_factory()
        flag = m["flag"] or "--" + f.name.replace("_", "-")
        kw: dict = {"dest": f.name, "default": default, "help": _help(m["help"], default)}
        if m["metavar"]:
            kw["metavar"] = m["metavar"]
        if isinstance(default, bool):
            kw["action"] = "store_false" if flag.startswith("--no-") else "store_true"
            kw["help"] = m["help"]
        elif m["type"] is bool:
            kw["action"] = argparse.BooleanOptionalAction
            kw["help"] = m["help"]
        else:
            kw["type"] = _typed(m["type"] or (type(default) if default is not None else str))
            if m["choices"]:
                kw["choices"] = m["choices"]
        group.add_argument(flag, **kw)


def _typed(parse):
    """``parse`` for argparse: its one-line InputError becomes argparse's own message
    (``argument --layers: ...``, exit 2) instead of "invalid <lambda> value"."""
    if parse in (int, float, str):
        return parse

    def typed(text):
        try:
            return parse(text)
        except InputError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    typed.__name__ = getattr(parse, "__name__", "value")
    return typed


def _help(text: str, default) -> str:
    if default is None or "default" in text or isinstance(default, bool):
        return text
    shown = ",".join(map(str, default)) if isinstance(default, tuple) else default
    return f"{text} (default {shown})" if text else f"default {shown}"


def _resolve(f):
    if isinstance(f, str):
        module, _, name = f.partition(":")
        return getattr(importlib.import_module(module), name)
    return f


def suggest(parser: argparse.ArgumentParser, unknown: list) -> str:
    """``; did you mean --x?`` for the first unknown option, or ''. Names are compared
    without their dashes (every flag shares them: ``--colour`` is not ``--lr``)."""
    flags = {s.lstrip("-"): s for a in parser._actions for s in a.option_strings
             if s.startswith("--")}
    for word in unknown:
        if word.startswith("--"):
            near = difflib.get_close_matches(word.split("=")[0].lstrip("-"), flags, 1)
            if near:
                return f"; did you mean {flags[near[0]]}?"
    return ""


_FOUND: dict = {}      # tuple(sys.path) -> available()


def available() -> dict[str, str]:
    """name -> entry point value (``module:Class``) of every registered workflow, read once per
    ``sys.path`` (reading every distribution's metadata costs 25-50 ms)."""
    key = tuple(sys.path)
    if key not in _FOUND:
        _FOUND[key] = {ep.name: ep.value for ep in entry_points(group=GROUP)}
    return dict(_FOUND[key])


def package_of(name: str) -> str:
    """The package of registered workflow ``name`` (``daskhpc.cpals``)."""
    return available()[name].split(":")[0].rsplit(".", 1)[0]


_LOADED: dict = {}


def load(name: str) -> Workflow:
    """The :class:`Workflow` registered as ``name`` (one instance per process)."""
    found = available()
    if name not in found:
        known = ", ".join(sorted(found)) or "none (is daskhpc installed? pip install .)"
        raise InputError(f"unknown workflow {name!r} (available: {known})")
    value = found[name]
    if value not in _LOADED:
        module, _, attr = value.partition(":")
        mod = importlib.import_module(module)
        if attr:
            cls = getattr(mod, attr)
        else:       # a module: its one Workflow subclass
            [cls] = [c for c in vars(mod).values() if isinstance(c, type)
                     and issubclass(c, Workflow) and c is not Workflow
                     and c.__module__ == mod.__name__]
        if not (isinstance(cls, type) and issubclass(cls, Workflow)):
            raise TypeError(f"entry point {name} = {value!r} is not a daskhpc Workflow")
        _LOADED[value] = cls()
    return _LOADED[value]
