"""A run of several phases in one frame; :func:`run_job` is the run of one."""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from daskhpc.runtime._checkpoint import CheckpointDir
from daskhpc.runtime._connect import worker_addresses
from daskhpc.runtime._frame import (_failed_ends, _prepare_kernels, _publish_end,
                                    _publish_start, run_phase)
from daskhpc.runtime._job import GraphJob, Job, Outcome
from daskhpc.runtime._placement import Placement
from daskhpc.runtime._store import PartStore
from daskhpc.runtime._warm import started

#: The run's facts (``PhaseContext.remember``), next to the checkpoint's manifest.
FACTS = "phases.json"


@dataclass
class Phase:
    """One phase of a run.

    Parameters
    ----------
    name : str
        Its outcome's key, and the ``phase`` of its recovery records.
    job : callable
        ``job(PhaseContext) -> Job | GraphJob | None`` once the phases before it are done
        (None: nothing to run); the run's ``fingerprint``, ``placement`` and ``warm_up``
        hold for every phase.
    checkpointed, shown, plan : bool
        Its units are the checkpoint's steps (one phase at most); they move the progress
        bar and reach the callback; the frame publishes its plan (False: the workflow).
    """

    name: str
    job: Callable
    checkpointed: bool = True
    shown: bool = True
    plan: bool = True


@dataclass
class PhaseContext:
    """What a phase's ``job`` function gets: ``client``, ``store`` (the run's
    :class:`PartStore`), ``checkpoint`` (a :class:`CheckpointDir` or None), ``outcomes``
    (``{phase: Outcome}`` so far) and ``facts`` (what earlier phases, or the run resumed,
    remembered)."""

    client: Any
    store: PartStore
    checkpoint: CheckpointDir | None
    outcomes: dict = field(default_factory=dict)
    facts: dict = field(default_factory=dict)

    def remember(self, **facts) -> None:
        """Keep JSON-serialisable ``facts`` for the run, and in the checkpoint at once."""
        self.facts.update(json.loads(json.dumps(facts)))
        if self.checkpoint is not None:
            self.checkpoint.write_extra(FACTS, self.facts)


def run_phases(client, phases, *, name: str, nparts: int, fingerprint: dict | None = None,
               placement=None, part_of: Callable | None = None,
               warm_up: Callable | None = None, opened: Callable | None = None,
               label: str | None = None, units: int | None = None,
               unit_name: str | None = None, checkpoint=None, resume: bool = False,
               keep: int = 2, max_restarts: int = 3, callback: Callable | None = None,
               progress_bar: bool | None = None, low_latency: bool = True, store=None,
               announce: bool = True) -> dict[str, Outcome]:
    """Run ``phases`` (a list of :class:`Phase`) in order as one run.

    One checkpoint, part store, kernel preparation, dashboard run and restart budget for
    every phase (SpGEMM: its symbolic step, then its batches).

    Parameters
    ----------
    client : distributed.Client
    phases : list of Phase
    name : str
        The workflow: checkpoint manifest, kernels to prepare, the dashboard's run.
    nparts : int
    fingerprint : dict or callable, optional
        What must be equal to continue the checkpoint (a callable: called when needed).
    placement : Placement or callable, optional
        The parts' workers, or ``placement(workers) -> Placement`` (default round robin).
    part_of : callable, optional
        Part of a part-data key (default: keys are parts).
    warm_up : callable, optional
        Run on every worker once, before anything is timed.
    opened : callable, optional
        ``opened(checkpoint)`` once the checkpoint directory is accepted.
    label, units, unit_name : optional
        The dashboard's run: its name (default ``"<name> K=<nparts>"``), unit count
        and what a unit is.
    checkpoint : path or CheckpointDir, optional
        As :func:`run_job`; ``keep`` complete steps.
    resume, max_restarts, callback, progress_bar, low_latency, store, announce
        As :func:`run_job`; ``max_restarts`` is the whole run's budget.

    Returns
    -------
    dict
        ``{phase name: Outcome}`` of the phases that ran; each recovery record carries
        its ``phase``.

    Examples
    --------
    >>> def count(ctx):                                   # skipped once the total is known
    ...     return None if "total" in ctx.facts else count_job()
    >>> def sweep(ctx):
    ...     if "total" not in ctx.facts:
    ...         ctx.remember(total=ctx.outcomes["count"].value)
    ...     return sweep_job(ctx.facts["total"])
    >>> outs = run_phases(client, [Phase("count", count, checkpointed=False),
    ...                            Phase("sweep", sweep)], name="demo", nparts=4,
    ...                   checkpoint="ck/", resume=True)              # doctest: +SKIP
    """
    if max_restarts < 0:
        raise ValueError(f"max_restarts must be >= 0, not {max_restarts}")
    if sum(p.checkpointed for p in phases) > 1:
        raise ValueError("one phase at most keeps its units in the checkpoint "
                         "(checkpointed=True); the others remember what a resume needs")
    t_start = time.perf_counter()
    run_id = uuid.uuid4().hex[:10]
    own_store = store is None
    if own_store:
        if not isinstance(placement, Placement):
            workers = worker_addresses(client)
            placement = placement(workers) if placement else Placement(nparts, workers)
        store = PartStore(client, placement, run_id, part_of=part_of)
    ck = _open(checkpoint, name, fingerprint, resume, keep, opened)
    _prepare_kernels(client, name)
    if warm_up is not None or announce:           # one worker call for both
        sent = started(client, warm_up, count=announce)
    if announce:
        _publish_start(client, label or f"{name} K={nparts}", name, store.placement, units,
                       unit_name, sent=sent)
    ctx = PhaseContext(client, store, ck, facts=_facts(ck))
    recoveries: list = []                # the run's: one budget for every phase
    with _failed_ends(client, announce), _released(store if own_store else None):
        for i, phase in enumerate(phases):
            job = phase.job(ctx)
            if job is None:
                continue
            before = len(recoveries)
            try:
                ctx.outcomes[phase.name] = run_phase(
                    client, job, store, ck if phase.checkpointed else None, recoveries,
                    run_id=f"{run_id}p{i}", t_start=None if ctx.outcomes else t_start,
                    max_restarts=max_restarts, low_latency=low_latency,
                    callback=callback if phase.shown else None,
                    progress_bar=progress_bar if phase.shown else False,
                    announce=announce and phase.plan, warm_up=job.warm_up is not warm_up,
                    rows_at_end=announce and len(phases) == 1)
            finally:
                for rec in recoveries[before:]:
                    rec.setdefault("phase", phase.name)
    if announce:       # one phase: its report's numbers; several: the pages' own counters
        out = next(iter(ctx.outcomes.values()), None) if len(phases) == 1 else None
        numbers = () if out is None else (out.measured, out.history, out.ledger,
                                          out.execution)
        _publish_end(client, "finished", *numbers)
    return ctx.outcomes


def run_job(client, job: Job | GraphJob, *, checkpoint=None, resume: bool = False,
            max_restarts: int = 3, callback: Callable | None = None,
            progress_bar: bool | None = None, low_latency: bool = True,
            placement: Placement | None = None, store=None, announce: bool = True) -> Outcome:
    """Run ``job`` on ``client``'s cluster: a run of one phase.

    Parameters
    ----------
    client : distributed.Client
    job : Job or GraphJob
    checkpoint : path or CheckpointDir, optional
        A directory every worker and the client see: each part writes its state there
        after every unit, and a lost worker costs only the units since the newest one.
    resume, max_restarts : bool, int
        Continue the run in ``checkpoint`` (same fingerprint); lost workers survived
        (one more raises :class:`GaveUp`).
    callback, progress_bar : optional
        ``callback(row)`` per unit done; the progress display forced on or off.
    low_latency : bool
        Unbatch scheduler <-> worker control messages during the run.
    placement, store : optional
        Override ``job.placement``; part data already on the workers (kept, placed as
        recoveries go; default: a new store, released at the end).
    announce : bool
        Tell the dashboard the run's start, attempt graphs' plans and end.

    Returns
    -------
    Outcome

    Examples
    --------
    >>> out = run_job(client, job, checkpoint="ck/", resume=True)      # doctest: +SKIP
    >>> out.history[-1], out.measured["inter_worker_bytes"]            # doctest: +SKIP
    """
    return run_phases(
        client, [Phase(job.name, lambda ctx: job)], name=job.name, nparts=job.nparts,
        fingerprint=job.fingerprint,
        placement=job.placement if placement is None else placement,
        part_of=job.part_of, warm_up=job.warm_up, opened=job.opened, units=job.units,
        unit_name=job.unit_name, checkpoint=checkpoint, resume=resume,
        max_restarts=max_restarts, callback=callback, progress_bar=progress_bar,
        low_latency=low_latency, store=store, announce=announce)[job.name]


def run_on_parts(client, job: Job | GraphJob, build: Callable, *, rebuild=None,
                 release=(), name: str = "static", placement: Placement | None = None,
                 **frame) -> Outcome:
    """:func:`run_job` on part data built on the workers (a Dask collection's parts).

    ``build(placement) -> {part: Future}`` makes every part's data on its worker; then the
    objects in ``release`` are released, a part store adopts the parts as ``name``
    (``rebuild``: :meth:`PartStore.adopt`) and the run uses them. ``frame``: :func:`run_job`'s
    keywords.
    """
    from distributed import wait

    if placement is None:
        workers = worker_addresses(client)
        placement = job.placement(workers) if job.placement else Placement(job.nparts,
                                                                           workers)
    store = PartStore(client, placement, uuid.uuid4().hex[:10], part_of=job.part_of)
    try:
        futures = build(placement)
        wait(list(futures.values()))
        for source in release:             # the parts hold its data now
            source.release()
        store.adopt(name, futures, rebuild=rebuild)
        return run_job(client, job, store=store, **frame)
    finally:
        store.release()


@contextlib.contextmanager
def _released(store):
    """Release the run's own part data at its end, a failed one's too."""
    try:
        yield
    finally:
        if store is not None:
            store.release()


def _open(checkpoint, name, fingerprint, resume, keep, opened) -> CheckpointDir | None:
    if isinstance(checkpoint, CheckpointDir):
        return checkpoint
    if checkpoint is None:
        if resume:
            from daskhpc.errors import InputError

            raise InputError("resume needs a checkpoint directory (--checkpoint DIR)")
        return None
    if callable(fingerprint):           # (hashes the input: only where it is needed)
        fingerprint = fingerprint()
    ck = CheckpointDir(checkpoint, name, fingerprint or {}, resume=resume, keep=keep)
    if opened is not None:
        opened(ck)
    return ck


def _facts(ck: CheckpointDir | None) -> dict:
    """What the phases of the run in ``ck`` remembered."""
    path = None if ck is None else ck.extra(FACTS)
    if path is None or not os.path.exists(path):
        return {}
    try:
        with open(path) as f:
            facts = json.load(f)
        if not isinstance(facts, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as e:
        from daskhpc.errors import InputError

        raise InputError(f"{path}: unreadable checkpoint facts: {e}") from e
    return facts
