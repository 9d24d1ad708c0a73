"""Unit reports, as Dask events: worker -> scheduler -> client in order with the task's
completion and before the news of the worker's death, so the client learns what finished
even when the futures it waits on never come.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager, suppress

from daskhpc.dashboard import sent_now
from daskhpc.runtime._calls import Setting

#: Seconds a worker may hold the reports of finished units: every event costs CPU a step
#: could use (docs/benchmarks.md); a progress bar moves 4 times a second.
COALESCE_S = 0.25

_HELD: dict = {}      # (topic, worker address) -> the ReportBatch holding its reports


def send_report(topic: str, unit: int, values: dict, *, start: float | None = None,
                stop: float | None = None, saved: bool = False,
                strata: list | None = None) -> None:
    """Send ``{reporter: values}`` of ``unit`` to the clients subscribed to ``topic``.

    Reporters are part ids or strings such as ``"eval-3"``; values must be msgpack-able.
    ``saved``: their checkpoint files of this unit are written. ``strata``: strata-timeline
    rows of the unit's sub-steps for the dashboard (docs/dashboard.md; ``worker`` is filled
    in). Outside a worker this does nothing; while a :class:`ReportBatch` of ``topic`` is
    holding, the report goes to it.

    Examples
    --------
    >>> send_report("daskhpc-ab12", 3, {0: {"loss": 0.5}})               # doctest: +SKIP
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
        # the worker's bytes sent so far: the dashboard's units done vs their plan
        msg["sent"] = int(sum(sent.values()))
    return msg


class ReportBatch:
    """Reports of the units one task runs, sent together.

    :meth:`add` holds a unit's report and sends what is held once :data:`COALESCE_S` passed
    since the last event, or at once for a checkpointed unit (the frame must learn of it
    before the worker can die); :meth:`flush` sends the rest, as ``{"batch": [...]}``.

    Examples
    --------
    >>> batch = ReportBatch("daskhpc-ab12", get_worker())              # doctest: +SKIP
    >>> with batch.holding():                                          # doctest: +SKIP
    ...     send_report("daskhpc-ab12", 0, {0: {"loss": 0.5}})
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
        """While the block runs, the worker's :func:`send_report` calls of the topic add to
        this batch; what is held is sent when it ends."""
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
    """Drop the events of an attempt's topic."""
    from daskhpc._dask_internals import forget_topic

    forget_topic(dask_scheduler, topic)


def _forget_topics(prefix: str, dask_scheduler=None) -> None:
    """Drop the events of every topic named ``prefix...``."""
    from daskhpc._dask_internals import forget_topics

    forget_topics(dask_scheduler, prefix)


class AttemptTopics(Setting):
    """The report topics of a run's attempts (``prefix`` + attempt number), forgotten by the
    run's undo call rather than a scheduler call per attempt."""

    def __init__(self, prefix: str):
        self.prefix = prefix

    def on(self, calls) -> None:
        """Nothing to set."""

    def off(self, calls, got) -> None:
        calls.on_scheduler(_forget_topics, self.prefix)


def _key(reporter):
    return tuple(reporter) if isinstance(reporter, list) else reporter


class ReportInbox:
    """The reports of one attempt as they arrive, one by one (a context manager).

    ``forget``: drop the topic's events on the scheduler on exit (else an
    :class:`AttemptTopics` setting does).

    Examples
    --------
    >>> with ReportInbox(client, "daskhpc-ab12") as inbox:              # doctest: +SKIP
    ...     for msg in inbox.drain(): print(msg["unit"], msg["reports"])
    """

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
