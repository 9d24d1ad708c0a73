"""Direct worker-to-worker exchange: a Program's messages pushed to their receiver.

The sending worker pushes a step's messages to each receiver as soon as the step has
computed them (one one-way write per step, sender and receiver, in the spirit of
distributed's P2P shuffle); the receiver's mailbox holds them until its next step, which
waits without holding a thread. Deadlock-free: a step's sends follow its receives and are
never waited for, and every message of step t comes from a step t task.

Between ``tcp://`` workers a push goes over the Exchange's own ``TCP_NODELAY`` socket
(``daskhpc.runtime.transport: socket``): pickle protocol 5 with buffers out of band, read
by :class:`_Reader` (docs/decisions.md, "The direct exchange over its own sockets").
Other schemes and ``transport: dask`` use distributed's comm. Every push is logged like a
``get_data`` reply (``log``, ``count``, ``sent``) so :class:`TransferLedger` counts it.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import socket
import struct
import time
from collections import deque

from distributed.diagnostics.plugin import WorkerPlugin

from daskhpc._dask_internals import (add_handlers, pooled_call, pooled_connect, pooled_reuse,
                                     remove_handlers)
from daskhpc._workflows import EXCHANGE_PLUGIN

NAME = EXCHANGE_PLUGIN
#: Seconds between checks of a waiting step for a cancelled run.
POLL_S = 0.5
#: Seconds a push to an unreachable worker waits for its run to end before it fails.
UNREACHABLE_S = 30.0
#: Seconds a connection to a worker's exchange port may take before it counts as closed.
CONNECT_S = 10.0
#: A message's head: token bytes, buffers, pickle bytes, buffer area bytes, send time;
#: then the token, the buffers' sizes, the pickle, the aligned buffer area. A hello (a
#: connection's first message) has the sender's address as its token and nothing else.
_HEAD = struct.Struct("<IIQQd")
#: ``daskhpc.runtime.transport`` values (:func:`transport`).
TRANSPORTS = ("socket", "dask")
#: Messages up to this size are joined into one buffer and written at once.
JOIN_BYTES = 1 << 16
#: A reader's buffer: messages up to this size are read into it, several per system call.
STAGE_BYTES = 1 << 17
#: Byte alignment of every out-of-band buffer on the receiver (float64, int64).
ALIGN = 8


class _Closed(OSError):
    """A live worker's exchange port cannot be connected to (a firewall)."""


def transport() -> str:
    """``daskhpc.runtime.transport`` of this process: ``socket`` or ``dask``."""
    from daskhpc import _config

    mode = _config.get("runtime.transport", "socket")
    if mode not in TRANSPORTS:
        from daskhpc.errors import InputError

        raise InputError(f"daskhpc.runtime.transport must be one of {', '.join(TRANSPORTS)}"
                         f", not {mode!r}")
    return mode


class Exchange(WorkerPlugin):
    """The mailbox of one worker (see the module docstring)."""

    name = NAME
    idempotent = True

    def setup(self, worker) -> None:
        self.worker = worker
        self.box: dict = {}              # token -> {mail id: payload}
        self.came: dict = {}             # token -> {mail id: (sender, sent, arrived)}
        self.dead: set = set()           # tokens of runs that are over
        self.log: deque = deque(maxlen=100_000)   # like transfer_outgoing_log
        self.count = 0                   # pushes ever logged (wrap detection)
        self.sent: dict = {}             # receiver address -> wire bytes, cumulative
        self.at_once = 0                 # pushes written without a task (_write_now)
        self.in_part = 0                 # pushes it wrote part of (the rest: _send_rest)
        self.pushing: dict = {}          # token -> in-flight pushes (asyncio tasks)
        self.links: dict = {}            # receiver address -> open comm (one-way pushes)
        self._linking: dict = {}         # receiver address -> asyncio.Lock of its connect
        self._waiters: set = set()       # futures of steps waiting for mail
        self.transport = transport()
        self.sockets: dict = {}          # receiver address -> (socket, asyncio.Lock)
        self.ports: dict = {}            # receiver address -> where its exchange listens
        self.unreadable: dict = {}       # token -> why a message of its run was unreadable
        self._server = None              # listening socket (made on first request)
        self._serving: set = set()       # the accept loop
        self._readers: set = set()       # transports of the connections we read
        add_handlers(worker, {"daskhpc_push": self.receive, "daskhpc_listen": self.listen})

    def teardown(self, worker) -> None:
        remove_handlers(worker, ("daskhpc_push", "daskhpc_listen"))
        for address, comm in self.links.items():
            if not comm.closed():
                pooled_reuse(worker, address, comm)
        self.links.clear()
        for task in self._serving:
            task.cancel()
        for reader in list(self._readers):
            reader.close()
        for sock, _ in self.sockets.values():
            sock.close()
        self.sockets.clear()
        if self._server is not None:
            self._server.close()

    def _wake(self) -> None:
        for fut in self._waiters:
            _settle(fut)

    async def receive(self, token: str, msgs: list, sender: str = "",
                      sent: float = 0.0) -> str:
        """RPC handler: ``msgs`` = ``[(mail id, payload), ...]`` for run ``token``."""
        return self.deliver(token, msgs, sender, sent)

    def deliver(self, token: str, msgs: list, sender: str = "", sent: float = 0.0) -> str:
        """Put ``msgs`` in run ``token``'s mailbox and wake its waiting steps."""
        if token in self.dead:
            return "dropped"
        got = self.box.setdefault(token, {})
        came = self.came.setdefault(token, {})
        now = time.time()
        for mid, payload in msgs:
            got[mid] = payload
            came[mid] = (sender, sent, now)
        self._wake()
        return "OK"

    def undeliverable(self, token: str, why: str) -> None:
        """A message of run ``token`` cannot be unpickled here: its waiting steps fail with
        ``why``."""
        if token not in self.dead:
            self.unreadable.setdefault(token, why)
            self._wake()

    async def listen(self) -> dict:
        """RPC handler: the ``port`` this worker's exchange listens on (opened on first
        call)."""
        if self._server is None:
            from distributed.comm import get_address_host

            host = get_address_host(self.worker.address)
            server = socket.create_server((host, 0), family=_family(host))
            server.setblocking(False)
            self._server = server
            self._spawn(self._accept(server))
        return {"port": self._server.getsockname()[1]}

    def _spawn(self, coro) -> None:
        task = asyncio.ensure_future(coro)
        self._serving.add(task)
        task.add_done_callback(self._serving.discard)

    async def _accept(self, server) -> None:
        loop = asyncio.get_running_loop()
        while True:
            conn, peer = await loop.sock_accept(server)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            await loop.connect_accepted_socket(lambda: _Reader(self, peer), conn)

    async def wait(self, token: str, ids: list, keep: bool = False, clock=None) -> dict:
        """``{mail id: payload}`` of every id in ``ids`` once all have arrived (removed
        unless ``keep``). ``clock`` (a StepClock) is told whose message ended the wait and
        how long it was on the wire."""
        if not ids:
            return {}
        loop = asyncio.get_running_loop()
        began, late = time.time(), None
        while True:
            got = self.box.get(token, {})
            missing = [i for i in ids if i not in got]
            if not missing:
                break
            late = missing if late is None else late
            if token in self.dead:
                raise RuntimeError(f"run {token} ended while waiting for "
                                   f"{len(missing)} message(s), e.g. {missing[0]}")
            if token in self.unreadable:
                raise RuntimeError(self.unreadable[token])
            # woken by the next delivery or the run's end; the timer is a safety net
            fut = loop.create_future()
            self._waiters.add(fut)
            timer = loop.call_later(POLL_S, _settle, fut)
            try:
                await fut
            finally:
                timer.cancel()
                self._waiters.discard(fut)
        came = self.came.get(token, {})
        if clock is not None and late:
            # the message that came last ended the wait: on the wire since it was sent
            sender, sent, arrived = max((came[i] for i in late if i in came),
                                        key=lambda c: c[2], default=("", 0.0, 0.0))
            if sender:
                waited = max(arrived - began, 0.0)
                clock.blame(sender, waited, min(max(arrived - sent, 0.0), waited))
        got = self.box[token]
        if keep:
            return {i: got[i] for i in ids}
        for i in ids:
            came.pop(i, None)
        return {i: got.pop(i) for i in ids}

    def discard(self, token: str, ids) -> None:
        """Drop messages read for the last time (after ``wait(..., keep=True)``)."""
        got = self.box.get(token, {})
        came = self.came.get(token, {})
        for i in ids:
            got.pop(i, None)
            came.pop(i, None)

    async def push(self, token: str, address: str, key, msgs: list) -> None:
        """Send ``msgs`` to the worker at ``address`` in one message, logged as a transfer
        of ``key``."""
        from dask.sizeof import sizeof

        start = time.time()
        if not self._via_socket(address):
            wire = await self._tracked(token, address,
                                       self._send_dask(token, address, msgs, start))
        else:
            out, wire = _framed(token, msgs, start)
            sent = self._write_now(address, out)
            if sent == wire:
                self.at_once += 1
            elif sent:
                # the rest goes first: the lock is free, its acquire does not yield
                self.in_part += 1
                sock, lock = self.sockets[address]
                await lock.acquire()
                try:
                    await self._tracked(token, address, self._send_rest(
                        token, address, sock, out, sent, msgs))
                finally:
                    lock.release()
            else:
                wire = await self._tracked(token, address,
                                           self._send_socket(token, address, msgs, out))
        total = sum(sizeof(m[1]) for m in msgs)
        self.log.append({"who": address, "keys": {key: total}, "total": total,
                         "compressed": wire, "start": start, "stop": time.time()})
        self.count += 1
        self.sent[address] = self.sent.get(address, 0) + wire

    async def push_all(self, token: str, pushes: list) -> None:
        """:meth:`push` every ``(address, key, msgs)``; a single one without a task."""
        if len(pushes) == 1:
            await self.push(token, *pushes[0])
        elif pushes:
            await asyncio.gather(*(self.push(token, *p) for p in pushes))

    async def _tracked(self, token: str, address: str, send):
        """Await ``send`` as a task that the run's end (:meth:`forget`) cancels, so a push
        to a dead worker does not hold the task slot for the connect timeout."""
        call = asyncio.ensure_future(send)
        inflight = self.pushing.setdefault(token, set())
        inflight.add(call)
        try:
            return await call
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if token in self.dead and not (me is not None and me.cancelling()):
                raise RuntimeError(f"run {token} ended while pushing to {address}") from None
            raise
        finally:
            inflight.discard(call)

    def _write_now(self, address: str, out: list) -> int:
        """Write a message at once on the open, unlocked connection to ``address`` (no task,
        no event loop turn); the bytes written, 0 when the caller must take the task path."""
        link = self.sockets.get(address)
        if link is None or link[1].locked() or (len(out) > 1 and not
                                                 (_SENDMSG and len(out) <= _IOV_MAX)):
            return 0
        sock = link[0]
        try:
            return sock.send(out[0]) if len(out) == 1 else sock.sendmsg(out)
        except (BlockingIOError, InterruptedError):
            return 0
        except OSError:
            self._drop(address, sock)
            return 0

    async def _send_rest(self, token: str, address: str, sock, out: list, sent: int,
                         msgs: list) -> None:
        """Finish a message :meth:`_write_now` wrote ``sent`` bytes of; on an error drop the
        connection and send it again whole."""
        loop = asyncio.get_running_loop()
        try:
            for frame in _after(out, sent):
                await loop.sock_sendall(sock, frame)
            return
        except BaseException as e:
            self._drop(address, sock)
            if not isinstance(e, OSError):
                raise
        await self._send_socket(token, address, msgs, out)

    def _via_socket(self, address: str) -> bool:
        """Pushes to ``address`` go over the Exchange's socket (tcp://, port not closed to
        us)."""
        return (self.transport != "dask" and address.startswith("tcp://")
                and self.ports.get(address, 0) is not None)

    async def _send_dask(self, token: str, address: str, msgs: list, sent: float) -> int:
        """Write the message on distributed's comm to ``address`` (no reply awaited); its
        bytes."""
        from distributed.protocol import Serialized, serialize

        header, frames = serialize(msgs, on_error="raise")
        comm = self.links.get(address)
        if comm is None or comm.closed():
            async with self._linking.setdefault(address, asyncio.Lock()):
                comm = self.links.get(address)
                if comm is None or comm.closed():
                    comm = await pooled_connect(self.worker, address)
                    self.links[address] = comm
        await comm.write({"op": "daskhpc_push", "token": token, "sender": self.worker.address,
                          "sent": sent, "msgs": Serialized(header, frames), "reply": False},
                         on_error="raise")
        return sum(memoryview(f).nbytes for f in frames)

    async def _send_socket(self, token: str, address: str, msgs: list, out: list) -> int:
        """Write the message on the socket to ``address``; its bytes. An unreachable worker
        is asked for its port again once, then the push waits for its run to end (at most
        :data:`UNREACHABLE_S`); a closed port sends through distributed's comm from then on."""
        wire = sum(memoryview(p).nbytes for p in out)
        loop = asyncio.get_running_loop()
        for attempt in (0, 1):
            try:
                sock, lock = await self._socket(address, fresh=attempt > 0)
            except _Closed:
                import logging

                logging.getLogger(__name__).warning(
                    "cannot connect to the exchange port of worker %s; its messages go "
                    "through distributed's comm", address)
                return await self._send_dask(token, address, msgs, time.time())
            except OSError:
                continue
            async with lock:
                try:
                    for frame in out:
                        await loop.sock_sendall(sock, frame)
                    return wire
                except BaseException as e:
                    self._drop(address, sock)
                    if not isinstance(e, OSError):     # (OSError: the next attempt)
                        raise
        deadline = time.monotonic() + UNREACHABLE_S
        while token not in self.dead and time.monotonic() < deadline:
            await asyncio.sleep(POLL_S)
        raise OSError(f"cannot reach the exchange of worker {address}")

    def _drop(self, address: str, sock) -> None:
        """Close a connection a message may be half written on."""
        if self.sockets.get(address, (None,))[0] is sock:
            del self.sockets[address]
        sock.close()

    async def _socket(self, address: str, fresh: bool):
        """The socket to ``address``'s exchange and its write lock (``fresh``: reconnect).
        Raises :class:`_Closed` when the worker told its port and the port refused us."""
        if fresh:
            self.ports.pop(address, None)
            old = self.sockets.pop(address, None)
            if old is not None:
                old[0].close()
        link = self.sockets.get(address)
        if link is not None:
            return link
        async with self._linking.setdefault(("socket", address), asyncio.Lock()):
            link = self.sockets.get(address)
            if link is None:
                from distributed.comm import get_address_host

                asked = address not in self.ports
                if asked:
                    self.ports[address] = await pooled_call(self.worker,
                                                            address).daskhpc_listen()
                where = self.ports[address]
                host = get_address_host(address)
                sock = socket.socket(_family(host), socket.SOCK_STREAM)
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                try:
                    loop = asyncio.get_running_loop()
                    await asyncio.wait_for(loop.sock_connect(sock, (host, where["port"])),
                                           CONNECT_S)
                    # who sends on this connection: the receiver's waits name it
                    await loop.sock_sendall(sock, _hello(self.worker.address))
                except (OSError, asyncio.TimeoutError) as e:
                    sock.close()
                    if asked:               # alive a moment ago, its port shut to us
                        self.ports[address] = None
                        raise _Closed(address) from e
                    raise OSError(f"cannot connect to {address}'s exchange") from e
                except BaseException:
                    sock.close()
                    raise
                link = self.sockets[address] = (sock, asyncio.Lock())
        return link

    def forget(self, token: str) -> None:
        """The run is over: drop its mail, wake its waiters, cancel its pushes."""
        self.dead.add(token)
        self.box.pop(token, None)
        self.came.pop(token, None)
        self.unreadable.pop(token, None)
        self._wake()
        for call in self.pushing.pop(token, ()):
            call.cancel()


def _hello(address: str) -> bytes:
    """A connection's first message: the sender's address."""
    tok = address.encode()
    return _HEAD.pack(len(tok), 0, 0, 0, 0.0) + tok


def _framed(token: str, msgs: list, sent: float = 0.0) -> tuple[list, int]:
    """One push's wire form (:data:`_HEAD`, token, sizes, pickle, aligned buffers) as
    buffers to write, and its bytes."""
    bufs: list = []
    data = _dumps(msgs, bufs.append)
    frames = [memoryview(b).cast("B") for b in (b.raw() for b in bufs)]
    sizes = [f.nbytes for f in frames]
    # each buffer starts at a multiple of ALIGN (numpy and numba want aligned arrays)
    starts = _offsets(sizes)
    tok = token.encode()
    head = (_HEAD.pack(len(tok), len(frames), len(data),
                       starts[-1] + sizes[-1] if sizes else 0, sent)
            + tok + struct.pack(f"<{len(sizes)}Q", *sizes))
    parts: list = [head + data]
    for i, f in enumerate(frames):
        if i:
            parts.append(bytes(starts[i] - starts[i - 1] - sizes[i - 1]))
        parts.append(f)
    wire = sum(memoryview(p).nbytes for p in parts)
    out = [b"".join(parts)] if wire <= JOIN_BYTES else [p for p in parts if len(p)]
    return out, wire


def _after(out: list, skip: int) -> list:
    """The bytes of the buffers ``out`` after the first ``skip``."""
    rest = []
    for buf in out:
        view = memoryview(buf).cast("B")
        if skip < view.nbytes:
            rest.append(view[skip:])
        skip = max(0, skip - view.nbytes)
    return rest


def _dumps(msgs: list, buffer_callback) -> bytes:
    """``msgs`` pickled (protocol 5, buffers out of band) as distributed does: plain pickle,
    else cloudpickle when it refuses or refers to the sender's ``__main__``."""
    got: list = []
    try:
        data = pickle.dumps(msgs, protocol=5, buffer_callback=got.append)
    except Exception:                              # noqa: BLE001 - retried below
        data = None
    if data is None or b"__main__" in data:
        from daskhpc._dask_internals import dumps

        got.clear()
        data = dumps(msgs, buffer_callback=got.append, protocol=5)
    for b in got:
        buffer_callback(b)
    return data


class _Reader(asyncio.BufferedProtocol):
    """The messages of one sender's connection, delivered in the event loop as they arrive:
    small ones several per read from a stage buffer, a large one into its own aligned
    buffer. A cancelled sender closes the connection, so a message is whole or absent."""

    def __init__(self, exchange: Exchange, peer):
        self.exchange, self.peer = exchange, peer
        self.sender = ""                # the sending worker's address (its hello)
        self.stage = memoryview(bytearray(STAGE_BYTES))
        self.lo = self.hi = 0           # stage[lo:hi]: read, not yet a whole message
        self.big = None                 # a message larger than the stage, being read
        self.got = 0                    # its bytes read

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.exchange._readers.add(transport)

    def connection_lost(self, exc) -> None:
        self.exchange._readers.discard(self.transport)

    def get_buffer(self, sizehint: int):
        if self.big is not None:
            return self.big[self.got:]
        return self.stage[self.hi:]

    def buffer_updated(self, nbytes: int) -> None:
        if self.big is not None:
            self.got += nbytes
            if self.got == len(self.big):
                big, self.big = self.big, None
                self._take(big, copy=False)
            return
        self.hi += nbytes
        while self.hi - self.lo >= _HEAD.size:
            n = _length(self.stage, self.lo)
            if self.hi - self.lo < n:
                break
            self._take(self.stage[self.lo:self.lo + n], copy=True)
            self.lo += n
        n = _length(self.stage, self.lo) if self.hi - self.lo >= _HEAD.size else 0
        if self.lo == self.hi:
            self.lo = self.hi = 0
        elif n > STAGE_BYTES:
            self._read_apart(n)
        elif self.lo:       # a message's beginning: to the front, its rest will follow
            k = self.hi - self.lo
            self.stage[:k] = self.stage[self.lo:self.hi]
            self.lo, self.hi = 0, k

    def _read_apart(self, n: int) -> None:
        """Read the message at stage[lo:hi] (``n`` bytes) into its own buffer, its buffer
        area aligned."""
        ntok, nbuf, npk, _, _ = _HEAD.unpack_from(self.stage, self.lo)
        pad = -(_HEAD.size + ntok + 8 * nbuf + npk) % ALIGN
        self.big = memoryview(bytearray(pad + n))[pad:]
        self.got = self.hi - self.lo
        self.big[:self.got] = self.stage[self.lo:self.hi]
        self.lo = self.hi = 0

    def _take(self, msg, copy: bool) -> None:
        """Unpickle one whole message and deliver it (``copy``: its buffers live in the
        stage)."""
        ntok, nbuf, npk, area, sent = _HEAD.unpack_from(msg)
        at = _HEAD.size + ntok
        token = bytes(msg[_HEAD.size:at]).decode()
        if not npk:                                # a hello: who sends on it
            self.sender = token
            return
        sizes = struct.unpack_from(f"<{nbuf}Q", msg, at)
        at += 8 * nbuf
        body = msg[at + npk:at + npk + area]
        if copy and area:
            body = memoryview(bytearray(body))       # its own, writable, aligned memory
        try:
            msgs = pickle.loads(msg[at:at + npk],
                                buffers=[body[a:a + k] for a, k in zip(_offsets(sizes), sizes)])
        except Exception as e:                     # noqa: BLE001 - reported to the run
            self.exchange.undeliverable(
                token, f"worker {self.exchange.worker.address} cannot read a message of run "
                       f"{token} from {self.peer}: {type(e).__name__}: {e}")
            return
        self.exchange.deliver(token, msgs, self.sender, sent)


def _length(buf, at: int) -> int:
    """Bytes of the message whose head starts at ``buf[at]``."""
    ntok, nbuf, npk, area, _ = _HEAD.unpack_from(buf, at)
    return _HEAD.size + ntok + 8 * nbuf + npk + area


def _offsets(sizes) -> list:
    """Where each out-of-band buffer starts: the previous one's end rounded up to ALIGN."""
    starts, at = [], 0
    for n in sizes:
        starts.append(at)
        at += -(-n // ALIGN) * ALIGN
    return starts


def _settle(fut) -> None:
    if not fut.done():
        fut.set_result(None)


def _family(host: str) -> int:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


#: Whether sockets gather buffers in one call here (not on Windows), and how many at most.
_SENDMSG = hasattr(socket.socket, "sendmsg")


def _iov_max() -> int:
    try:
        return int(os.sysconf("SC_IOV_MAX"))
    except (AttributeError, ValueError, OSError):
        return 16                               # POSIX's least


_IOV_MAX = _iov_max()


def extension(worker) -> Exchange | None:
    """The worker's :class:`Exchange`, if installed."""
    return worker.plugins.get(NAME)
