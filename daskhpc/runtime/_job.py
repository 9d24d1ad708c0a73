"""What a workflow hands the frame (:class:`Job`, :class:`GraphJob`), and what it gets
back (:class:`Outcome`)."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

from daskhpc._workflows import exchange_mode  # noqa: F401 - re-exported
from daskhpc.runtime._checkpoint import CheckpointDir
from daskhpc.runtime._fault import WorkerLost
from daskhpc.runtime._ledger import TransferLedger
from daskhpc.runtime._placement import Placement


class GaveUp(WorkerLost):
    """More workers were lost than the run may recover from (``max_restarts``)."""

    def __init__(self, lost, recovered: int, max_restarts: int):
        super().__init__(lost)
        self.args = (f"{self.args[0]} (the run had recovered {recovered} time(s) already; "
                     f"max_restarts={max_restarts})",)


class Diverged(RuntimeError):
    """A unit reported a value that is not finite (NaN or inf): the run stopped there.

    ``unit``, ``key`` (the history row field, ``a.b[2]`` inside nested values), ``value``
    and ``row``. The CLI prints the message alone (exit 1).
    """

    one_line = True

    def __init__(self, name: str, unit_name: str, unit: int, key: str, value, row: dict,
                 hint: str = ""):
        self.unit, self.key, self.value, self.row = unit, key, value, row
        what = unit_name.removesuffix("s")
        super().__init__(f"{name} diverged: {key} = {value} in {what} {unit} (counting from "
                         f"0); the run stopped there{'; ' + hint if hint else ''}")


def not_finite(value, key: str = ""):
    """``(key, value)`` of the first NaN or infinite number in ``value`` (a history row,
    nested dicts and lists too), or None. Strings, None and booleans are skipped."""
    if isinstance(value, dict):
        for k, v in value.items():
            got = not_finite(v, f"{key}.{k}" if key else str(k))
            if got is not None:
                return got
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            got = not_finite(v, f"{key}[{i}]")
            if got is not None:
                return got
    elif isinstance(value, numbers.Real) and not isinstance(value, bool):
        if not math.isfinite(value):
            return key, float(value)
    return None


@dataclass
class _Units:
    """What every job hands :func:`run_job` (parameters: :class:`Job`, :class:`GraphJob`)."""

    name: str
    nparts: int
    units: int
    row: Callable[[int, dict], dict]
    fingerprint: dict | Callable[[], dict] = field(default_factory=dict)
    statics: Any = None
    restore: Callable | None = None
    reporters: Callable | None = None
    savers: Callable | None = None
    stop: Callable | None = None
    window: int | None = None
    placement: Callable | None = None
    part_of: Callable | None = None
    warm_up: Callable | None = None
    unit_name: str = "units"
    opened: Callable | None = None
    finite: bool = True
    diverged_hint: str = ""


@dataclass
class Job(_Units):
    """A :class:`~daskhpc.comm.Program` job: units of Program steps, on either exchange.

    Parameters
    ----------
    name : str
        The workflow ("cpals"): checkpoint manifests, keys, progress label.
    nparts : int
    units : int
        Iterations of the whole run (epochs, ALS iterations, calls).
    row : callable
        ``row(unit, {reporter: values}) -> dict``: the history row of a complete unit.
    fingerprint : dict or callable
        What must be equal to continue a checkpoint (a callable: called when needed).
    program : callable
        ``program(first_unit) -> Program`` of units ``first_unit .. units - 1``.
    statics : dict or list, optional
        Per part, its static data (scattered once to its worker).
    assemble : callable, optional
        ``assemble(finals) -> value`` from the parts' ``final`` values (in part order).
    restore : callable, optional
        ``restore(checkpoint, n) -> start`` after ``n`` units (default: ``part-<p>.npz``).
    reporters, savers : callable, optional
        ``reporters(unit) -> set``: who reports a unit (default every part);
        ``savers(unit) -> set``: whose ``saved`` reports complete its checkpoint.
    stop : callable, optional
        ``stop(history) -> bool`` after every unit: end the run early (convergence).
    window : int, optional
        Units per submission (default: all at once, or 1 with ``stop``).
    placement, part_of, warm_up, opened : callable, optional
        ``placement(workers) -> Placement`` (default round robin); the part of a
        static-data key (default: keys are parts); run on every worker before anything is
        timed; ``opened(checkpoint)`` once the checkpoint directory is accepted.
    unit_name : str
        What a unit is ("epochs", "iterations", "batches").
    in_loop : bool
        Run steps in the workers' event loops (short steps).
    exchange : {"direct", "graph"}, optional
        Messages pushed by the sender (one task per worker and window) or as task
        dependencies (the reference); the same results. Default ``daskhpc.runtime.exchange``.
    finite, diverged_hint : bool, str
        A NaN or inf in a history row stops the run with :class:`Diverged` (default True);
        the hint is appended to its message (e.g. "try a smaller --lr").
    keep_finals : bool
        The run's value is one ``distributed.Future`` per part, on its worker.
    """

    program: Callable | None = None
    assemble: Callable | None = None
    in_loop: bool = False
    exchange: str | None = None
    keep_finals: bool = False
    # not a graph job: units build on each other, the frame restarts from a checkpoint
    attempt: ClassVar[None] = None
    ordered: ClassVar[bool] = True
    lost: ClassVar[None] = None
    entry: ClassVar[None] = None
    unentry: ClassVar[None] = None

    def __post_init__(self):
        if self.program is None:
            raise TypeError(f"{self.name}: a Job needs program=; an attempt graph is a GraphJob")


@dataclass
class GraphJob(_Units):
    """A job whose attempts are graphs the workflow builds (SSGD's sub-epoch groups,
    SpGEMM's broadcast DAG).

    Parameters
    ----------
    attempt : callable
        ``attempt(Attempt) -> AttemptGraph`` builds one attempt's graph.
    ordered : bool
        Units build on each other: a restart continues from the newest checkpoint. If
        False only units that are not *safe* run again.
    lost : callable, optional
        Unordered jobs: ``lost(workers, safe_units, durable_units) -> dict`` with
        ``invalidated`` (units whose results died) and fields for the recovery record.
    entry, unentry : callable, optional
        ``entry(unit, row) -> (step, meta)``: how a complete unit is recorded in the
        checkpoint manifest (default: step ``unit + 1``, the row as ``history``);
        ``unentry(meta) -> (unit, row)`` reads it back.
    **others
        As :class:`Job`.
    """

    attempt: Callable | None = None
    ordered: bool = True
    lost: Callable | None = None
    entry: Callable | None = None
    unentry: Callable | None = None
    # not a program job
    program: ClassVar[None] = None
    assemble: ClassVar[None] = None
    in_loop: ClassVar[bool] = False
    exchange: ClassVar[None] = None
    keep_finals: ClassVar[bool] = False

    def __post_init__(self):
        if self.attempt is None:
            raise TypeError(f"{self.name}: a GraphJob needs attempt=")


@dataclass
class Attempt:
    """What a graph-building job gets for one attempt."""

    client: Any
    number: int
    token: str
    placement: Placement
    store: Any
    topic: str
    todo: list
    start: Any = None
    checkpoint: CheckpointDir | None = None
    window: int | None = None        # the job's units per submission (Job.window)
    units_per_task: int = 0          # direct mode: units per task (0: the window)


@dataclass
class AttemptGraph:
    """One attempt's graph and how to read it.

    ``tasks``/``where``: the pinned graph; ``wanted``: the keys to wait on;
    ``collect(values)``: the run's value; ``cleanup()`` runs after the attempt, and
    ``worker_cleanup`` (``(fn, *args)``) on every worker in the frame's closing call. For
    planned-vs-measured bytes: ``plans``, a list of ``(Plan, unit_of_phase[, broadcast])``
    or a callable returning it after the attempt's tasks (the job then publishes its own),
    and ``unit_of_key(key)``. ``hold``: keys whose futures outlive the attempt, handed to
    ``held({key: Future})`` and never released by the frame.

    ``next()``, if given, builds the next window's graph (None after the last) while this
    one runs; it is submitted once this one's ``wanted`` keys are done, so no task may
    depend on another window's. The first window's ``plans``, ``unit_of_key``, ``cleanup``
    and ``worker_cleanup`` serve the whole attempt.
    """

    tasks: dict
    where: dict
    wanted: list
    collect: Callable | None = None
    cleanup: Callable | None = None
    worker_cleanup: tuple | None = None
    plans: list | Callable = field(default_factory=list)
    unit_of_key: Callable | None = None
    broadcast: bool = False
    hold: list = field(default_factory=list)
    held: Callable | None = None
    next: Callable | None = None


@dataclass
class Outcome:
    """What :func:`run_job` returns."""

    value: Any
    history: list
    measured: dict
    timing: dict
    recovery: dict
    placement: Placement
    ledger: TransferLedger | None = None
    execution: dict = field(default_factory=dict)   # the report's ``execution`` section
