"""The scheduler plugin behind the daskhpc pages, and its worker-side partner.

:class:`DashboardPlugin` keeps a :class:`~daskhpc.dashboard.DashboardState` on the scheduler
and fills it from what workflows publish, the bytes between workers (:class:`TransferCounter`,
with every heartbeat), the workers' step clocks (or, without steps, the tasks' compute spans),
strata rows carried by Dask events, and every :data:`SAMPLE_MS` the workers' memory and the
timelines of other scheduler plugins (the two interfaces of docs/dashboard.md). On ``start``
it installs :class:`TransferCounter` on every worker and serves the pages if needed.
"""

from __future__ import annotations

import logging

from distributed.diagnostics.plugin import SchedulerPlugin, WorkerPlugin

from daskhpc._clock import compute_total, waited_total
from daskhpc._workflows import EXCHANGE_PLUGIN
from daskhpc.dashboard._state import PLUGIN_NAME, DashboardState

logger = logging.getLogger(__name__)

#: Key of the per-destination sent-bytes dict in a worker's heartbeat metrics.
SENT_METRIC = "daskhpc-sent"
#: Key of ``[compute seconds, steps]`` of the worker's step clocks in its heartbeat metrics.
STEPS_METRIC = "daskhpc-steps"
#: Key of ``{worker: seconds}`` the worker's steps waited for each worker's messages.
WAITED_METRIC = "daskhpc-waited"
#: Short runs (a few hundred ms per epoch) must still be caught while they run.
SAMPLE_MS = 200


class TransferCounter(WorkerPlugin):
    """Count the bytes this worker sent to each other worker, for the heartbeat.

    Each heartbeat adds the new entries of the worker's ``transfer_outgoing_log`` (it holds
    1000) whose ``who`` is a worker to running totals, plus the direct exchange's pushes
    (``Exchange.sent``).

    Examples
    --------
    >>> client.register_plugin(TransferCounter())                  # doctest: +SKIP
    >>> client.run(lambda dask_worker: dask_worker.metrics[SENT_METRIC](dask_worker))
    ... # doctest: +SKIP
    {'tcp://127.0.0.1:40181': {'tcp://127.0.0.1:43911': 1048867}, ...}
    """

    name = "daskhpc-transfer-counter"
    idempotent = True

    def setup(self, worker) -> None:
        import threading

        # the heartbeat (event loop) and the unit reports (task threads) both sample
        self._lock = threading.Lock()
        self._last = None
        self._sent: dict[str, int] = {}
        worker.metrics[SENT_METRIC] = self.sample
        # the step clocks of this worker's process: what the report calls compute_s
        worker.metrics[STEPS_METRIC] = lambda worker: list(compute_total())
        worker.metrics[WAITED_METRIC] = lambda worker: waited_total()

    def teardown(self, worker) -> None:
        worker.metrics.pop(SENT_METRIC, None)
        worker.metrics.pop(STEPS_METRIC, None)
        worker.metrics.pop(WAITED_METRIC, None)

    def sample(self, worker) -> dict[str, int]:
        """Cumulative wire bytes sent per receiving worker."""
        with self._lock:
            return self._sample(worker)

    def _sample(self, worker) -> dict[str, int]:
        from daskhpc._dask_internals import outgoing_log

        log = outgoing_log(worker)
        for entry in reversed(log):   # newest first, back to the last one counted
            if entry is self._last:
                break
            who = entry.get("who")
            if who:
                self._sent[who] = self._sent.get(who, 0) + int(entry.get("compressed") or 0)
        if log:
            self._last = log[-1]
        out = dict(self._sent)
        ext = worker.plugins.get(EXCHANGE_PLUGIN)      # direct pushes (runtime)
        for who, nbytes in (getattr(ext, "sent", None) or {}).items():
            out[who] = out.get(who, 0) + nbytes
        return out


class DashboardPlugin(SchedulerPlugin):
    """Hold what the daskhpc pages show, fed from the sources the module docstring lists."""

    name = PLUGIN_NAME
    idempotent = True

    def __init__(self):
        self.state = DashboardState()
        self.scheduler = None
        self._sampler = None
        self._seen_lists: dict[str, tuple[list, int]] = {}

    async def start(self, scheduler) -> None:
        from tornado.ioloop import PeriodicCallback

        from daskhpc._dask_internals import register_worker_plugin

        self.scheduler = scheduler
        await register_worker_plugin(scheduler, TransferCounter(), TransferCounter.name)
        try:
            from daskhpc.dashboard._install import serve

            serve(scheduler)
        except ImportError as e:   # bokeh missing: the data is still collected
            logger.warning("daskhpc dashboard pages unavailable: %s", e)
        self._sampler = PeriodicCallback(self.sample, SAMPLE_MS)
        self._sampler.start()

    async def close(self) -> None:
        if self._sampler is not None:
            self._sampler.stop()

    # -- called through client.run_on_scheduler ------------------------------------------
    def publish(self, topic: str, data: dict, sent: dict | None = None) -> None:
        """Store a workflow's data (see :data:`~daskhpc.dashboard.TOPICS`); ``sent`` (``run``,
        ``end``): the workers' byte counters now (default: as of their last heartbeats)."""
        counts = topic in ("run", "end")
        if counts and sent is None:
            sent = self.sent()
        self.state.publish(topic, data, sent=sent if counts else None,
                           steps=self.steps() if counts else None,
                           waited=self.waited() if counts else None)

    def sent(self) -> dict[str, dict[str, int]]:
        """``{src: {dst: cumulative bytes}}`` from the workers' last heartbeats."""
        if self.scheduler is None:
            return {}
        return {addr: dict(ws.metrics.get(SENT_METRIC) or {})
                for addr, ws in self.scheduler.workers.items()}

    def steps(self) -> dict[str, tuple[float, int]]:
        """``{worker: (compute seconds, steps)}``, cumulative, from the workers' last
        heartbeats (their step clocks; workers that report none are left out)."""
        if self.scheduler is None:
            return {}
        out = {}
        for addr, ws in self.scheduler.workers.items():
            got = ws.metrics.get(STEPS_METRIC)
            if got:
                out[addr] = (float(got[0]), int(got[1]))
        return out

    def waited(self) -> dict[str, dict[str, float]]:
        """``{worker: {sender: seconds}}``, cumulative: how long each worker's steps
        waited for each sender's messages, from the workers' last heartbeats."""
        if self.scheduler is None:
            return {}
        return {addr: dict(ws.metrics.get(WAITED_METRIC) or {})
                for addr, ws in self.scheduler.workers.items()}

    def transition(self, key, start, finish, *args, **kwargs) -> None:
        if start != "processing" or finish != "memory":
            return
        worker = kwargs.get("worker")
        spans = kwargs.get("startstops") or ()
        seconds = sum(s["stop"] - s["start"] for s in spans if s.get("action") == "compute")
        if worker:
            self.state.record_task(worker, seconds)

    def log_event(self, topic, msg) -> None:
        """Strata-timeline rows an event carries (``msg["strata"]``: a run whose sub-steps no
        plugin sees), and the bytes a worker had sent when it reported a unit (``msg["sent"]``)."""
        if not isinstance(msg, dict):
            return
        # a batch of reports (runtime.ReportBatch) carries each unit's rows
        batch = msg.get("batch")
        for m in (batch if isinstance(batch, (list, tuple)) else [msg]):
            if not isinstance(m, dict):
                continue
            rows = m.get("strata")
            if isinstance(rows, (list, tuple)) and rows:      # msgpack hands over tuples
                self.state.merge_rows(f"event:{topic}", rows)
            if m.get("sent") is not None and m.get("unit") is not None and m.get("worker"):
                self.state.record_unit_sent(m["worker"], int(m["unit"]), int(m["sent"]))

    def sample(self) -> None:
        """Memory peaks and other plugins' timelines (every :data:`SAMPLE_MS`)."""
        s = self.scheduler
        try:
            for addr, ws in s.workers.items():
                self.state.record_memory(addr, ws.memory.process)
            for name, plugin in list(s.plugins.items()):
                if plugin is not self:
                    self._read_timeline(name, plugin)
        except Exception:  # noqa: BLE001 - a sampler must never take the scheduler down
            logger.exception("daskhpc dashboard sampler failed")

    def _read_timeline(self, name: str, plugin) -> None:
        tl = getattr(plugin, "timeline", None)
        if isinstance(tl, list):
            # strata-timeline interface: an append-only list (or a new one for a new run):
            # merge only the rows appended since the last sample
            prev = self._seen_lists.get(name)
            new = tl[prev[1]:] if prev is not None and prev[0] is tl else tl
            if new:
                self.state.merge_rows(name, new)
            # the list itself, not its id: holding it means its id cannot be reused
            self._seen_lists[name] = (tl, len(tl))
        elif callable(tl) and isinstance(getattr(plugin, "policies", None), dict):
            for run in list(plugin.policies):
                self.state.merge_batches(str(run), tl(run))
