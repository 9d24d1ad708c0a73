"""What the daskhpc dashboard pages show, as a plain object (no Dask, no Bokeh).

The scheduler plugin (:mod:`daskhpc.dashboard._plugin`) feeds it; the pages
(:mod:`daskhpc.dashboard._pages`) only read it, so its arithmetic is tested without a cluster.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from daskhpc._clock import waited_for as _waited_for

#: Name of the scheduler plugin that holds the state.
PLUGIN_NAME = "daskhpc-dashboard"

#: Topics a workflow may publish, with the fields each one takes.
TOPICS: dict[str, str] = {
    "run": "name, workflow, workers, units (optional, the run's unit count), unit_name: a run "
           "starts (measured counters start from zero)",
    "plan": "matrix (K x K planned bytes, src row, dst column), workers (row order), unit, "
            "scope ('run': the matrix is the whole run's; 'unit': one unit's), units "
            "(the run's unit count), per_unit (planned bytes of every unit)",
    "load": "planned ({worker: amount}), unit (what the amount counts: flops, nnz, rows)",
    "memory": "budget (bytes per worker), baseline ({worker: RSS before}), peak ({worker: RSS})",
    "batches": "run, timeline (the batch-admission timeline: window, batches, violations)",
    "strata": "rows (strata-timeline rows: task, worker, substep, start, stop)",
    "history": "rows (a run's completed units, as the frame records them: unit, time_s, "
               "planned_bytes, measured_bytes, and the workflow's own values)",
    "end": "status ('finished', or 'failed: <why>'), optionally planned_bytes and "
           "measured_bytes (the run's report: measured.planned_bytes, inter_worker_bytes), "
           "rows (the final history rows, replacing the live ones), matrix and workers "
           "(the run's measured bytes between workers), compute ({worker: [seconds, "
           "steps]}: the report's execution.steps): the run is over",
}

#: Fields a topic cannot do without.
REQUIRED: dict[str, tuple[str, ...]] = {"plan": ("matrix", "workers"), "load": ("planned",),
                                        "history": ("rows",),
                                        "batches": ("run", "timeline"), "strata": ("rows",)}

#: Words that end a plan ``unit`` text meaning "one unit's plan" ("bytes per epoch").
UNIT_WORDS = ("epoch", "iteration", "batch", "unit", "step")

#: Rows kept: history rows (the oldest are dropped first), and strata-timeline rows (the
#: older runs' first; past it, a run's timeline keeps every 2nd, 4th, ... epoch, so the
#: whole run stays in view; see :meth:`DashboardState.strata_thinning`).
MAX_ROWS = 20_000


class DashboardState:
    """The data behind the daskhpc pages, kept on the scheduler.

    ``run`` (``name``, ``workflow``, ``workers``, ``started``); ``topics``: the last value of
    each of :data:`TOPICS`; per worker since the run started ``busy`` (task seconds;
    :meth:`load` prefers the step clocks), ``tasks_done`` and ``memory_peak``; ``batches``
    (``{run: timeline}``); ``history`` (the run's completed units, what panels plot);
    ``strata`` (``{(run, key or task): row}``, thinned by epoch: :meth:`strata_thinning`);
    ``updated``: the time of the last change, for pages to skip redrawing.
    """

    def __init__(self):
        self.strata: dict[tuple, dict] = {}
        # per strata run: the epoch stride kept (1: every epoch), whether rows without an
        # epoch had to be dropped oldest first, and the span of every row seen
        self._stride: dict[str, int] = {}
        self._dropped: dict[str, int] = {}
        self._extent: dict[str, list] = {}
        self.updated = 0.0
        self._new_run({}, None)

    def _new_run(self, run: dict[str, Any], sent: dict | None) -> None:
        """Forget what earlier runs planned, measured or timed (not the strata rows,
        which carry their run id)."""
        self.run, self.topics = run, {}
        self._baseline: dict[str, dict[str, int]] = {w: dict(d) for w, d in (sent or {}).items()}
        self._final: dict[str, dict[str, int]] | None = None
        self.busy, self.tasks_done, self.memory_peak = {}, {}, {}
        self._steps0: dict = {}
        self._steps_end: dict | None = None
        self._waited0: dict = {}
        self._waited_end: dict | None = None
        # {worker: {unit: bytes it had sent when it reported the unit}} (unit reports)
        self._unit_sent: dict[str, dict[int, int]] = {}
        self.batches, self.batches_seen = {}, {}
        self.history: list[dict] = []

    def publish(self, topic: str, data: dict, *, now: float | None = None,
                sent: dict[str, dict[str, int]] | None = None,
                steps: dict[str, tuple] | None = None,
                waited: dict[str, dict] | None = None) -> None:
        """Store what a workflow published under ``topic`` (one of :data:`TOPICS`) at ``now``
        (default ``time.time()``). For ``run``, ``sent`` holds the workers' cumulative sent bytes
        (the zero of the measured matrix); for ``run`` and ``end``, ``steps`` (``{worker: (compute
        seconds, steps)}``) and ``waited`` (``{worker: {sender: seconds}}``) the cumulative step
        clocks: the zero, and the end, of :meth:`load` and :meth:`waited_for`."""
        if topic not in TOPICS:
            raise ValueError(f"unknown dashboard topic {topic!r}; known: {', '.join(TOPICS)}")
        missing = [f for f in REQUIRED.get(topic, ()) if f not in data]
        if missing:
            raise ValueError(f"dashboard topic {topic!r} needs {', '.join(missing)}")
        if topic in ("plan", "end") and "matrix" in data and \
                np.shape(data["matrix"]) != (len(data.get("workers", ())),) * 2:
            raise ValueError(f"{topic} matrix of shape {np.shape(data['matrix'])} for "
                             f"{len(data.get('workers', ()))} workers")
        now = time.time() if now is None else now
        if topic == "run":
            self._new_run({**data, "started": now}, sent)
            self._steps0 = dict(steps or {})
            self._waited0 = {w: dict(d) for w, d in (waited or {}).items()}
        elif topic == "batches":
            self.batches[str(data["run"])] = data["timeline"]
        elif topic == "strata":
            self.merge_rows("published", data["rows"])
        elif topic == "history":
            self.history = (self.history + list(data["rows"]))[-MAX_ROWS:]
        elif topic == "end":
            # the run is over: its counters stop here (later traffic is not the run's),
            # and its final rows carry the report's per-unit bytes
            self.run = {**self.run, "ended": now, "status": str(data.get("status", "finished"))}
            self._final = {w: dict(d) for w, d in (sent or {}).items()} if sent else None
            self._steps_end = dict(steps) if steps else None
            self._waited_end = {w: dict(d) for w, d in waited.items()} if waited else None
            if data.get("compute"):          # the report's own: the steps of the run
                self._steps0 = {}
                self._steps_end = {w: tuple(v) for w, v in data["compute"].items()}
            if "rows" in data:
                self.history = list(data["rows"])[-MAX_ROWS:]
        self.topics[topic] = dict(data)
        self.updated = now

    def record_task(self, worker: str, seconds: float) -> None:
        """A task finished on ``worker`` after ``seconds`` of compute."""
        self.busy[worker] = self.busy.get(worker, 0.0) + float(seconds)
        self.tasks_done[worker] = self.tasks_done.get(worker, 0) + 1

    def record_unit_sent(self, worker: str, unit: int, sent: int) -> None:
        """``worker`` reported ``unit`` done having sent ``sent`` bytes (cumulative): the bytes of
        the units done (:meth:`measured_done`)."""
        got = self._unit_sent.setdefault(worker, {})
        if sent > got.get(unit, -1):       # its last part to report the unit
            got[unit] = sent

    def measured_done(self) -> float | None:
        """Bytes sent since the run started up to the workers' reports of the latest unit done
        (not the units in flight); None when reports carry no ``sent``."""
        done = self.units_done()
        if not done or not self._unit_sent:
            return None
        last = done[-1]
        total = 0
        for worker, units in self._unit_sent.items():
            upto = [u for u in units if u <= last]
            if upto:
                base = sum(self._baseline.get(worker, {}).values())
                total += max(units[max(upto)] - base, 0)
        return float(total)

    def record_memory(self, worker: str, process_bytes: int | None) -> None:
        """A sample of a worker's process memory (RSS)."""
        if process_bytes is not None and process_bytes > self.memory_peak.get(worker, -1):
            self.memory_peak[worker] = int(process_bytes)

    def merge_rows(self, source: str, rows) -> bool:
        """Merge timeline rows read from ``source``; True if anything changed. A row seen again
        (same run and key or task) replaces the old copy; rows a source forgets are kept."""
        have = self.strata
        changed = False
        runs = set()
        for r in rows:
            rid = _row_id(r)
            run = rid[0]
            self._widen(run, r)
            epoch = _epoch(r)
            if epoch is not None and epoch % self._stride.get(run, 1):
                continue          # an epoch the thinned timeline leaves out
            if have.get(rid) != r:
                have[rid] = dict(r)
                changed = True
                runs.add(run)
        if len(have) > MAX_ROWS:
            self._thin(runs)
        if changed:
            self.updated = time.time()
        return changed

    def _widen(self, run: str, row: dict) -> None:
        """The run's span covers ``row`` (every row seen, kept or not)."""
        begin = row.get("sent", row.get("start"))
        end = row.get("done", row.get("stop"))
        ext = self._extent.setdefault(run, [None, None])
        if begin is not None and (ext[0] is None or begin < ext[0]):
            ext[0] = begin
        for t in (begin, end):
            if t is not None and (ext[1] is None or t > ext[1]):
                ext[1] = t

    def _thin(self, runs: set) -> None:
        """Back to :data:`MAX_ROWS`: older runs' rows first, then the growing runs keep
        every other epoch of what they kept (rows without an epoch: the oldest go)."""
        have = self.strata
        for rid in [rid for rid in have if rid[0] not in runs]:
            if len(have) <= MAX_ROWS:
                return
            del have[rid]
            self._stride.pop(rid[0], None)
        while len(have) > MAX_ROWS:
            with_epochs = {rid[0] for rid, r in have.items() if _epoch(r) is not None}
            if not with_epochs:
                break
            before = len(have)
            for run in with_epochs:
                self._stride[run] = stride = 2 * self._stride.get(run, 1)
                for rid in [rid for rid, r in have.items() if rid[0] == run and
                            _epoch(r) is not None and _epoch(r) % stride]:
                    del have[rid]
            if len(have) == before:      # epoch 0 alone is too many: the oldest go below
                break
        while len(have) > MAX_ROWS:
            rid = next(iter(have))
            self._dropped[rid[0]] = self._dropped.get(rid[0], 0) + 1
            del have[rid]

    def strata_thinning(self, run=None) -> dict:
        """What the strata timeline of ``run`` (default the latest) shows of it: ``stride`` (every
        ``stride``-th epoch is kept: 1 unless the run passed :data:`MAX_ROWS` rows), ``dropped``
        (rows without an epoch dropped, oldest first), ``span`` (first start, last stop over every
        row seen) and ``limit``.

        Examples
        --------
        >>> st = DashboardState()
        >>> _ = st.merge_rows("s", [{"run": "r", "key": [0, e], "epoch": e, "start": e,
        ...                          "stop": e + 1.0} for e in range(MAX_ROWS + 1)])
        >>> st.strata_thinning()["stride"], len(st.strata_rows()), st.strata_thinning()["span"]
        (2, 10001, (0, 20001.0))
        """
        if run is None:
            rows = self.strata_rows()
            run = str(rows[0].get("run")) if rows else None
        ext = self._extent.get(run, [None, None])
        return {"stride": self._stride.get(run, 1), "dropped": self._dropped.get(run, 0),
                "span": (ext[0], ext[1]), "limit": MAX_ROWS}

    def strata_rows(self) -> list[dict]:
        """The strata-timeline rows of the latest run (that of the row that started last)."""
        rows = list(self.strata.values())
        started = [r for r in rows if r.get("start") is not None]
        if not started:
            return rows
        latest = max(started, key=lambda r: r["start"]).get("run")
        return [r for r in rows if r.get("run") == latest]

    def merge_batches(self, run: str, timeline: dict, now: float | None = None) -> None:
        """The live batch-admission timeline of ``run``, read at ``now``."""
        now = time.time() if now is None else now
        self.batches_seen[run] = now
        if self.batches.get(run) != timeline:
            self.batches[run] = timeline
            self.updated = now

    def batches_clock(self, run: str, now: float, stale: float = 2.0) -> float:
        """The time up to which unfinished batches of ``run`` are drawn: now while its
        plugin still reports it, else when it was last seen."""
        seen = self.batches_seen.get(run)
        return now if seen is None or now - seen < stale else seen

    def workers(self, extra=()) -> list[str]:
        """Row order of the matrices: the run's workers, then the plan's, then others."""
        plan = self.topics.get("plan", {})
        return list(dict.fromkeys([*self.run.get("workers", ()), *plan.get("workers", ()),
                                   *sorted(extra)]))

    def planned_matrix(self) -> tuple[list[str], np.ndarray | None]:
        """``(workers, K x K)`` planned bytes, in :meth:`workers` order (None if no plan)."""
        plan = self.topics.get("plan")
        order = self.workers()
        return order, _in_order(order, plan["workers"], plan["matrix"]) if plan else None

    def measured_matrix(self, sent: dict[str, dict[str, int]]) -> tuple[list[str], np.ndarray]:
        """``(workers, K x K)`` bytes sent since the run started (src row, dst column), from
        ``sent`` (``{src: {dst: cumulative bytes}}`` now); after the run's ``end``, its published
        matrix or the counters at its end."""
        end = self.topics.get("end") or {}
        if "matrix" in end:
            order = self.workers(end["workers"])
            out = _in_order(order, end["workers"], end["matrix"])
            np.fill_diagonal(out, 0.0)
            return order, out
        if self._final is not None:
            sent = self._final
        peers = set(sent) | {d for row in sent.values() for d in row}
        order = self.workers(peers)
        index = {w: i for i, w in enumerate(order)}
        out = np.zeros((len(order), len(order)))
        for src, row in sent.items():
            base = self._baseline.get(src, {})
            for dst, total in row.items():
                if dst in index and dst != src:
                    out[index[src], index[dst]] = max(0, total - base.get(dst, 0))
        return order, out

    # -- planned vs measured bytes: ONE definition, per run and per unit ----------------
    def plan_scope(self) -> str | None:
        """What the plan matrix covers: ``"run"`` or ``"unit"`` (None: no plan); the plan's
        ``scope``, else a ``unit`` text ending in "per epoch", "per batch", ... means one unit."""
        plan = self.topics.get("plan")
        if not plan:
            return None
        if plan.get("scope") in ("run", "unit"):
            return plan["scope"]
        text = str(plan.get("unit", "")).lower()
        return "unit" if any(text.endswith(f"per {w}") for w in UNIT_WORDS) else "run"

    def units_total(self) -> int | None:
        """The run's number of units, if a publisher said it."""
        for topic in ("plan", "run"):
            n = self.topics.get(topic, {}).get("units")
            if n is not None:
                return int(n)
        return None

    def unit_name(self) -> str:
        """What a unit is: the run's ``unit_name``, else the first of epoch, iteration,
        batch the history rows carry."""
        if self.run.get("unit_name"):
            return str(self.run["unit_name"]).rstrip("s")
        first = self.history[0] if self.history else {}
        return next((k for k in ("epoch", "iteration", "batch") if k in first), "unit")

    def units_done(self) -> list[int]:
        """Units whose history rows arrived, ascending."""
        return sorted({int(r["unit"]) for r in self.history if r.get("unit") is not None})

    def bytes_summary(self, measured: float) -> dict:
        """Planned and measured bytes between workers, per run and per unit, side by side.

        The report's definition (:data:`daskhpc.report.PLANNED_BYTES`), with ``measured`` the
        bytes since the run started. ``planned_so_far`` is the plan of the units done, so
        ``ratio`` (measured / planned so far) stays about 1 along the run; after the run's ``end``
        the report's numbers. Also ``units_done``, ``units_total``, ``planned_run`` and the means
        ``planned_per_unit``, ``measured_per_unit`` (None where unknown).

        Examples
        --------
        >>> st = DashboardState()
        >>> st.publish("run", {"workers": ["a", "b"]})
        >>> st.publish("plan", {"matrix": [[0, 100], [0, 0]], "workers": ["a", "b"],
        ...                     "unit": "bytes per epoch"})
        >>> st.publish("history", {"rows": [{"unit": 0}, {"unit": 1}]})
        >>> d = st.bytes_summary(210.0)
        >>> d["planned_so_far"], d["planned_per_unit"], d["measured_per_unit"], d["ratio"]
        (200.0, 100.0, 105.0, 1.05)
        """
        plan = self.topics.get("plan") or {}
        scope = self.plan_scope()
        done = self.units_done()
        n, total = len(done), self.units_total()
        matrix_sum = float(np.sum(plan["matrix"])) if plan else 0.0
        per_unit = plan.get("per_unit")
        rows_planned = [r["planned_bytes"] for r in self.history if "planned_bytes" in r]
        if per_unit is not None:
            per = [float(x) for x in per_unit]
            planned_run = float(sum(per))
            planned_so_far = float(sum(per[u] for u in done if 0 <= u < len(per)))
        elif scope == "unit":
            planned_run = matrix_sum * total if total is not None else None
            planned_so_far = matrix_sum * n
        elif scope == "run":
            planned_run = matrix_sum
            planned_so_far = matrix_sum * min(n, total) / total if total else \
                (matrix_sum if n else 0.0)
        else:
            planned_run, planned_so_far = None, 0.0
        if rows_planned and len(rows_planned) == n:      # the frame's own per-unit numbers
            planned_so_far = float(sum(rows_planned))
        end = self.topics.get("end") or {}
        if end.get("planned_bytes") is not None:         # over: the report's own numbers
            planned_so_far = float(end["planned_bytes"])
        if end.get("measured_bytes") is not None:
            measured = float(end["measured_bytes"])
        elif not end and n and (total is None or n < total):
            # mid-run: the counters run ahead (the units in flight, the history's lag):
            # the bytes sent up to the reports of the units done, where reports say it
            upto = self.measured_done()
            if upto is not None:
                measured = upto
        rows_measured = [r["measured_bytes"] for r in self.history if "measured_bytes" in r]
        return {
            "scope": scope, "units_done": n, "units_total": total,
            "planned_run": planned_run, "planned_so_far": planned_so_far,
            "measured_so_far": float(measured),
            "planned_per_unit": planned_so_far / n if n else
            (matrix_sum if scope == "unit" else None),
            "measured_per_unit": (float(np.mean(rows_measured)) if rows_measured and
                                  len(rows_measured) == n else float(measured) / n)
            if n else None,
            "ratio": float(measured) / planned_so_far if planned_so_far else None}

    def load(self, workers: list[str], steps: dict | None = None) -> dict:
        """Per worker: planned amount and its share, compute seconds and their share, steps (or
        tasks) done.

        Compute seconds are the report's ``execution.steps`` ``compute_s``: the step clocks
        (``steps``, cumulative now) since the run's start, or the tasks' compute spans in a run
        that timed no step (``compute`` says which). Without a ``load`` topic the planned amount
        is what the plan has each worker send.

        Examples
        --------
        >>> st = DashboardState()
        >>> st.publish("run", {"workers": ["a"]}, steps={"a": (10.0, 4)})
        >>> st.record_task("a", 7.0)                   # a whole task: waits included
        >>> d = st.load(["a"], steps={"a": (10.5, 9)})
        >>> d["compute"], d["busy"], d["tasks"]
        ('steps', [0.5], [5])
        """
        planned = self.topics.get("load", {}).get("planned")
        if planned is None:
            order, m = self.planned_matrix()
            planned = {} if m is None else dict(zip(order, m.sum(axis=1).tolist()))
        p = np.array([float(planned.get(w, 0)) for w in workers])
        now = self._steps_end if self._steps_end is not None else (steps or {})
        spent = {w: (now[w][0] - self._steps0.get(w, (0.0, 0))[0],
                     now[w][1] - self._steps0.get(w, (0.0, 0))[1]) for w in now}
        if any(n > 0 for _, n in spent.values()):
            kind = "steps"
            b = np.array([max(spent.get(w, (0.0, 0))[0], 0.0) for w in workers])
            count = [max(int(spent.get(w, (0.0, 0))[1]), 0) for w in workers]
        else:
            kind = "tasks"
            b = np.array([self.busy.get(w, 0.0) for w in workers])
            count = [self.tasks_done.get(w, 0) for w in workers]
        return {"worker": list(workers), "planned": p.tolist(),
                "planned_share": _share(p).tolist(), "busy": b.tolist(),
                "busy_share": _share(b).tolist(), "tasks": count, "compute": kind}

    def waited_for(self, waited: dict[str, dict] | None = None) -> tuple[str, float] | None:
        """The worker the others waited for in this run and its seconds of blame (None before any
        wait): :func:`daskhpc._clock.waited_for` of the cumulative ``waited`` less their values
        when the run began; a run that ended names the report's own.

        Examples
        --------
        >>> zero = {"wait_s": 1.0, "waited_on_s": {"b": 1.0}, "in_flight_s": {"b": 0.0}}
        >>> st = DashboardState()
        >>> st.publish("run", {"workers": ["a", "b"]}, waited={"a": zero})
        >>> st.waited_for({"a": {"wait_s": 3.0, "waited_on_s": {"b": 3.0},
        ...                      "in_flight_s": {"b": 1.5}}})
        ('b', 2.0)
        """
        end = self.topics.get("end", {}).get("waited_for")
        if end:
            return str(end[0]), float(end[1])
        now = self._waited_end if self._waited_end is not None else (waited or {})
        run = {w: _less(v, self._waited0.get(w)) for w, v in now.items() if v}
        return _waited_for(run)

    def load_unit(self) -> str:
        """What the planned amounts of :meth:`load` count."""
        if "load" in self.topics:
            return str(self.topics["load"].get("unit", "work"))
        return "bytes to send" if "plan" in self.topics else "work"


def _less(now: dict, zero: dict | None) -> dict:
    """Cumulative waits ``now`` less ``zero`` (``waited_total`` shapes)."""
    zero = zero or {}
    out = {"wait_s": now.get("wait_s", 0.0) - zero.get("wait_s", 0.0)}
    for k in ("waited_on_s", "in_flight_s"):
        z = zero.get(k) or {}
        out[k] = {who: s - z.get(who, 0.0) for who, s in (now.get(k) or {}).items()}
    return out


def _in_order(order: list, workers: list, matrix) -> np.ndarray:
    """``matrix`` (between ``workers``) as a ``len(order)`` square in ``order``'s rows."""
    index = {w: i for i, w in enumerate(order)}
    out = np.zeros((len(order), len(order)))
    pos = [index[w] for w in workers]
    out[np.ix_(pos, pos)] = np.asarray(matrix, dtype=np.float64)
    return out


def _share(x: np.ndarray) -> np.ndarray:
    total = x.sum()
    return x / total if total > 0 else np.zeros_like(x)


def _epoch(row: dict) -> int | None:
    """A strata row's epoch, if it has an integer one."""
    e = row.get("epoch")
    return int(e) if isinstance(e, (int, np.integer)) and not isinstance(e, bool) else None


def _row_id(row: dict) -> tuple:
    key = row.get("key", row.get("task"))
    if isinstance(key, list):   # a tuple key that travelled through msgpack
        key = tuple(key)
    return (str(row.get("run")), str(key))
