"""The frame's bookkeeping of one run: reports per unit, history rows, what the checkpoint
holds, and the planned-vs-measured bytes of the last attempt."""

from __future__ import annotations

import time

from daskhpc.runtime._checkpoint import CheckpointDir
from daskhpc.runtime._job import Job
from daskhpc.runtime._placement import Placement


class Book:
    """Reports per unit, the rows of complete units, what the checkpoint holds."""

    def __init__(self, job: Job, ck: CheckpointDir | None, t0: float):
        self.job, self.ck, self.t0 = job, ck, t0
        self.reports: dict[int, dict] = {}
        self.saved: dict[int, set] = {}
        self.spans: dict[int, list] = {}
        self.rows: dict[int, dict] = {}
        self.durable: set[int] = set()
        self.new_rows: list[dict] = []
        self.done_at: dict[int, float] = {}     # perf_counter time a unit completed
        self.attempt_t0 = t0
        if ck is not None:
            for meta in ck.steps():
                u, row = job.unentry(meta) if job.unentry else \
                    (int(meta["step"]) - 1, dict(meta.get("history", {})))
                self.rows[u] = {"unit": u, **row}
                self.durable.add(u)

    def want(self, u: int) -> set:
        return self.job.reporters(u) if self.job.reporters else set(range(self.job.nparts))

    def add(self, msg: dict) -> None:
        u = int(msg["unit"])
        got = self.reports.setdefault(u, {})
        got.update(msg["reports"])
        if msg.get("saved"):
            self.saved.setdefault(u, set()).update(msg["reports"])
        self.spans.setdefault(u, []).append((msg["start"], msg["stop"]))
        want = self.want(u)
        if u not in self.rows and want <= set(got):
            row = {"unit": u, **self.job.row(u, {r: got[r] for r in sorted(want, key=str)})}
            spans = self.spans[u]
            prev = self.rows.get(u - 1, {}).get("_end")
            end = max(s for _, s in spans)
            begin = prev if prev is not None else min(s for s, _ in spans)
            row["time_s"] = end - begin
            row["_end"] = end
            self.rows[u] = row
            self.new_rows.append(row)
            self.done_at[u] = time.perf_counter()
        savers = self.job.savers(u) if self.job.savers else want
        if self.ck is not None and u in self.rows and u not in self.durable and \
                savers <= self.saved.get(u, set()):
            self.durable.add(u)
            step, meta = self.job.entry(u, public(self.rows[u])) if self.job.entry else \
                (u + 1, {"history": public(self.rows[u])})
            self.ck.complete(step, **meta)

    def complete_silent(self, units) -> None:
        """Units nobody reports (``reporters`` empty) are complete when the attempt is."""
        for u in units:
            if u not in self.rows and not self.want(u):
                self.add({"unit": u, "reports": {}, "start": time.time(), "stop": time.time()})

    def restart_unit(self) -> int:
        """Ordered jobs: where an attempt starts (after the newest durable unit)."""
        return max(self.durable, default=-1) + 1

    def forget_from(self, u0: int) -> None:
        for store in (self.reports, self.saved, self.spans):
            for u in [u for u in store if u >= u0]:
                del store[u]
        for u in [u for u in self.rows if u >= u0 and u not in self.durable]:
            del self.rows[u]

    def history(self) -> list[dict]:
        return [public(self.rows[u]) for u in sorted(self.rows)]


def public(row: dict) -> dict:
    """A history row without the frame's own ``_`` fields."""
    return {k: v for k, v in row.items() if not k.startswith("_")}


def todo(job: Job, book: Book) -> list[int]:
    if job.ordered:
        return list(range(book.restart_unit(), job.units))
    return [u for u in range(job.units) if u not in book.rows]


def invalidate(job: Job, book: Book, lost) -> dict:
    """After a loss: forget the complete units whose results died; what to record."""
    if job.ordered:
        start = book.restart_unit()
        gone = sorted(u for u in book.rows if u >= start)
        extra = {}
    else:
        extra = dict(job.lost(set(lost), set(book.rows) - book.durable, set(book.durable))
                     if job.lost else {})
        gone = sorted(extra.pop("invalidated", ()))
    wasted = sum(book.rows[u].get("time_s", 0.0) for u in gone if u in book.rows)
    if job.ordered:
        book.forget_from(book.restart_unit())
    for u in gone:
        book.rows.pop(u, None)
        for store in (book.reports, book.saved, book.spans):
            store.pop(u, None)
    return {"invalidated": gone, "invalidated_s": wasted, **extra}


def settle(book: Book, units, drain, grace: float = 5.0) -> None:
    """Wait (briefly) until every unit of ``units`` has its row: reports travel as events
    and may trail the futures."""
    deadline = time.monotonic() + grace
    while True:
        drain()
        missing = [u for u in units if u not in book.rows]
        if not missing:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{book.job.name}: no complete report for unit(s) "
                               f"{missing[:5]} although their tasks finished")
        time.sleep(0.01)


def measure(job: Job, ledger, placement: Placement, book: Book, meter: dict) -> dict:
    """Measured bytes of the last attempt next to its plans on the same workers, per run and
    per unit (of the units that ran)."""
    if ledger is None or ledger.entries is None:
        return {"per_unit": {}}
    workers = list(placement.workers)
    owner = [workers.index(placement.worker(p)) for p in range(job.nparts)]
    out = dict(ledger.report())
    per_unit: dict[int, dict] = {}

    def unit(u):
        return per_unit.setdefault(u, {"planned_bytes": 0, "measured_bytes": 0.0})

    plans = meter.get("plans") or []
    if callable(plans):                 # computed while the tasks ran (AttemptGraph)
        plans = plans()
    planned_pairs: list = []
    if plans:
        total, count = 0, 0
        ran = meter.get("units", set()) & set(book.rows)
        for entry in plans:
            plan, unit_of_phase = entry[0], entry[1]
            bcast = entry[2] if len(entry) > 2 else meter.get("broadcast", False)
            placed = plan.placed(owner, len(workers), broadcast=bcast)
            units = [None if unit_of_phase is None else unit_of_phase(int(ph))
                     for ph in placed.phase.tolist()]
            for u, nbytes, a, b in zip(units, placed.message_bytes().tolist(),
                                       placed.src.tolist(), placed.dst.tolist()):
                if u is None or u in ran:
                    total += int(nbytes)
                    count += 1
                    planned_pairs.append((workers[a], workers[b], int(nbytes)))
                    if u is not None:
                        unit(u)["planned_bytes"] += int(nbytes)
        out["planned_bytes"], out["planned_messages"] = total, count
        if out["inter_worker_messages"]:
            out["framing_bytes_per_message"] = (out["inter_worker_bytes"] - total) / \
                out["inter_worker_messages"]
    unit_of_key = meter.get("unit_of_key")
    if unit_of_key is not None:
        for e in ledger.entries:
            total = sum(e["keys"].values()) or 1
            for key, nbytes in e["keys"].items():
                u = unit_of_key(tuple(key) if isinstance(key, list) else key)
                if u is not None:
                    unit(u)["measured_bytes"] += e["bytes"] * nbytes / total
    for d in per_unit.values():
        d["measured_bytes"] = int(round(d["measured_bytes"]))
    out["per_unit"] = per_unit
    out["host_link_bytes"] = host_link_bytes(
        [(e["sender"], e["receiver"], e["sizeof"]) for e in ledger.entries],
        planned_pairs if plans else None)
    return out


def _host(address: str) -> str:
    """``tcp://10.0.0.2:4000`` -> ``10.0.0.2``."""
    return address.split("://", 1)[-1].rsplit(":", 1)[0]


def host_link_bytes(measured, planned=None) -> dict:
    """Per host, the sizeof bytes its link carried to and from other hosts: ``{host:
    {"measured": bytes, "planned": bytes or None}}`` from lists of ``(sender, receiver,
    nbytes)``."""
    out: dict = {}

    def add(pairs, what):
        for src, dst, nbytes in pairs:
            a, b = _host(src), _host(dst)
            for h in (a, b):
                row = out.setdefault(h, {"measured": 0, "planned": 0 if planned else None})
                if a != b:
                    row[what] += int(nbytes)

    add(measured, "measured")
    if planned:
        add(planned, "planned")
    return out
