"""Measure the alpha-beta cost ``t(m) = alpha + beta * m`` of a worker-to-worker message:
a ping-pong chain of pinned tasks, each transfer timed by the receiver's
``transfer_incoming_log`` (``stop - start``: its ``duration`` is clamped to 1 ms).
"""

from __future__ import annotations

import functools
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
    sizes, repeats : sequence of int, int
        Payloads in bytes (``uint8`` arrays), and timed transfers per size after a warm-up.
    workers : pair of str, optional
        The two workers to use; default the first two in stable order.

    Returns
    -------
    dict
        ``alpha`` (seconds per message), ``beta`` (seconds per byte) and ``samples``: per
        size, ``bytes``, ``wire_bytes`` (with framing), ``times`` and ``median``.

    Notes
    -----
    Non-negative least squares on the per-size minima, with residuals relative to the time,
    so the 8-byte messages (alpha) weigh as much as the 4 MiB ones (beta). Where beta comes
    out 0 it is the slope from the smallest to the largest message, else the largest one's
    seconds per byte. Where the fit prices the largest message over 10 % below its time (a
    link with a burst allowance: ``tc tbf``, a switch buffer) beta is the slope between the
    two largest sizes. Give sizes both below ~64 KiB and above ~1 MiB.

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

    # task j+1, on the other worker, fetches output j; each size's first is a warm-up
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
    # a fresh array, not depending on the input: a new value of the exact size
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
        # a burst allowance carries small messages faster than the link's rate: the
        # slope of the two largest sizes, alpha the median of what the others leave
        (i, j), fit_big = big2, alpha + beta * m[big2[1]]
        slope = (t[j] - t[i]) / (m[j] - m[i])
        if fit_big < 0.9 * t[j] and slope > beta:
            rest = np.delete(np.arange(m.size), big2)
            return float(max(0.0, np.median(t[rest] - slope * m[rest]))), float(slope)
    if beta > 0 or m.max() <= 0:
        return alpha, beta
    # the times did not grow with the size (noise): a beta of 0 would make every plan's
    # bytes free
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

    A ping-pong Program between two workers, one message a step: per size, a unit of
    ``steps`` steps after a warm-up unit, over ``steps + 1``. What the workflows' plans are
    priced with.

    Returns
    -------
    dict
        ``alpha``, ``beta``, ``exchange``, ``samples`` (``bytes``, ``seconds`` per message).
    """
    from daskhpc.runtime._pingpong import pingpong_program

    workers = list(workers or worker_addresses(client))[:2]
    if len(workers) < 2:
        raise ValueError(f"calibrate needs two workers, the cluster has {len(workers)}")
    samples = [{"bytes": int(size), "seconds": _step_seconds(
        client, "pingpong", workers, size, exchange, steps,
        functools.partial(pingpong_program, int(steps), int(size), 2))} for size in sizes]
    alpha, beta = _fit([x["bytes"] for x in samples], [x["seconds"] for x in samples])
    return {"alpha": alpha, "beta": beta, "exchange": exchange, "samples": samples}


def calibrate_ring(client: Client, exchange: str = "direct", steps: int = 40,
                   workers: Sequence[str] | None = None, nbytes: int = 8,
                   fan: int = 1) -> float:
    """Seconds of a step of a Program in which each worker's part sends ``nbytes`` to the
    next (a ring; to each of the next ``fan``). With 8 bytes: a phase's floor (the barrier,
    scheduling, Python); with MiBs: a byte's cost with every worker sending and receiving
    at once (with ``fan`` = workers - 1: all to all)."""
    from daskhpc.runtime._pingpong import ring_program

    workers = list(workers or worker_addresses(client))
    return _step_seconds(client, "ring", workers, nbytes, exchange, steps,
                         functools.partial(ring_program, int(steps), len(workers), 2,
                                           int(nbytes), fan=int(fan)))


def _step_seconds(client, name: str, workers, nbytes: int, exchange: str, steps: int,
                  program) -> float:
    """Seconds a step of ``program``'s second unit (of ``steps`` steps) takes, one part
    a worker."""
    from daskhpc.runtime._job import Job
    from daskhpc.runtime._phases import run_job
    from daskhpc.runtime._pingpong import pingpong_row
    from daskhpc.runtime._placement import Placement

    K = len(workers)
    job = Job(name, K, 2, row=pingpong_row, statics=[int(nbytes)] * K, program=program,
              exchange=exchange, in_loop=True)
    out = run_job(client, job, placement=Placement(K, workers), progress_bar=False,
                  announce=False)
    return out.history[-1]["time_s"] / (steps + 1)
