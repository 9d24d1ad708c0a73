"""Measure the alpha-beta cost of one worker-to-worker message on this cluster.

The comm layer prices a plan with the latency-bandwidth model
``t(m) = alpha + beta * m`` for a message of ``m`` bytes. ``calibrate`` measures
it: a chain of pinned tasks alternates between two workers (ping-pong), each
task producing an array that the next one, on the other worker, consumes. The
chain runs one transfer at a time, so nothing competes for the link.

Each transfer is timed by the receiving worker: the ``start``/``stop`` of its
``transfer_incoming_log`` entry span the request, the sender's serialisation,
the wire and the deserialisation, i.e. the time a dependent task waits for its
input. Client round trips and task run times do not enter.

The receivers' ``transfer_incoming_log`` is read through :mod:`daskhpc._dask_internals`
(its logged ``duration`` is clamped to at least 1 ms, so ``stop - start`` is used), the
bytes on the wire through :class:`TransferLedger`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from scipy.optimize import nnls

from daskhpc.runtime._connect import worker_addresses
from daskhpc.runtime._graph import submit_pinned
from daskhpc.runtime._ledger import TransferLedger

if TYPE_CHECKING:
    from distributed import Client

__all__ = ["calibrate", "calibrate_exchange", "calibrate_ring"]


def calibrate(
    client: Client,
    sizes: Sequence[int] = (8, 1 << 12, 1 << 16, 1 << 20, 1 << 22),
    repeats: int = 5,
    *,
    workers: Sequence[str] | None = None,
) -> dict:
    """Fit ``t = alpha + beta * bytes`` to timed transfers between two workers.

    Parameters
    ----------
    client : distributed.Client
        A synchronous client with at least two workers.
    sizes : sequence of int
        Message payloads in bytes (``uint8`` arrays of exactly this size).
    repeats : int
        Timed transfers per size; one untimed warm-up transfer precedes them.
    workers : pair of str, optional
        The two workers to use; default the first two in stable order.

    Returns
    -------
    dict
        ``alpha`` (seconds per message), ``beta`` (seconds per byte) and
        ``samples``: per size, ``bytes``, ``wire_bytes`` (bytes on the wire,
        with framing), ``times`` (seconds, each transfer) and ``median``.

    Notes
    -----
    The fit is least squares on the per-size minima (the fastest repeat: a loaded
    machine only adds time), with residuals relative to the time (rows scaled by
    ``1 / t``) so that the 8-byte messages, which pin down alpha, weigh as much as
    the 4 MiB ones, which pin down beta; it is solved with non-negative least
    squares, as a negative latency or bandwidth cost has no meaning. Where that
    leaves beta at 0 (times that do not grow with size: noise above the bandwidth
    term), beta is the slope from the smallest to the largest message, else the
    largest message's seconds per byte, never 0. Where the fit prices the largest message
    more than 10 % below its time (a link whose burst allowance carries small messages
    faster than its rate: ``tc tbf``, a switch buffer), beta is the slope between the
    two largest sizes and alpha the median of the rest's time left over. Sizes far below
    ~64 KiB are latency-bound and sizes far above ~1 MiB bandwidth-bound: give some of
    each.

    Examples
    --------
    >>> fit = calibrate(client)                                    # doctest: +SKIP
    >>> fit["alpha"], fit["beta"]                                  # doctest: +SKIP
    (0.0009, 3.5e-10)
    """
    if workers is None:
        workers = worker_addresses(client)
    if len(workers) < 2:
        raise ValueError(f"calibrate needs two workers, the cluster has {len(workers)}")
    if repeats < 1:
        raise ValueError("repeats must be >= 1")
    a, b = workers[0], workers[1]

    # Output j of the chain has size out_sizes[j]; task j+1, on the other
    # worker, fetches it. The first transfer of each size is a warm-up.
    out_sizes = [int(s) for s in sizes for _ in range(repeats + 1)]
    name = f"daskhpc-calibrate-{uuid.uuid4().hex[:8]}"
    keys = [f"{name}-{j}" for j in range(len(out_sizes) + 1)]
    tasks = {k: (_payload, keys[j - 1] if j else None,
                 out_sizes[j] if j < len(out_sizes) else 0) for j, k in enumerate(keys)}
    where = {k: (a, b)[j % 2] for j, k in enumerate(keys)}
    with TransferLedger(client) as ledger:
        [last] = submit_pinned(client, tasks, where, [keys[-1]])
        last.result()
        del last

    times = _received(client, set(keys[:-1]))
    wire = {k: e["bytes"] for e in ledger.entries for k in e["keys"]}
    samples = []
    for i, size in enumerate(sizes):
        timed = keys[i * (repeats + 1) + 1 : (i + 1) * (repeats + 1)]
        t = [times[k] for k in timed]
        samples.append(
            {
                "bytes": int(size),
                "wire_bytes": int(np.median([wire[k] for k in timed])),
                "times": t,
                "median": float(np.median(t)),
            }
        )
    # the fastest of the repeats: load on the machine only ever adds time
    alpha, beta = _fit([s["bytes"] for s in samples], [min(s["times"]) for s in samples])
    return {"alpha": alpha, "beta": beta, "samples": samples}


def _payload(previous: np.ndarray | None, nbytes: int) -> np.ndarray:
    # A fresh array each time: the consumer must receive a new value, and the
    # value must not depend on the input, or the sizes would drift.
    return np.ones(nbytes, dtype=np.uint8)


def _fit(nbytes: Sequence[int], seconds: Sequence[float]) -> tuple[float, float]:
    """(alpha, beta) with alpha >= 0 and beta > 0; see :func:`calibrate`'s Notes."""
    m = np.asarray(nbytes, dtype=float)
    t = np.asarray(seconds, dtype=float)
    # Minimise sum(((alpha + beta*m - t) / t)**2) with alpha, beta >= 0.
    coef, _ = nnls(np.column_stack([1.0 / t, m / t]), np.ones_like(t))
    alpha, beta = float(coef[0]), float(coef[1])
    big2 = np.argsort(m)[-2:]
    if m.size >= 3 and m[big2[1]] > m[big2[0]]:
        # A link with a burst allowance (a token bucket, a switch's buffer) carries the
        # messages that fit in it faster than its rate; the fit over all sizes then
        # prices a large message below its time. Where it misses the largest by more
        # than 10 %, beta is the slope of the two largest (bandwidth-bound) sizes and
        # alpha the median of what the others leave over.
        (i, j), fit_big = big2, alpha + beta * m[big2[1]]
        slope = (t[j] - t[i]) / (m[j] - m[i])
        if fit_big < 0.9 * t[j] and slope > beta:
            rest = np.delete(np.arange(m.size), big2)
            return float(max(0.0, np.median(t[rest] - slope * m[rest]))), float(slope)
    if beta > 0 or m.max() <= 0:
        return alpha, beta
    # The bound beta >= 0 is active: the times did not grow with the size (noise larger
    # than the bandwidth term: a loaded machine, or scheduling costs of ms). A bandwidth
    # cost of 0 would make every plan's bytes free; take the slope between the smallest
    # and the largest message, or, if that is not positive either, the largest message's
    # time per byte (an upper bound: all of its time counted as bandwidth).
    big, small = int(np.argmax(m)), int(np.argmin(m))
    slope = (t[big] - t[small]) / (m[big] - m[small]) if m[big] > m[small] else 0.0
    beta = float(slope) if slope > 0 else float(t[big] / m[big])
    alpha = float(max(0.0, t[small] - beta * m[small]))
    return alpha, beta


def _received(client: Client, keys: set) -> dict:
    """Seconds each of ``keys`` took to arrive, from the receivers' logs."""

    def incoming(keys, dask_worker):
        from daskhpc._dask_internals import incoming_log

        return [
            (key, e["stop"] - e["start"])
            for e in incoming_log(dask_worker)
            for key in e["keys"]
            if key in keys
        ]

    return {k: t for found in client.run(incoming, keys).values() for k, t in found}


def calibrate_exchange(client: Client, exchange: str = "direct",
                       sizes: Sequence[int] = (8, 1 << 12, 1 << 16, 1 << 20, 1 << 22),
                       steps: int = 40, workers: Sequence[str] | None = None) -> dict:
    """Fit ``t = alpha + beta * bytes`` to the messages of a Program in ``exchange`` mode.

    A ping-pong :func:`~daskhpc.runtime._pingpong.pingpong_program` between two workers
    (one message per step, each waiting for the previous): per size, one unit of ``steps``
    steps, timed by the workers; its time over ``steps + 1`` is what one message costs a
    Program (scheduling included in the graph mode, none in the direct mode), a first unit
    warms up. This is the alpha and beta the workflows' plans should be priced with.

    Returns
    -------
    dict
        ``alpha``, ``beta``, ``exchange``, ``samples`` (``bytes``, ``seconds`` per message).
    """
    import functools

    from daskhpc.runtime._job import Job
    from daskhpc.runtime._phases import run_job
    from daskhpc.runtime._pingpong import pingpong_program, pingpong_row
    from daskhpc.runtime._placement import Placement

    workers = list(workers or worker_addresses(client))[:2]
    if len(workers) < 2:
        raise ValueError(f"calibrate needs two workers, the cluster has {len(workers)}")
    samples = []
    for size in sizes:
        job = Job("pingpong", 2, 2, row=pingpong_row, statics=[int(size)] * 2,
                  program=functools.partial(pingpong_program, int(steps), int(size), 2),
                  exchange=exchange, in_loop=True)
        out = run_job(client, job, placement=Placement(2, workers), progress_bar=False,
                      announce=False)
        samples.append({"bytes": int(size),
                        "seconds": out.history[-1]["time_s"] / (steps + 1)})
    alpha, beta = _fit([x["bytes"] for x in samples], [x["seconds"] for x in samples])
    return {"alpha": alpha, "beta": beta, "exchange": exchange, "samples": samples}


def calibrate_ring(client: Client, exchange: str = "direct", steps: int = 40,
                   workers: Sequence[str] | None = None, nbytes: int = 8) -> float:
    """Seconds of one step of a Program over every worker in which each part sends
    ``nbytes`` to the next (a ring, one part a worker; a unit of ``steps`` steps after a
    warm-up unit). With 8 bytes: what a phase of a workflow costs however little it
    computes and sends (the exchange's barrier, the step's scheduling, Python); with
    MiBs: what a byte costs as every worker sends and receives at once."""
    import functools

    from daskhpc.runtime._job import Job
    from daskhpc.runtime._phases import run_job
    from daskhpc.runtime._pingpong import ring_program, pingpong_row
    from daskhpc.runtime._placement import Placement

    workers = list(workers or worker_addresses(client))
    K = len(workers)
    job = Job("ring", K, 2, row=pingpong_row, statics=[int(nbytes)] * K,
              program=functools.partial(ring_program, int(steps), K, 2, int(nbytes)),
              exchange=exchange, in_loop=True)
    out = run_job(client, job, placement=Placement(K, workers), progress_bar=False,
                  announce=False)
    return out.history[-1]["time_s"] / (steps + 1)
