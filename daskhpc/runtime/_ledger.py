"""Measure the bytes and messages sent between workers, counted on the sender's side: the
direct exchange's log of pushes, and Dask's ``transfer_outgoing_log`` (1000 entries, so a
*tap* copies it every :data:`DRAIN_S` while a ledger is open).
"""

from __future__ import annotations

import asyncio
import contextlib
import pickle
import time
import warnings
import weakref
from collections import deque
from typing import TYPE_CHECKING, Any

import numpy as np

from daskhpc._dask_internals import outgoing_log
from daskhpc._workflows import EXCHANGE_PLUGIN
from daskhpc.runtime._calls import Setting
from daskhpc.runtime._connect import in_order
from daskhpc.runtime._fault import run_on_workers

if TYPE_CHECKING:
    from distributed import Client


class TransferLedger:
    """Bytes and messages sent between workers while the ledger is open.

    Each message (one ``get_data`` batch, or one push of the direct exchange) counts as
    ``bytes`` (``inter_worker_bytes``: what the sender wrote to the socket, frames and their
    length headers; a 1 MiB float64 array is 1,048,867 bytes) and ``sizeof`` (Dask's
    estimate of the values, no framing: 1,048,576).

    Parameters
    ----------
    client : distributed.Client
        A synchronous client.
    settle : float, default 2.0
        On exit, seconds to wait at most for transfers still being written.
    marks, closing : optional
        Where the workers' logs end (:class:`LogMarks`, or a callable giving them at
        :meth:`ready`); a :class:`LedgerClose` whose undo call reads the logs after a body
        that completes.

    Attributes
    ----------
    bytes_total, sizeof_total, messages_total : int
        Totals over all worker pairs.
    entries : list of dict
        One record per message: ``sender``, ``receiver``, ``bytes``, ``sizeof``,
        ``keys`` (``{key: nbytes}``), ``start``, ``stop`` (sender's clock).

    Notes
    -----
    A worker that leaves before the exit takes its counts with it; workers that join are
    counted from their start. Where entries were lost (more than 1000 replies of one worker
    within :data:`DRAIN_S`, or more than :data:`KEPT` messages) the totals are lower bounds.
    Both cases warn (``RuntimeWarning``).

    Examples
    --------
    >>> with TransferLedger(client) as led:                       # doctest: +SKIP
    ...     client.gather(submit_pinned(client, tasks, workers, keys))
    >>> led.report()                                              # doctest: +SKIP
    {'inter_worker_bytes': 1048867, 'inter_worker_bytes_sizeof': 1048576,
     'inter_worker_messages': 1}
    """

    def __init__(self, client: Client, *, settle: float = 2.0, marks: dict | None = None,
                 closing: LedgerClose | None = None):
        self.client = client
        self.settle = settle
        self._given = marks
        self._closing = closing
        #: ``(fn, *args)`` every worker runs in the closing call, before its log is read
        self.then: tuple | None = None
        self.then_values: dict = {}
        self._marks: dict[str, dict] | None = None
        self._later = None               # a callable ``marks=`` not taken yet (ready)
        self._workers: list[str] = []
        self.entries: list[dict] | None = None

    def start(self) -> TransferLedger:
        """Remember where every worker's log ends now (``__enter__`` calls this)."""
        marks, self._given = self._given, None
        self.entries = None
        self._later = marks if callable(marks) else None     # (taken by ready)
        if self._later is None:
            self._take(marks)
        return self

    def ready(self) -> TransferLedger:
        """Take the marks of a callable ``marks=`` now, before the first transfer to count."""
        later, self._later = self._later, None
        if later is not None:
            self._take(later())
        return self

    def _take(self, marks: dict | None) -> None:
        self._marks = run_on_workers(self.client, _log_mark) if marks is None else marks
        self._workers = in_order({w: m["name"] for w, m in self._marks.items()})

    def stop(self, first=None) -> TransferLedger:
        """Collect the messages logged since :meth:`start` (``__exit__`` calls this).
        ``first``: ``(fn, *args)`` each worker runs before, in the same call."""
        self.ready()
        if self._marks is None:
            raise RuntimeError("TransferLedger.stop() before start()")
        return self._collected(run_on_workers(self.client, _log_since, self._marks, self.settle,
                                              first))

    def _collected(self, collected: dict) -> TransferLedger:
        """The entries of ``{worker: _log_since's answer}``."""
        lost = sorted(set(self._marks) - set(collected))
        if lost:
            warnings.warn(f"workers left during the measurement, their sends are not counted: "
                          f"{lost}", RuntimeWarning, stacklevel=3)
        wrapped = sorted(w for w, got in collected.items() if got["wrapped"])
        if wrapped:
            warnings.warn(f"transfers were sent faster than they could be counted on "
                          f"{wrapped}; totals are lower bounds", RuntimeWarning,
                          stacklevel=3)
        self.then_values = {w: got.get("then") for w, got in collected.items()}
        now = in_order({w: got["name"] for w, got in collected.items()})
        self._workers = self._workers + [w for w in now if w not in self._workers]
        self.entries = [{"sender": sender, **entry}
                        for sender in sorted(collected, key=self._order)
                        for entry in _entries(collected[sender])]
        return self

    def __enter__(self) -> TransferLedger:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        if exc[0] is None:
            if self._closing is not None:
                self._closing.ledger = self        # read in the run's undo call
            else:
                self.stop(self.then)
            return
        # the body failed (a lost worker, say): collect what there is, quietly
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            with contextlib.suppress(Exception):    # never mask the body's exception
                self.stop(self.then)

    @property
    def bytes_total(self) -> int:
        return sum(e["bytes"] for e in self._done())

    @property
    def sizeof_total(self) -> int:
        return sum(e["sizeof"] for e in self._done())

    @property
    def messages_total(self) -> int:
        return len(self._done())

    def matrix(self, what: str = "bytes") -> tuple[list[str], np.ndarray]:
        """Traffic between every pair of workers.

        Parameters
        ----------
        what : {"bytes", "sizeof", "messages"}
            Wire bytes, sizeof bytes, or message counts.

        Returns
        -------
        workers : list of str
            Row and column order: workers in stable order (those that joined last).
        counts : numpy.ndarray of int64, shape (K, K)
            ``counts[src, dst]``; the diagonal is zero.
        """
        if what not in ("bytes", "sizeof", "messages"):
            raise ValueError(f"what must be 'bytes', 'sizeof' or 'messages', not {what!r}")
        entries = self._done()
        workers = list(dict.fromkeys([*self._workers, *(w for e in entries
                                                        for w in (e["sender"], e["receiver"]))]))
        index = {w: i for i, w in enumerate(workers)}
        counts = np.zeros((len(workers), len(workers)), dtype=np.int64)
        for e in entries:
            counts[index[e["sender"]], index[e["receiver"]]] += 1 if what == "messages" else \
                e[what]
        return workers, counts

    def by_worker(self) -> dict[str, dict[str, int]]:
        """Per worker: ``sent_bytes``, ``received_bytes``, ``sent_messages``,
        ``received_messages``."""
        workers, nbytes = self.matrix("bytes")
        _, nmsgs = self.matrix("messages")
        return {w: {"sent_bytes": int(nbytes[i].sum()), "received_bytes": int(nbytes[:, i].sum()),
                    "sent_messages": int(nmsgs[i].sum()),
                    "received_messages": int(nmsgs[:, i].sum())}
                for i, w in enumerate(workers)}

    def report(self) -> dict[str, int]:
        """The measured section of a run report: ``inter_worker_bytes``,
        ``inter_worker_bytes_sizeof``, ``inter_worker_messages``."""
        return {"inter_worker_bytes": self.bytes_total,
                "inter_worker_bytes_sizeof": self.sizeof_total,
                "inter_worker_messages": self.messages_total}

    def __repr__(self) -> str:
        if self.entries is None:
            state = "running" if self._marks is not None else "not started"
            return f"<TransferLedger {state}>"
        return (f"<TransferLedger {self.messages_total} messages, "
                f"{self.bytes_total:,} bytes between {len(self._workers)} workers>")

    def _done(self) -> list[dict]:
        if self.entries is None:
            raise RuntimeError("the ledger has not been stopped yet: leave the with-block first")
        return self.entries

    def _order(self, worker: str) -> tuple:
        return (0, self._workers.index(worker)) if worker in self._workers else (1, worker)


def _fingerprint(entry: dict) -> tuple:
    # start/stop are time() floats: no two entries of one worker share them.
    return (entry["start"], entry["stop"], entry["who"], entry["total"])


def _after(entries: list[dict], last: tuple | None) -> list[dict] | None:
    """Entries after the one with fingerprint ``last``; None if it is gone."""
    if last is None:
        return entries
    for i in range(len(entries) - 1, -1, -1):
        if _fingerprint(entries[i]) == last:
            return entries[i + 1 :]
    return None


#: Seconds between two copies of a worker's Dask transfer log into its tap while a
#: ledger is open (the log keeps 1000 entries).
DRAIN_S = 0.2
#: Messages a worker's tap (and the exchange's own ledger) keeps at most.
KEPT = 100_000


class _Tap:
    """One worker's ``get_data`` replies copied from Dask's log every :data:`DRAIN_S` while
    a ledger is open; ``total`` counts every entry copied, ``lost`` where the log overran."""

    def __init__(self, worker):
        log = outgoing_log(worker)
        self.last = _fingerprint(log[-1]) if log else None
        self.entries: deque = deque(maxlen=KEPT)
        self.total = 0
        self.lost: list[int] = []
        self.open = 0
        self.task = None

    def drain(self, worker) -> None:
        log = list(outgoing_log(worker))
        new = _after(log, self.last)
        if new is None:                   # the last one copied was pushed out: a gap
            self.lost.append(self.total)
            new = log
        if new:
            self.entries.extend(new)
            self.total += len(new)
            self.last = _fingerprint(new[-1])

    def since(self, mark: int) -> tuple[list, bool]:
        """The entries copied after ``mark`` (a ``total``) and whether some are missing."""
        n = self.total - mark
        return _last(list(self.entries), n), \
            n > len(self.entries) or any(at >= mark for at in self.lost)

    async def follow(self, worker) -> None:
        try:
            while self.open > 0:
                await asyncio.sleep(DRAIN_S)
                self.drain(worker)
        finally:
            self.task = None


#: The tap of every worker in this process (threads clusters have several).
_TAPS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _tap(worker) -> _Tap:
    tap = _TAPS.get(worker)
    if tap is None:
        tap = _TAPS[worker] = _Tap(worker)
    return tap


class LogMarks(Setting):
    """Where every worker's log ends, taken by a run's settings call: its first ledger's
    ``marks=``."""

    def on(self, calls) -> None:
        self.index = calls.on_workers(_log_mark)

    def marks(self, got) -> dict | None:
        """The marks, or None unless every worker that answered gave one."""
        marks = got.workers(self.index)
        return marks if marks and set(marks) == set(got.by_worker) else None


class LedgerClose(Setting):
    """Reads a run's completed ledger (``closing=``) in the run's undo call. Put it last
    among the settings: its call then runs first on each worker."""

    ledger: TransferLedger | None = None

    def on(self, calls) -> None:
        """Nothing to set."""

    def off(self, calls, got) -> None:
        led = self.ledger
        if led is not None:
            led.ready()
            self._index = calls.on_workers(_log_since, led._marks, led.settle, led.then)

    def closed(self, got) -> None:
        led, self.ledger = self.ledger, None
        if led is not None:
            led._collected(got.workers(self._index))


def _log_mark(dask_worker) -> dict:
    """Where this worker's two sources end now; its tap follows Dask's log until read."""
    tap = _tap(dask_worker)
    tap.drain(dask_worker)
    tap.open += 1
    if tap.task is None:
        tap.task = asyncio.ensure_future(tap.follow(dask_worker))
    ext = dask_worker.plugins.get(EXCHANGE_PLUGIN)
    return {"name": dask_worker.name, "dask": tap.total,
            "push": getattr(ext, "count", None)}


def _pushes(ext, mark) -> tuple[list, bool]:
    """The exchange's log entries after ``mark`` (None: all) and whether some are missing."""
    if ext is None or not hasattr(ext, "log"):
        return [], False
    entries = list(ext.log)
    if mark is None:
        return entries, False
    n = ext.count - mark if ext.count >= mark else ext.count    # (else: a new exchange)
    return _last(entries, n), n > len(entries)


def _last(entries: list, n: int) -> list:
    """The last ``n`` of ``entries``."""
    return entries[max(0, len(entries) - n):] if n > 0 else []


async def _log_since(marks: dict, settle: float, first, dask_worker) -> dict:
    then = None
    if first is not None:
        with contextlib.suppress(Exception):    # as the call on its own was: never fails this
            then = first[0](*first[1:], dask_worker=dask_worker)
    # the sender logs a transfer after the receiver's "OK": wait for the count to drop
    deadline = time.monotonic() + settle
    while dask_worker.transfer_outgoing_count and time.monotonic() < deadline:
        await asyncio.sleep(0.001)
    mark = marks.get(dask_worker.address)
    ext = dask_worker.plugins.get(EXCHANGE_PLUGIN)
    if mark is None:       # joined after the start (or logged_transfers): what there is
        new, wrapped = list(outgoing_log(dask_worker)), False
        pushed, _ = _pushes(ext, None)
    else:
        tap = _tap(dask_worker)
        tap.drain(dask_worker)
        new, wrapped = tap.since(mark["dask"])
        tap.open = max(0, tap.open - 1)
        if tap.open == 0:
            tap.entries.clear()           # (the total stays: later marks count from it)
        pushed, gone = _pushes(ext, mark["push"])
        wrapped = wrapped or gone
    new += pushed
    # pickled: the scheduler relays one bytes object (who=None: a client's gather)
    entries = [{"receiver": e["who"], "bytes": int(e["compressed"]),
                "sizeof": int(e["total"]), "keys": dict(e["keys"]), "start": e["start"],
                "stop": e["stop"]} for e in new if e["who"] is not None]
    return {"name": dask_worker.name, "wrapped": wrapped, "then": then,
            "entries": pickle.dumps(entries, protocol=5)}


def _entries(got: dict) -> list:
    """The entries of one worker's :func:`_log_since` answer."""
    return pickle.loads(got["entries"])


def logged_transfers(client, settle: float = 2.0) -> list[dict]:
    """Every worker-to-worker transfer still in the workers' logs, with ``sender``: for
    before/after differences (a run's traffic: :class:`TransferLedger`)."""
    logs = client.run(_log_since, {}, settle, None)
    return [{"sender": w, **e} for w, log in logs.items() for e in _entries(log)]
