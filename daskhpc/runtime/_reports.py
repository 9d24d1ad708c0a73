"""Unit reports: what workers tell the client at the end of each iteration, as Dask events.

A task that finishes a *unit* (an epoch, an iteration, a batch) of some of the run's
parts calls :func:`send_report` with their values. The event travels worker ->
scheduler -> client on Dask's existing streams, in order with the task's completion and
before the news of that worker's death: the client learns what finished even when the
futures it waits on never come. :class:`ReportInbox` collects them on the client.

A report names its *reporters* (part ids, or strings such as ``"eval-3"``); ``saved``
says their checkpoint files of this unit were written before it left. A loop of short
units (:class:`ReportBatch`) sends ``{"batch": [report, ...]}`` at most once per
:data:`COALESCE_S`; the inbox hands them out one by one.

Examples
--------
>>> inbox = ReportInbox(client, "daskhpc-ab12")                     # doctest: +SKIP
>>> with inbox:                                                     # doctest: +SKIP
...     ...                    # tasks call send_report("daskhpc-ab12", unit, {0: {...}})
...     for msg in inbox.drain(): print(msg["unit"], msg["reports"])
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager, suppress

from daskhpc.dashboard import sent_now
from daskhpc.runtime._calls import Setting

__all__ = ["send_report", "ReportInbox", "ReportBatch", "AttemptTopics", "COALESCE_S"]

#: Seconds a worker may hold the reports of finished units before it sends them. Every
#: event costs the worker, the scheduler and the client some CPU, which 2 workers on 2
#: cores take from a step (docs/benchmarks.md). A progress bar moves 4 times a second.
COALESCE_S = 0.25

_HELD: dict = {}      # (topic, worker address) -> the ReportBatch holding its reports


def send_report(topic: str, unit: int, values: dict, *, start: float | None = None,
                stop: float | None = None, saved: bool = False,
                strata: list | None = None) -> None:
    """Send ``{reporter: values}`` of ``unit`` to the clients subscribed to ``topic``.

    Values must be msgpack-able (numbers, strings, lists, dicts with string keys).
    ``strata``: strata-timeline rows of the unit's sub-steps (dicts: ``run``, ``key``,
    ``substep`` or ``subepoch``, ``start``, ``stop``, ...; ``worker`` is filled in), for
    the dashboard, which reads them from the event on the scheduler (docs/dashboard.md).
    Outside a worker (a local run) this does nothing; while a :class:`ReportBatch` of
    ``topic`` is holding (``with batch.holding():``) the report goes to it.
    """
    try:
        from distributed import get_worker

        worker = get_worker()
    except ValueError:
        return
    held = _HELD.get((topic, worker.address))
    if held is not None:
        held.add(unit, values, start=start, stop=stop, saved=saved, strata=strata)
        return
    worker.log_event(topic, _message(worker, unit, values, start, stop, saved, strata))


def _message(worker, unit: int, values: dict, start, stop, saved: bool,
             strata=None) -> dict:
    now = time.time()
    msg = {"unit": int(unit), "worker": worker.address,
           "reports": [[r, v] for r, v in values.items()],
           "start": now if start is None else float(start),
           "stop": now if stop is None else float(stop), "saved": bool(saved)}
    if strata:
        msg["strata"] = [{"worker": worker.address, **r} for r in strata]
    sent = sent_now(worker)
    if sent:
        # the worker's bytes to other workers so far: the dashboard compares the bytes of
        # the units done (not of the units in flight too) with their plan
        msg["sent"] = int(sum(sent.values()))
    return msg


class ReportBatch:
    """Reports of the units one task runs, sent together (see the module docstring).

    ``add`` holds a unit's report and sends what is held once :data:`COALESCE_S` passed
    since the last event, or at once when the unit was checkpointed (``saved``: the frame
    must learn of a checkpoint before the worker can die with it unsaid); ``flush`` (at
    the end of the task, so the last unit is never held back) sends the rest.
    :meth:`holding` makes :func:`send_report` of its topic add to it.
    """

    def __init__(self, topic: str, worker, every: float = COALESCE_S):
        self.topic, self.worker, self.every = topic, worker, every
        self.held: list[dict] = []
        self.sent_at = time.monotonic()

    def add(self, unit: int, values: dict, *, start: float | None = None,
            stop: float | None = None, saved: bool = False,
            strata: list | None = None) -> None:
        """Hold a report (the arguments of :func:`send_report`)."""
        self.held.append(_message(self.worker, unit, values, start, stop, saved, strata))
        if saved or time.monotonic() - self.sent_at >= self.every:
            self.flush()

    @contextmanager
    def holding(self):
        """While the block runs, the worker's :func:`send_report` calls of the topic add
        to this batch (code that reports unit by unit, run as one task); what is held is
        sent when the block ends."""
        key = (self.topic, self.worker.address)
        _HELD[key] = self
        try:
            yield self
        finally:
            if _HELD.get(key) is self:
                del _HELD[key]
            self.flush()

    def flush(self) -> None:
        if self.held:
            msg = self.held[0] if len(self.held) == 1 else {"batch": self.held}
            self.worker.log_event(self.topic, msg)
            self.held = []
        self.sent_at = time.monotonic()


def _forget_topic(topic: str, dask_scheduler=None) -> None:
    """Drop the events of an attempt's topic (nobody reads them after the attempt)."""
    from daskhpc._dask_internals import forget_topic

    forget_topic(dask_scheduler, topic)


def _forget_topics(prefix: str, dask_scheduler=None) -> None:
    """Drop the events of every topic named ``prefix...`` (a run's attempts)."""
    from daskhpc._dask_internals import forget_topics

    forget_topics(dask_scheduler, prefix)


class AttemptTopics(Setting):
    """The report topics of a run's attempts (``prefix`` + attempt number) on the
    scheduler, every one's events forgotten by the run's undo call, instead of a
    scheduler call per attempt (:class:`ReportInbox` with ``forget=False``)."""

    def __init__(self, prefix: str):
        self.prefix = prefix

    def on(self, calls) -> None:
        """Nothing to set."""

    def off(self, calls, got) -> None:
        calls.on_scheduler(_forget_topics, self.prefix)


def _key(reporter):
    return tuple(reporter) if isinstance(reporter, list) else reporter


class ReportInbox:
    """The reports of one attempt, as they arrive (a context manager that subscribes).
    ``forget``: drop the topic's events on the scheduler on exit (else an
    :class:`AttemptTopics` setting does)."""

    def __init__(self, client, topic: str, *, forget: bool = True):
        self.client, self.topic = client, topic
        self.forget = forget
        self._lock = threading.Lock()
        self._new: list[dict] = []
        #: set when a checkpoint's report arrives (``gather_watching``'s ``wake``)
        self.news = threading.Event()

    def _on_event(self, event) -> None:
        _, msg = event
        if not isinstance(msg, dict):
            return
        # (msgpack may hand a list back as a tuple)
        msgs = msg["batch"] if isinstance(msg.get("batch"), (list, tuple)) else [msg]
        msgs = [dict(m, reports={_key(r): v for r, v in m["reports"]})
                for m in msgs if isinstance(m, dict) and "unit" in m]
        with self._lock:
            self._new.extend(msgs)
        if any(m.get("saved") for m in msgs):
            self.news.set()

    def __enter__(self) -> ReportInbox:
        self.client.subscribe_topic(self.topic, self._on_event)
        return self

    def __exit__(self, *exc) -> None:
        with suppress(Exception):        # a closed client has nothing to unsubscribe
            self.client.unsubscribe_topic(self.topic)
            if self.forget:
                self.client.run_on_scheduler(_forget_topic, self.topic)

    def drain(self) -> list[dict]:
        """The reports that arrived since the last call, oldest first."""
        with self._lock:
            out, self._new = self._new, []
        return out
