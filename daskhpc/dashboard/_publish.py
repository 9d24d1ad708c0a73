"""Client side: send a workflow's numbers to the dashboard pages (one
``run_on_scheduler`` round trip a call; publishing never fails a run, it logs a warning)."""

from __future__ import annotations

import asyncio
import logging
import threading

import numpy as np

from daskhpc.dashboard._plugin import SENT_METRIC, DashboardPlugin
from daskhpc.dashboard._state import PLUGIN_NAME, TOPICS

logger = logging.getLogger(__name__)


#: Publications under way (``publish(..., wait=False)``): client id -> futures; the lock
#: lets a run's threads publish (SpGEMM's plan comes from a thread of its own)
_PENDING: dict = {}
_LOCK = threading.Lock()


def publish(client, topic: str, *, sent: dict | None = None, wait: bool = True,
            **data) -> bool:
    """Show ``data`` (the topic's fields; numpy values converted) on the daskhpc pages.

    Parameters
    ----------
    client : distributed.Client
    topic : str
        One of :data:`TOPICS`, which lists each one's fields.
    sent : dict, optional
        ``run`` and ``end``: the workers' byte counters (``{worker: sent_now()}``), if
        the caller read them already (else read here: a round trip).
    wait : bool
        Return whether the scheduler stored it; False: True at once (the client's next
        publication waits for this one, so the topics arrive in order).

    Examples
    --------
    >>> workers = worker_addresses(client)                                  # doctest: +SKIP
    >>> publish(client, "run", name="ssgd 3 parts", workflow="ssgd", workers=workers)
    ... # doctest: +SKIP
    True
    >>> publish(client, "plan", matrix=plan_matrix(plan, owner), workers=workers)
    ... # doctest: +SKIP
    True
    """
    if topic not in TOPICS:
        raise ValueError(f"unknown dashboard topic {topic!r}; known: {', '.join(TOPICS)}")
    with _LOCK:         # this client's publications under way first, in order
        earlier = _PENDING.pop(client.id, [])
    for p in earlier:
        _settle_one(*p)
    try:
        # A run's zero (and its end) is read from the workers themselves (the heartbeats
        # may lag); an end with its own measured matrix needs no counters.
        counted = topic == "run" or (topic == "end" and "matrix" not in data)
        baseline = (sent if sent is not None else client.run(sent_now)) if counted else None
        if not wait:
            going = asyncio.run_coroutine_threadsafe(
                client.run_on_scheduler(_store, topic, _plain(data), baseline,
                                        asynchronous=True),
                client.loop.asyncio_loop)
            with _LOCK:
                pending = _PENDING.setdefault(client.id, [])
                done = [p for p in pending if p[1].done()]
                pending[:] = [p for p in pending if p not in done] + [(topic, going)]
            for p in done:
                _settle_one(*p)
            return True
        return bool(client.run_on_scheduler(_store, topic, _plain(data), baseline))
    except Exception as e:  # noqa: BLE001 - the dashboard must never fail a run
        logger.warning("daskhpc dashboard: could not publish %r: %s", topic, e)
        return False


def _settle_one(topic: str, going) -> None:
    try:
        going.result()
    except Exception as e:  # noqa: BLE001 - the dashboard must never fail a run
        logger.warning("daskhpc dashboard: could not publish %r: %s", topic, e)


def ensure_plugin(client) -> None:
    """Register the dashboard plugin on the client's scheduler unless it has one."""
    client.run_on_scheduler(_ensure)


def plan_matrix(plan, owner, nworkers: int | None = None,
                dedupe_phase_src: bool = False) -> np.ndarray:
    """Planned bytes between workers (row sends to column), from a part-level
    :class:`~daskhpc.comm.Plan`; messages between parts of one worker cost nothing.

    ``owner[part]`` is the index of the worker that holds the part; ``nworkers`` the size of
    the result (default ``max(owner) + 1``); ``dedupe_phase_src`` counts a part's message once
    per (phase, receiving worker), as a Dask worker fetches a key once for all its parts.

    Examples
    --------
    >>> from daskhpc.comm import Plan
    >>> p = Plan.from_messages(3, [(0, 0, 1, [4, 5]), (0, 2, 1, [6])], word_bytes=8)
    >>> plan_matrix(p, owner=[0, 1, 1]).tolist()        # part 2 lives with part 1
    [[0.0, 16.0], [0.0, 0.0]]
    """
    placed = plan.placed(owner, nworkers, broadcast=dedupe_phase_src)
    return placed.bytes_matrix().astype(np.float64)


def plan_fields(plans, owner, nworkers: int, units: int) -> dict:
    """The ``plan`` topic's fields for a whole run: ``matrix`` (the run's planned bytes
    between workers), ``per_unit`` (planned bytes of every unit), ``units``, ``scope``.

    ``plans`` lists ``(Plan, unit_of_phase)`` or ``(Plan, unit_of_phase, broadcast)``: the
    run's part-level plans and the unit of each phase (None: no unit); ``owner`` is the worker
    index of every part.

    Examples
    --------
    >>> from daskhpc.comm import Plan
    >>> p = Plan.from_messages(2, [(0, 0, 1, [0]), (1, 1, 0, [0, 1])], word_bytes=8)
    >>> f = plan_fields([(p, lambda ph: ph)], [0, 1], 2, units=2)
    >>> f["per_unit"], f["matrix"].tolist(), f["scope"]
    ([8, 16], [[0.0, 8.0], [16.0, 0.0]], 'run')
    """
    matrix = np.zeros((nworkers, nworkers))
    per_unit = [0] * int(units)
    for entry in plans:
        plan, unit_of = entry[0], entry[1]
        bcast = entry[2] if len(entry) > 2 else False
        placed = plan.placed(owner, nworkers, broadcast=bcast)
        matrix += placed.bytes_matrix()
        for ph, nbytes in zip(placed.phase.tolist(), placed.message_bytes().tolist()):
            u = None if unit_of is None else unit_of(int(ph))
            if u is not None and 0 <= u < len(per_unit):
                per_unit[u] += int(nbytes)
    return {"matrix": matrix, "per_unit": per_unit, "units": int(units), "scope": "run"}


# -- on the scheduler (through run_on_scheduler) ---------------------------------------

async def _ensure(dask_scheduler=None) -> None:
    if PLUGIN_NAME not in dask_scheduler.plugins:
        await dask_scheduler.register_scheduler_plugin(DashboardPlugin(), idempotent=True)


async def _store(topic: str, data: dict, baseline=None, dask_scheduler=None) -> bool:
    await _ensure(dask_scheduler=dask_scheduler)
    dask_scheduler.plugins[PLUGIN_NAME].publish(topic, data, sent=baseline)
    return True


def sent_now(dask_worker=None) -> dict:
    """On a worker (``client.run``): its cumulative sent bytes per receiver, counted up
    to this moment (``publish``'s ``sent``)."""
    sample = dask_worker.metrics.get(SENT_METRIC)
    return sample(dask_worker) if sample is not None else {}


def _plain(obj):
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, (np.ndarray, np.generic)):
        return obj.tolist()
    return obj
