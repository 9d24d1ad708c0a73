"""Every part of ``distributed`` daskhpc uses that is not its public API, in one place: each
item names its use (:data:`INTERNALS`) and ``tests/test_dask_internals.py`` checks each one
against the installed ``distributed`` (tested with 2026.8.0). Elsewhere daskhpc uses the
public surface only."""

from __future__ import annotations

LAZY_NAMES = ["dumps", "loads", "log_errors", "get_ip", "import_term", "applications",
              "template_variables", "BokehApplication", "BOKEH_THEME", "env"]

#: What each internal is used for (the checks in tests/test_dask_internals.py name them).
INTERNALS = {
    "Worker.transfer_outgoing_log": "the bytes on the wire and the keys of each get_data "
                                    "reply (TransferLedger, the dashboard's counter)",
    "Worker.transfer_incoming_log": "the time each fetched key took to arrive (calibrate)",
    "BatchedSend.interval": "the batching of the control streams (low_latency)",
    "Worker.handlers": "the direct exchange's RPC handlers (daskhpc_push, daskhpc_listen)",
    "Worker.rpc": "the connection pool the direct exchange writes its pushes on",
    "Scheduler._broker": "forgetting the event topics of a run's reports",
    "distributed.protocol.pickle": "pickling what the standard pickle refuses, as "
                                   "distributed does",
    "Scheduler.broadcast": "running a function on the workers and nannies from the "
                           "scheduler (the launchers' abort)",
    "Scheduler.register_worker_plugin": "the dashboard's worker partner, from the scheduler",
    "distributed.utils": "log_errors (bokeh callbacks), get_ip (the launchers' address), "
                         "import_term (worker classes by name)",
    "distributed.dashboard": "the daskhpc pages on the scheduler's dashboard",
}


def changed(what: str, detail: str) -> str:
    """The message of a check that found ``what`` changed: names it, the installed
    ``distributed`` and what daskhpc needs it for."""
    import distributed

    return (f"distributed {distributed.__version__}: {what} changed ({detail}); daskhpc "
            f"uses it for {INTERNALS[what]} (daskhpc/_dask_internals.py)")


def outgoing_log(worker):
    """The worker's deque of ``get_data`` replies: dicts with ``who`` (the receiving
    worker, None for a client), ``keys`` (``{key: nbytes}``), ``total`` (sizeof),
    ``compressed`` (bytes written), ``start``, ``stop``; the last
    ``distributed.admin.low-level-log-length`` of them."""
    return worker.transfer_outgoing_log


def incoming_log(worker):
    """The worker's deque of fetches: dicts with ``keys``, ``start``, ``stop``."""
    return worker.transfer_incoming_log


def scheduler_streams(scheduler, client_id: str | None = None) -> dict:
    """``{name: BatchedSend}``: the scheduler's streams to every worker (by address) and
    to the client ``client_id`` (as ``"client <id>"``). Each has ``interval`` (seconds
    it batches for)."""
    streams = dict(scheduler.stream_comms)
    if client_id in scheduler.client_comms:
        streams[f"client {client_id}"] = scheduler.client_comms[client_id]
    return streams


def worker_stream(worker):
    """The worker's ``BatchedSend`` to the scheduler."""
    return worker.batched_stream


def client_stream(client):
    """The client's ``BatchedSend`` to the scheduler, or None (not connected)."""
    return getattr(client, "scheduler_comm", None)


def add_handlers(worker, handlers: dict) -> None:
    """Serve ``{op: coroutine function}`` on the worker's server (other workers call
    them through :func:`pooled_call`, or write ``{"op": op, ..., "reply": False}``)."""
    worker.handlers.update(handlers)


def remove_handlers(worker, names) -> None:
    """Stop serving the ops ``names``."""
    for name in names:
        worker.handlers.pop(name, None)


async def pooled_connect(worker, address: str):
    """A comm to ``address`` taken from the worker's connection pool."""
    return await worker.rpc.connect(address)


def pooled_reuse(worker, address: str, comm) -> None:
    """Give a comm taken by :func:`pooled_connect` back to the pool."""
    worker.rpc.reuse(address, comm)


def pooled_call(worker, address: str):
    """An RPC proxy to the server at ``address`` (``await proxy.op(**kwargs)``)."""
    return worker.rpc(address)


def forget_topic(scheduler, topic: str) -> None:
    """Drop the events the scheduler keeps of ``topic`` (its subscribers had them)."""
    scheduler._broker.truncate(topic)


def forget_topics(scheduler, prefix: str) -> None:
    """Drop the events of every topic whose name starts with ``prefix``."""
    for topic in [t for t in scheduler._broker._topics if t.startswith(prefix)]:
        scheduler._broker.truncate(topic)


def run_message(fn, *args) -> dict:
    """The message a worker's (or nanny's) ``run`` handler takes: ``fn(*args)`` there
    (:func:`broadcast` sends it)."""
    from distributed.protocol.pickle import dumps

    return {"op": "run", "function": dumps(fn), "args": dumps(args), "kwargs": dumps({}),
            "wait": True}


async def broadcast(scheduler, msg: dict, workers=None, nanny: bool = False) -> dict:
    """Send ``msg`` from the scheduler to ``workers`` (default all; ``nanny``: to their
    nannies), errors ignored."""
    return await scheduler.broadcast(msg=msg, workers=workers, nanny=nanny,
                                     on_error="ignore")


async def register_worker_plugin(scheduler, plugin, name: str) -> None:
    """Install ``plugin`` on every worker, present and future, from the scheduler."""
    from distributed.protocol.pickle import dumps

    await scheduler.register_worker_plugin(None, dumps(plugin), name=name, idempotent=True)


#: Objects of distributed's private modules, as names of this module imported on first
#: use (the dashboard's pull in bokeh); :data:`INTERNALS` says what each is for.
LAZY = {
    "dumps": "distributed.protocol.pickle",
    "loads": "distributed.protocol.pickle",
    "log_errors": "distributed.utils",
    "get_ip": "distributed.utils",
    "import_term": "distributed.utils",
    "applications": "distributed.dashboard.scheduler",
    "template_variables": "distributed.dashboard.scheduler",
    "BokehApplication": "distributed.dashboard.core",
    "BOKEH_THEME": "distributed.dashboard.components.scheduler",
    "env": "distributed.dashboard.components.scheduler",
}


def __getattr__(name: str):
    if name in LAZY:
        import importlib

        return getattr(importlib.import_module(LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
