"""Direct worker-to-worker exchange: a Program's messages pushed to their receiver.

In the *graph* mode (the reference) a message between workers is a task result that the
receiving worker fetches (a ``get_data`` round trip, scheduled by the scheduler: two
scheduler messages and a request per transfer). In the *direct* mode, in the spirit of
distributed's P2P shuffle, the sending worker pushes every message of a step to its
receiver as soon as the step has computed it: one RPC per (step, sending worker,
receiving worker), carrying all the parts' payloads for that worker (coalesced), written
to a connection the sender keeps open to that receiver (a one-way message: no reply is
awaited, so a push costs the write, not a round trip; one connection keeps a sender's
pushes in order). The receiver keeps it in a mailbox; the receiver's next step waits
(without holding a thread) until every message the plan says it gets has arrived. The
scheduler sees one task per worker and window of units, and no per-message dependency.

Deadlock-free by construction: a step's sends happen after its receives and are never
waited for (pushes are one-way writes, not rendezvous), the plan says exactly
which messages each step waits for, and every message of step t is sent by a step t task
that depends only on its own worker's chain; so the wait-for relation follows the step
order, which has no cycle. One task at a time per worker (the worker's single thread)
keeps the part states consistent, as in the graph mode.

Bytes: every push is logged like a ``get_data`` reply (``who`` = receiver, ``keys`` = the
graph mode's bundle key, ``total`` = payload sizeof, ``compressed`` = serialized frame
bytes), so :class:`~daskhpc.runtime.TransferLedger` and the dashboard count it.

.. warning::
   Registers an RPC handler (``daskhpc_push``) on the worker's server, sends to it with
   ``reply=False`` over a comm taken from ``Worker.rpc`` (the pool's ``connect``; given
   back at teardown), and uses ``distributed.protocol.serialize`` of ``distributed``
   2026.8.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

from distributed.diagnostics.plugin import WorkerPlugin

from daskhpc._workflows import EXCHANGE_PLUGIN

__all__ = ["Exchange", "NAME", "extension"]

NAME = EXCHANGE_PLUGIN
#: Seconds between checks of a waiting step for a cancelled run.
POLL_S = 0.5


class Exchange(WorkerPlugin):
    """The mailbox of one worker (see the module docstring)."""

    name = NAME
    idempotent = True

    def setup(self, worker) -> None:
        self.worker = worker
        self.box: dict = {}              # token -> {mail id: payload}
        self.dead: set = set()           # tokens of runs that are over
        self.log: deque = deque(maxlen=100_000)   # like transfer_outgoing_log
        self.count = 0                   # pushes ever logged (wrap detection)
        self.sent: dict = {}             # receiver address -> wire bytes, cumulative
        self.pushing: dict = {}          # token -> in-flight pushes (asyncio tasks)
        self.links: dict = {}            # receiver address -> open comm (one-way pushes)
        self._linking: dict = {}         # receiver address -> asyncio.Lock of its connect
        self._arrived = None             # asyncio.Condition, made on the worker's loop
        worker.handlers["daskhpc_push"] = self.receive

    def teardown(self, worker) -> None:
        worker.handlers.pop("daskhpc_push", None)
        for address, comm in self.links.items():
            if not comm.closed():
                worker.rpc.reuse(address, comm)
        self.links.clear()

    def _cond(self) -> asyncio.Condition:
        if self._arrived is None:
            self._arrived = asyncio.Condition()
        return self._arrived

    # -- receiving --------------------------------------------------------------------
    async def receive(self, token: str, msgs: list) -> str:
        """RPC handler: ``msgs`` = ``[(mail id, payload), ...]`` for run ``token``."""
        if token in self.dead:
            return "dropped"
        got = self.box.setdefault(token, {})
        for mid, payload in msgs:
            got[mid] = payload
        async with self._cond():
            self._cond().notify_all()
        return "OK"

    async def wait(self, token: str, ids: list, keep: bool = False) -> dict:
        """``{mail id: payload}`` of every id in ``ids``, once all have arrived (taken
        out of the mailbox unless ``keep``: a message several steps read)."""
        if not ids:
            return {}
        cond = self._cond()
        async with cond:
            while True:
                got = self.box.get(token, {})
                missing = [i for i in ids if i not in got]
                if not missing:
                    break
                if token in self.dead:
                    raise RuntimeError(f"run {token} ended while waiting for "
                                       f"{len(missing)} message(s), e.g. {missing[0]}")
                try:
                    await asyncio.wait_for(cond.wait(), POLL_S)
                except asyncio.TimeoutError:
                    pass
        got = self.box[token]
        return {i: got[i] for i in ids} if keep else {i: got.pop(i) for i in ids}

    def discard(self, token: str, ids) -> None:
        """Drop messages read for the last time (after ``wait(..., keep=True)``)."""
        got = self.box.get(token, {})
        for i in ids:
            got.pop(i, None)

    # -- sending ----------------------------------------------------------------------
    async def push(self, token: str, address: str, key, msgs: list) -> None:
        """Send ``msgs`` (``[(mail id, payload)]``) to the worker at ``address``, in one
        message; log it as a transfer of ``key``."""
        from dask.sizeof import sizeof
        from distributed.protocol.serialize import Serialized, serialize

        header, frames = serialize(msgs, on_error="raise")
        wire = sum(memoryview(f).nbytes for f in frames)
        start = time.time()
        # a push to a worker that died retries its connection for distributed's connect
        # timeout (30 s) and holds this worker's task slot that long, so the restart
        # waited for it: the run's end (forget) cancels its pushes instead
        call = asyncio.ensure_future(self._send(address, {
            "op": "daskhpc_push", "token": token, "msgs": Serialized(header, frames),
            "reply": False}))
        inflight = self.pushing.setdefault(token, set())
        inflight.add(call)
        try:
            await call
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if token in self.dead and not (me is not None and me.cancelling()):
                raise RuntimeError(f"run {token} ended while pushing to {address}") from None
            raise
        finally:
            inflight.discard(call)
        total = sum(sizeof(m[1]) for m in msgs)
        self.log.append({"who": address, "keys": {key: total}, "total": total,
                         "compressed": wire, "start": start, "stop": time.time()})
        self.count += 1
        self.sent[address] = self.sent.get(address, 0) + wire

    async def _send(self, address: str, msg: dict) -> None:
        """Write ``msg`` to the connection kept open to ``address`` (made on first use).

        A request with a reply cost a round trip per push (1.4-1.9 ms measured on 2 busy
        cores, most of a short step); the write returns once the frames are queued."""
        comm = self.links.get(address)
        if comm is None or comm.closed():
            async with self._linking.setdefault(address, asyncio.Lock()):
                comm = self.links.get(address)
                if comm is None or comm.closed():
                    comm = await self.worker.rpc.connect(address)
                    self.links[address] = comm
        await comm.write(msg, on_error="raise")

    def forget(self, token: str) -> None:
        """The run is over: drop its mail, wake its waiters and cancel its pushes (they
        fail). Called in the worker's event loop (``client.run``)."""
        self.dead.add(token)
        self.box.pop(token, None)
        for call in self.pushing.pop(token, ()):
            call.cancel()


def extension(worker) -> Exchange | None:
    """The worker's :class:`Exchange`, if installed."""
    return worker.plugins.get(NAME)
