"""The pieces ``fit`` hands the workflow frame (``daskhpc.runtime.run_job``), and the
checks it runs on what comes back: :func:`cpals_job`, :func:`serial_check` and
:func:`measured_section`."""

from __future__ import annotations

import functools
from dataclasses import replace

import numpy as np

from daskhpc.comm import run_local
from daskhpc.report import compare_arrays

from . import _program as P
from ._checkpoint import save_distribution
from ._kernels import ROW_FIRST_MAX, mttkrp_into, slices
from ._rows import col_absmax, col_inner, init_rows, scatter_rows, sum_rows_into
from ._serial import run_serial
from ._setup import prepare

#: Steps run in the workers' event loops (no thread hand-off) when a worker's MTTKRP work
#: per mode, nonzeros x R, is at most this (about 1-2 ms of compute, measured); longer
#: steps would block the loop, and the heartbeats, for their whole duration.
IN_LOOP_WORK = 2_000_000


def in_loop_default(s) -> bool:
    """Short steps: the largest part's nonzeros per mode x R <= :data:`IN_LOOP_WORK`."""
    load = max(int(s.dist.loads(s.tensor, n).max()) for n in range(s.N))
    return load * s.R <= IN_LOOP_WORK


def cpals_job(s, *, in_loop: bool | None = None, stop: bool | None = None,
              exchange: str | None = None, statics: bool = True):
    """The frame's Job for the run prepared in ``s``: what :func:`fit` hands
    :func:`daskhpc.runtime.run_job` (e.g. to run one prepared setup several times).

    Parameters
    ----------
    s : Setup
        From :func:`daskhpc.cpals.prepare`.
    in_loop, stop : bool, optional
        Run the steps in the workers' event loops (default: when they are short); apply
        the tol rule between iterations (default: when ``tol > 0``).
    exchange : {"direct", "graph"}, optional
        As :class:`daskhpc.runtime.Job`.

    Returns
    -------
    daskhpc.runtime.Job
        Its Outcome's ``value`` is (lambda, factors).

    Examples
    --------
    >>> from daskhpc import cpals, datasets
    >>> s = cpals.prepare(datasets.path("tensor"), 2, grain="coarse", partition="block",
    ...                   rank=4, iters=3, tol=0)
    >>> job = cpals.cpals_job(s, exchange="graph")
    >>> job.units, job.exchange, job.stop is None
    (3, 'graph', True)
    >>> out = run_job(client, job)                                    # doctest: +SKIP
    """
    from daskhpc.runtime import Job, exchange_mode

    use_stop = s.options.tol > 0 if stop is None else bool(stop)
    mode = exchange_mode(exchange)
    if in_loop is None:
        in_loop = in_loop_default(s)
    return Job("cpals", s.K, s.options.iters,
               row=functools.partial(P.row, s), fingerprint=functools.partial(P.fingerprint, s),
               program=functools.partial(P.program, s, stop=use_stop),
               statics=P.statics(s) if statics else None,
               assemble=functools.partial(P.assemble, s),
               stop=functools.partial(P.stop, s) if use_stop else None,
               warm_up=functools.partial(warm_up, s.N), unit_name="iterations",
               opened=functools.partial(save_distribution, s),
               in_loop=bool(in_loop), exchange=mode)     # resolved: the report says which


def warm_up_parts() -> None:
    """Load the kernels that build the parts' data on the client (both grains)."""
    dense = np.zeros((3, 3, 2))
    dense[[0, 1, 2, 0, 1, 2], [0, 1, 2, 1, 2, 0], [0, 1, 0, 1, 0, 1]] = 1.0
    for grain, partition in (("fine", "random"), ("coarse", "block")):
        P.statics(prepare(dense, 2, grain=grain, partition=partition, rank=2))


def warm_up(order: int = 3) -> int:
    """Load every numba kernel a CP-ALS step calls with a run's argument types."""
    R, n = 2, 4
    U = [init_rows(0, m, np.arange(n), R) for m in range(order)]
    M = np.empty((n, R))
    # the parts' dtypes (``_data``): int32 indices, float32 values when exact, else float64
    for itype, vtype in ((np.int32, np.float32), (np.int32, np.float64)):
        coords = np.array([[i % n for i in range(16)], [i // n for i in range(16)]] +
                          [[0] * 16] * (order - 2), dtype=itype)
        vals = np.ones(16, vtype)
        for mode in (0, 2):
            for fibers in (False, True):
                mttkrp_into(slices(coords, vals, mode, (n,) * order, fibers=fibers), U, M)
        # the grouping's other path: rows longer than ROW_FIRST_MAX nonzeros on average
        big = ROW_FIRST_MAX + 1
        slices(np.zeros((order, big), itype), np.ones(big, vtype), 0, (1,) * order,
               select=np.arange(big, dtype=np.int64))
    col_absmax(M)
    col_inner(M, M)
    ro = M[:2].copy()
    sum_rows_into(M, np.arange(2, dtype=np.int64), ro)
    ro.flags.writeable = False              # received messages may be read-only buffers
    sum_rows_into(M, np.arange(2, dtype=np.int64), ro)
    scatter_rows(M, np.arange(2, dtype=np.int64), M[:2].copy())
    return order


def serial_check(s, lam, factors, history, *, rtol: float = 1e-9) -> dict:
    """The ``serial_check`` section: against the partition-aware and the textbook references."""
    n = len(history)
    fits = np.array([h["fit"] for h in history])
    s_n = replace(s, options=replace(s.options, iters=n))
    finals, reports = run_local(P.program(s_n), P.statics(s_n))
    lam_pa, fac_pa = P.assemble(s_n, finals)
    fits_pa = np.array([P.row(s_n, u, r)["fit"] for u, r in enumerate(reports)])
    out = compare_arrays([(lam, lam_pa), *zip(factors, fac_pa), (fits, fits_pa)])
    out["reference"] = "partition-aware serial (run_local of the same program)"
    o = s.options
    ser = run_serial(s.tensor, o.rank, o.iters, o.tol, o.seed, reg=o.reg,
                     nonnegative=o.nonnegative, init=s.start_factors())
    fits_s = np.array([h["fit"] for h in ser["history"]])
    plain = compare_arrays([(lam, ser["lam"]), *zip(factors, ser["factors"])], rtol=rtol)
    if fits_s.size == fits.size:
        f = compare_arrays([(fits, fits_s)], rtol=rtol)
        plain["within_tolerance"] = bool(plain["within_tolerance"] and f["within_tolerance"])
        plain["fit_max_abs_diff"] = f["max_abs_diff"]
    else:
        plain["within_tolerance"] = False
    plain["iterations"] = [int(fits.size), int(fits_s.size)]
    plain["max_rel_diff"] = max(
        [_rel(a, b) for a, b in zip(factors, ser["factors"])] + [_rel(lam, ser["lam"])] +
        ([_rel(fits, fits_s)] if fits_s.size == fits.size else []))
    out["plain_serial"] = plain
    return out


def _rel(a, b) -> float:
    scale = float(np.max(np.abs(b), initial=0.0))
    return float(np.max(np.abs(np.asarray(a) - b), initial=0.0) / scale) if scale else 0.0


def measured_section(s, out, undelivered: bool) -> dict:
    """The report's ``measured`` section, with planned and measured messages per iteration;
    ``undelivered``: a graph-mode run stopped by tol never fetched its last step's messages."""
    measured = dict(out.measured)
    rows = {h["unit"]: h for h in out.history}
    prog = last_program(s, out.recovery)
    pl = out.placement
    workers = list(pl.workers)
    owner = [workers.index(pl.worker(p)) for p in range(s.K)]
    placed = prog.plan().placed(owner, len(workers))
    last = max(rows) if rows else None
    cut = prog.unit_steps[last - prog.first_unit] if undelivered and last is not None \
        else None
    planned: dict = {}
    dropped_msgs, dropped_bytes = 0, 0
    for t, nbytes in zip(placed.phase.tolist(), placed.message_bytes().tolist()):
        if t == cut:
            dropped_msgs, dropped_bytes = dropped_msgs + 1, dropped_bytes + int(nbytes)
            continue
        u = prog.unit_of(int(t))
        planned[u] = planned.get(u, 0) + 1
    got: dict = {}
    from daskhpc.runtime import step_of_key

    for e in (out.ledger.entries or []) if out.ledger is not None else []:
        steps = [step_of_key(k) for k in e["keys"]]
        steps = [t for t in steps if t is not None]
        if steps:
            u = prog.unit_of(min(steps))
            got[u] = got.get(u, 0) + 1
    for u, h in rows.items():
        if u >= prog.first_unit:
            h["planned_messages"] = planned.get(u, 0)
            h["measured_messages"] = got.get(u, 0)
    if cut is not None and "planned_bytes" in measured:
        measured["planned_messages"] -= dropped_msgs
        measured["planned_bytes"] -= dropped_bytes
        rows[last]["planned_bytes"] = rows[last].get("planned_bytes", 0) - dropped_bytes
        if measured.get("inter_worker_messages"):
            measured["framing_bytes_per_message"] = (
                measured["inter_worker_bytes"] - measured["planned_bytes"]) / \
                measured["inter_worker_messages"]
    measured["iterations_measured"] = sum(1 for h in out.history if "measured_bytes" in h)
    return measured


def last_program(s, recovery: dict):
    """The program of the run's last attempt (from the iteration it started at)."""
    recs = recovery.get("recoveries") or []
    first = recs[-1]["restart"] if recs and recs[-1].get("restart") is not None else \
        (recovery.get("resumed_from") or 0)
    return P.program(s, first)
