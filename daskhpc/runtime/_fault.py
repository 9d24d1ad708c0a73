"""Notice lost workers while a pinned graph runs, and re-place their parts.

A pinned task whose worker dies does not fail: the scheduler parks it as *no-worker*
for a worker of that address, which a nanny never brings back (new port), so waiting on
it would hang. :class:`WorkerWatch` follows the scheduler's ``remove-worker`` events and
:func:`gather_watching` waits in short slices, raising :class:`WorkerLost`; the workflow
then re-maps the parts (:func:`replace_lost`) and restarts from its last checkpoint.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
import time

from daskhpc.runtime._connect import worker_addresses


def host_timeout() -> float:
    """Seconds without a worker's heartbeat before a run counts it lost
    (``daskhpc.runtime.host-timeout``, 30 by default)."""
    from daskhpc import _config

    return float(_config.get("runtime.host-timeout", 30))


class WorkerLost(RuntimeError):
    """Workers that owned parts of the run left the cluster.

    Attributes
    ----------
    lost : frozenset of str
        Their addresses.
    why : dict
        For some of them, why they count as lost (e.g. no heartbeat for 30 s).
    """

    def __init__(self, lost, why: dict | None = None):
        self.lost = frozenset(lost)
        self.why = dict(why or {})
        super().__init__("worker(s) lost during the run: " + ", ".join(
            a + (f" ({self.why[a]})" if a in self.why else "") for a in sorted(self.lost)))


class WorkerWatch:
    """Record the departure of any of ``workers`` (a context manager).

    Subscribes to the scheduler's ``all`` event topic (``remove-worker`` events); a worker
    lost before the subscription takes effect is seen by :meth:`refresh`. A client keeps one
    handler per topic, so one watch per client at a time.
    """

    def __init__(self, client, workers, timeout: float | None = None):
        self.client = client
        self.workers = frozenset(workers)
        self.timeout = host_timeout() if timeout is None else timeout
        self._lost: set[str] = set()
        self._why: dict[str, str] = {}
        self._seen: dict[str, tuple] = {}     # worker -> (last_seen, monotonic when it moved)
        self._lock = threading.Lock()

    def _on_event(self, event) -> None:
        _, msg = event
        if isinstance(msg, dict) and msg.get("action") == "remove-worker":
            addr = msg.get("worker")
            if addr in self.workers:
                with self._lock:
                    self._lost.add(addr)

    def __enter__(self) -> WorkerWatch:
        self.client.subscribe_topic("all", self._on_event)
        return self

    def __exit__(self, *exc) -> None:
        with contextlib.suppress(Exception):     # a closed client has nothing to unsubscribe
            self.client.unsubscribe_topic("all")

    @property
    def lost(self) -> frozenset:
        with self._lock:
            return frozenset(self._lost)

    def refresh(self) -> None:
        """Compare with the workers alive now, and count as lost a worker the scheduler has
        not heard from in ``timeout`` seconds (a host cut off closes nothing; its heartbeat
        stops at once). The scheduler is told to remove it."""
        workers = self.client.sync(self.client.scheduler.identity, n_workers=-1)["workers"]
        gone = self.workers - set(workers)
        now = time.monotonic()
        quiet = {}
        for addr in self.workers & set(workers):
            seen = workers[addr].get("last_seen")
            before = self._seen.get(addr)
            if before is None or before[0] != seen:
                self._seen[addr] = (seen, now)
            else:
                quiet[addr] = now - before[1]
        # one worker silent past the timeout (or dropped): with it, any silent for half
        # of it (a failed network takes them at once; one timeout each would cost more)
        cue = bool(gone) or any(t > self.timeout for t in quiet.values())
        silent = {a: f"no heartbeat for {t:.0f} s: its host is cut off or hung"
                  for a, t in quiet.items() if cue and t > self.timeout / 2}
        for a in gone:       # dropped by the scheduler after a silence: cut off, too
            silent.update(self._silence(a, now))
        if silent:
            with contextlib.suppress(Exception):
                self.client.run_on_scheduler(_remove_workers, sorted(silent))
        if gone or silent:
            with self._lock:
                self._lost |= gone | set(silent)
                self._why.update(silent)

    def _silence(self, addr: str, now: float) -> dict:
        """``{addr: why}`` if the scheduler dropped ``addr`` after a silence of over half
        the timeout, else {}."""
        t = now - self._seen[addr][1] if addr in self._seen else 0.0
        return {addr: f"no heartbeat for {t:.0f} s, then dropped by the scheduler: its "
                      "host is cut off or hung"} if t > self.timeout / 2 else {}

    def check(self) -> None:
        """Raise :class:`WorkerLost` if a watched worker has gone."""
        lost = self.lost
        if lost:
            now = time.monotonic()
            with self._lock:
                for a in lost - set(self._why):      # seen leaving by the scheduler's event
                    self._why.update(self._silence(a, now))
                why = {a: w for a, w in self._why.items() if a in lost}
            raise WorkerLost(lost, why)


async def _remove_workers(addresses, dask_scheduler=None) -> None:
    """On the scheduler: remove workers that stopped answering."""
    for addr in addresses:
        if addr in dask_scheduler.workers:
            await dask_scheduler.remove_worker(address=addr, close=False,
                                               stimulus_id=f"daskhpc-silent-{time.time()}")


def register_once(client, plugin, name: str) -> None:
    """Register the worker plugin ``plugin`` as ``name`` unless the scheduler has one
    (registering again broadcasts it, and a cut-off worker holds that call)."""
    def has(dask_scheduler, name=name):
        return name in dask_scheduler.worker_plugins

    if not client.run_on_scheduler(has):
        try:
            client.register_plugin(plugin, name=name)
        except OSError:
            # an unreachable worker: the plugin is kept, the watch counts it lost
            if not client.run_on_scheduler(has):
                raise


def run_on_workers(client, fn, *args, workers=None, **kwargs) -> dict:
    """``client.run(fn, *args, workers=workers)`` without the workers that cannot be reached
    or that the scheduler no longer lists (a call to a cut-off host waits 30 s); other
    errors are raised."""
    if workers is not None:
        alive = set(worker_addresses(client))
        workers = [w for w in workers if w in alive]
        if not workers:
            return {}
    out = client.run(fn, *args, workers=workers, on_error="return", **kwargs)
    for value in out.values():
        if isinstance(value, BaseException) and not isinstance(value, OSError):
            raise value
    return {w: v for w, v in out.items() if not isinstance(v, OSError)}


def gather_watching(client, futures, watch: WorkerWatch, *, poll: float = 0.1,
                    on_poll=None, values: bool = True, when_done=None,
                    wake=None) -> list | None:
    """``client.gather(futures)`` that raises :class:`WorkerLost` instead of hanging.

    Parameters
    ----------
    client : distributed.Client
    futures : list of Future
    watch : WorkerWatch
        Entered by the caller.
    poll : float
        Seconds between checks while futures are pending.
    on_poll : callable, optional
        Called after every slice.
    values : bool
        Gather the values (False: only wait until the futures are done).
    when_done : callable, optional
        Called once every future is done, before their values are gathered.
    wake : threading.Event, optional
        Ends a slice early when set (news for ``on_poll``); the last future's end sets it.

    Returns
    -------
    list or None
        The futures' values, in order.
    """
    from distributed import wait

    pending = list(futures)
    last = time.monotonic() - 1.0 + poll      # the first refresh after one slice
    if wake is not None:                      # the last future's end wakes it too
        left, lock = [len(pending)], threading.Lock()

        def one_done(_):
            with lock:
                left[0] -= 1
                if left[0] == 0:
                    wake.set()

        for f in pending:
            f.add_done_callback(one_done)
    while pending:
        if time.monotonic() - last > 1.0:    # the subscription is asynchronous: a loss
            watch.refresh()                   # just before it took effect is seen here
            last = time.monotonic()
        watch.check()
        try:
            if wake is None:
                wait(pending, timeout=poll, return_when="ALL_COMPLETED")
            elif wake.wait(poll):
                wake.clear()
        except TimeoutError:
            pass
        except Exception:
            # a lost worker's data cancels its dependents: report the loss, the cause
            _settle(watch, poll)
            raise
        if any(f.status in ("error", "cancelled") for f in pending):
            _settle(watch, poll)
        if on_poll is not None:
            on_poll()
        pending = [f for f in pending if not f.done()]
    watch.check()
    if when_done is not None:
        when_done()
    if values:
        return client.gather(list(futures))
    for f in futures:
        if f.status in ("error", "cancelled"):
            f.result()                   # raises the task's error
    return None


def _settle(watch: WorkerWatch, poll: float, grace: float = 2.0) -> None:
    """Raise WorkerLost if the failure just seen comes from a lost worker (waiting up to
    ``grace`` s for its event)."""
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        watch.check()
        time.sleep(poll)
    watch.refresh()
    watch.check()


def replace_lost(client, placement, lost, *, wait_s: float = 5.0):
    """The placement with the parts of ``lost`` workers moved to workers alive now.

    Waits up to ``wait_s`` seconds for the cluster to regain its size (a nanny restarts a
    killed worker on a new address); new workers take the orphaned parts first
    (:meth:`Placement.remap`), else the survivors share them. Raises ``RuntimeError`` when no
    worker is left.
    """
    want = len(set(placement.workers))
    deadline = time.monotonic() + wait_s
    while True:
        alive = [w for w in worker_addresses(client) if w not in lost]
        if len(alive) >= want or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    if not alive:
        raise RuntimeError(f"no worker left after losing {sorted(lost)}"
                           + (": every worker at once, so the likely cause is the network "
                              "of the scheduler's host (or of this client's), not the "
                              "workers" if len(set(placement.workers)) > 1 else ""))
    # survivors first, in their old order: kept parts keep their place
    old = [w for w in placement.workers if w in alive]
    new = [w for w in alive if w not in old]
    return placement.remap(old + new)


def scatter_to(client, data, worker: str):
    """``client.scatter(data, workers=[worker])``, or WorkerLost if ``worker`` has left."""
    try:
        return client.scatter(data, workers=[worker], broadcast=False, hash=False)
    except (KeyError, TimeoutError) as e:
        if lost_in_scatter(e, worker):
            raise WorkerLost({worker}) from None
        raise
    except OSError as e:         # the worker's host cannot be reached (comm closed)
        raise WorkerLost({worker}, {worker: f"unreachable: {e}"}) from None


def lost_in_scatter(error: BaseException, worker: str) -> bool:
    """Whether a scatter to ``worker`` failed with ``error`` because the worker left after
    it was listed (``KeyError(worker)``, or ``TimeoutError("No valid workers found")``)."""
    if isinstance(error, KeyError):
        return bool(error.args) and error.args[0] == worker
    return isinstance(error, TimeoutError) and "No valid workers" in str(error)


def release_futures(futures) -> None:
    """Drop the client's claim on ``futures`` now, whoever else holds them.

    Not ``client.cancel``: cancelling a key with a dependent no client wants fails an
    assertion in the scheduler, which drops the client's stream. Explicit because
    distributed's exception reference cycles keep Futures alive until the next ``gc``.
    """
    for f in futures:
        f.release()


def gather_direct(client, pairs: list) -> list:
    """``client.gather(futures, direct=True)`` that raises WorkerLost, not hangs.

    ``pairs``: ``(Future, worker holding it)``. The gather runs in a thread while this one
    watches the workers; on a loss it cancels the lost futures (safe only for futures no
    task depends on any more: gather after the attempt is over) and raises.
    """
    futures = [f for f, _ in pairs]
    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="spgemm-gather")
    try:
        with WorkerWatch(client, {w for _, w in pairs}) as watch:
            job = pool.submit(client.gather, futures, direct=True)
            poll = 0.1
            last = time.monotonic() - 1.0 + poll      # the first refresh after one slice
            while True:
                try:
                    return job.result(timeout=poll)
                except concurrent.futures.TimeoutError:
                    pass
                except Exception:
                    # the gather may fail before the loss is seen: report the cause
                    time.sleep(0.2)
                    watch.refresh()
                    if not watch.lost:
                        raise
                if time.monotonic() - last > 1.0:
                    watch.refresh()
                    last = time.monotonic()
                lost = watch.lost
                if lost:
                    client.cancel([f for f, w in pairs if w in lost])
                    raise WorkerLost(lost)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
