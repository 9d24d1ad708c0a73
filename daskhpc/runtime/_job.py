"""What a workflow hands the frame (:class:`Job`), and what it gets back (:class:`Outcome`).

A job is dask-free data and callables: the per-part static data, the units and how
their reports become history rows, and either a :class:`~daskhpc.comm.Program` of the
remaining units (a :class:`Job`) or a function that builds one attempt's graph
(a :class:`GraphJob`: :class:`Attempt` in, :class:`AttemptGraph` out). :func:`~daskhpc.runtime.run_job` runs it (``_frame``).
"""

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

__all__ = ["Job", "GraphJob", "Attempt", "AttemptGraph", "Outcome", "GaveUp", "Diverged",
           "exchange_mode", "not_finite"]


class GaveUp(WorkerLost):
    """More workers were lost than the run may recover from (``max_restarts``)."""

    def __init__(self, lost, recovered: int, max_restarts: int):
        super().__init__(lost)
        self.args = (f"{self.args[0]} (the run had recovered {recovered} time(s) already; "
                     f"max_restarts={max_restarts})",)


class Diverged(RuntimeError):
    """A unit reported a value that is not finite (NaN or inf): the run stopped there.

    ``unit``, ``key`` (the history row field, ``a.b[2]`` inside nested values) and
    ``value``; ``row`` is the whole history row. The CLI prints the message alone (exit 1).
    """

    one_line = True

    def __init__(self, name: str, unit_name: str, unit: int, key: str, value, row: dict,
                 hint: str = ""):
        self.unit, self.key, self.value, self.row = unit, key, value, row
        what = unit_name.removesuffix("s")
        super().__init__(f"{name} diverged: {key} = {value} in {what} {unit} (counting from "
                         f"0); the run stopped there{'; ' + hint if hint else ''}")


def not_finite(value, key: str = ""):
    """``(key, value)`` of the first number in ``value`` (a history row; nested dicts and
    lists too) that is NaN or infinite, or None. Strings, None and booleans are skipped.

    Examples
    --------
    >>> not_finite({"loss": 1.0, "fit": [0.5, float("nan")]})
    ('fit[1]', nan)
    >>> not_finite({"loss": 1.0, "note": "nan"}) is None
    True
    """
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
    """What every job hands :func:`run_job`: its units, how their reports become history
    rows, the per-part data, checkpoints and placement (see :class:`Job` and
    :class:`GraphJob` for the parameters)."""

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
    """A :class:`~daskhpc.comm.Program` job: what :func:`run_job` runs for the
    bulk-synchronous workflows (units of Program steps, on either exchange).

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
        What must be equal to continue a checkpoint (inputs, parts, seeds, options), or a
        function returning it: called only by a run with a checkpoint (it hashes inputs).
    program : callable
        ``program(first_unit) -> Program`` of units ``first_unit .. units - 1``.
    statics : dict or list, optional
        Per part, its static data (scattered once to its worker).
    assemble : callable, optional
        ``assemble(finals) -> value`` from the parts' ``final`` values (in part order).
    restore : callable, optional
        ``restore(checkpoint, n) -> start`` after ``n`` complete units (default: every
        part's ``part-<p>.npz`` of step n).
    reporters, savers : callable, optional
        ``reporters(unit) -> set``: who must report a unit (default every part);
        ``savers(unit) -> set``: the reporters whose ``saved`` reports make the unit's
        checkpoint complete (default: all of ``reporters``).
    stop : callable, optional
        ``stop(history) -> bool`` after every unit: end the run early (convergence). The
        program is then submitted one window of ``window`` units at a time.
    window : int, optional
        Units per submission (default: all at once, or 1 with ``stop``). Graph-building
        jobs get it as ``Attempt.window`` and build their windows themselves
        (``AttemptGraph.next``).
    placement : callable, optional
        ``placement(workers) -> Placement`` (default round robin).
    part_of : callable, optional
        Part of a static-data key (default: keys are parts).
    warm_up : callable, optional
        Run on every worker before anything is timed (load compiled kernels).
    unit_name : str
        What a unit is ("epochs", "iterations", "batches"): progress and messages.
    opened : callable, optional
        ``opened(checkpoint)`` once the checkpoint directory is accepted (write run-wide
        files next to its manifest, e.g. the partition).
    in_loop : bool
        Run steps in the workers' event loops (short steps).
    exchange : {"direct", "graph"}, optional
        Messages pushed directly by the sender, one task per worker and window
        (``runtime._exchange``: a message costs no scheduler round trip), or as task
        dependencies, one task group per worker and step (the reference); the results
        are the same bit for bit. Default ``daskhpc.runtime.exchange`` (direct).
    finite : bool
        Every number of every history row must be finite: a NaN or inf (a diverged loss,
        objective or fit) stops the run with :class:`Diverged` (default True).
    diverged_hint : str
        Appended to the :class:`Diverged` message (what the user may change, e.g.
        "try a smaller --lr").
    keep_finals : bool
        The parts' final values stay on their workers: the run's value is one
        ``distributed.Future`` per part (in part order; ``assemble`` is not called).
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
    """A job whose attempts are graphs the workflow builds (graphs that are not
    bulk-synchronous programs: SSGD's sub-epoch groups, SpGEMM's broadcast DAG).

    Parameters
    ----------
    attempt : callable
        ``attempt(Attempt) -> AttemptGraph`` builds one attempt's graph.
    ordered : bool
        Units build on each other: a restart continues from the newest checkpoint. If
        False (independent batches) only units that are not *safe* run again.
    lost : callable, optional
        Unordered jobs: ``lost(workers, safe_units, durable_units) -> dict`` with
        ``invalidated`` (the units whose results died with the workers) and any fields the
        job wants in the recovery record.
    entry, unentry : callable, optional
        ``entry(unit, row) -> (step, meta)``: how a complete unit is recorded in the
        checkpoint manifest (default: step ``unit + 1``, "state after unit + 1 units",
        with the row as ``history``); ``unentry(meta) -> (unit, row)`` reads it back.
    **others
        As :class:`Job` (name, nparts, units, row, fingerprint, statics, restore,
        reporters, savers, stop, window, placement, part_of, warm_up, unit_name, opened,
        finite, diverged_hint).
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
    ``collect(values)`` turns their values into the run's value; ``cleanup()`` runs after
    the attempt, failed or not, and ``worker_cleanup`` (``(fn, *args)``) on every worker
    then, as ``fn(*args, dask_worker=...)``, in the frame's closing call of the attempt
    (one round trip fewer than a ``client.run`` of its own). For planned-vs-measured
    bytes: ``plans``, a list of ``(Plan, unit_of_phase)`` or ``(Plan, unit_of_phase,
    broadcast)`` (part-level plans of what the attempt sends, a phase mapped to its unit;
    ``broadcast``: its messages are keys fetched once per receiving worker, default
    ``broadcast`` below), or a callable that returns that list when the bytes are
    measured (after the attempt's tasks: a plan still being computed while they run,
    which the frame then does not show; the job publishes its own), and
    ``unit_of_key(key)`` (the unit of a transferred key, or None).
    ``hold``: keys whose futures outlive the attempt (results a later step needs, such as
    SpGEMM's kept blocks): submitted with the graph, handed to ``held({key: Future})``,
    and never released by the frame.

    Windows: ``next()``, if given, builds the graph of the next window of units (or
    returns None after the last one) while this one runs; the frame submits it once this
    one's ``wanted`` keys are all done (they must say the whole window is), so no task
    may depend on another window's. The last window's ``collect`` gets the values of its
    ``wanted``; the first one's ``plans``, ``unit_of_key``, ``cleanup`` and
    ``worker_cleanup`` serve the whole attempt.
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
