"""``fit(X, y, ..., client=)``: data-parallel SGD on a Dask cluster, through the workflow
frame (:func:`daskhpc.runtime.run_job`): the Program of ``_program`` (one allreduce call
per iteration, epochs as units), checkpoints after every epoch, lost workers recovered,
bytes between workers measured next to the plan.

Examples
--------
>>> import daskhpc as dh
>>> from daskhpc import datasets
>>> client = dh.connect(n_workers=4)                                       # doctest: +SKIP
>>> r = fit(datasets.libsvm(), nparts=4, batch=64, epochs=3, client=client,
...         test=datasets.libsvm("test"))                                  # doctest: +SKIP
>>> r.history[-1]["test_accuracy"], r.report()["measured"]                 # doctest: +SKIP
"""

from __future__ import annotations

import functools
from dataclasses import asdict

import numpy as np

from ._api import sections
from ._program import assemble, program, row, statics
from ._result import LinearResult
from ._setup import Setup, prepare

__all__ = ["fit", "fingerprint", "warm_up"]


def warm_up():
    """Load the numba kernels on a worker before anything is timed."""
    from daskhpc.allreduce import allreduce_local

    from ._kernels import batch_gradient, coefficients, losses, margins

    ip, ix, d = np.array([0, 1]), np.array([0], np.int32), np.array([1.0])
    rows = np.array([0])
    m = margins(ip, ix, d, rows, np.ones(1))
    coefficients(m, np.ones(1), 0)
    losses(m, np.ones(1), 0)
    batch_gradient(ip, ix, d, rows, np.ones(1))
    allreduce_local([np.array([1.0, 0.0]), np.array([0.0, 1.0])], algorithm="ssar_rec_dbl")


def fingerprint(s: Setup) -> dict:
    """What a checkpoint must agree on to be continued: data, parts, the options (but the
    number of epochs), the algorithms of the first epoch's calls."""
    from daskhpc.runtime import array_digest

    X = s.data.X
    digest = array_digest(X.indptr, X.indices, X.data, s.data.y)
    opts = asdict(s.options)
    opts.pop("epochs")          # a resumed run may go on for more epochs
    for k in ("alpha", "beta"):
        opts.pop(k)             # they only choose algorithms: the calls' plans say which
    return {"input": {k: v for k, v in s.data.source.items() if k != "path"},
            "data": digest, "parts": s.nparts, "options": opts,
            "algorithms": sorted({a.name for a, _, _ in s.calls(0)})}


def fit(X, y=None, nparts: int = 4, *, test=None, client=None, check_serial: bool = False,
        checkpoint=None, resume: bool = False, max_restarts: int = 3, callback=None,
        progress: bool | None = None, in_loop: bool = True, exchange: str | None = None,
        command=None, **options) -> LinearResult:
    """Train a linear classifier with data-parallel SGD on a Dask cluster.

    Parameters
    ----------
    X, y, nparts, test, **options
        As :func:`~daskhpc.linear.fit_local` (``loss``, ``batch``, ``epochs``, ``lr``,
        ``lr_decay``, ``reg``, ``topk``, ``k``, ``error_feedback``, ``allreduce``,
        ``group``, ``alpha``, ``beta``, ``fit_intercept``, ``seed``).
    client : distributed.Client, optional
        Default: the current client. Part p runs on worker ``p mod W``.
    check_serial : bool
        Also train with the plain serial reference (:func:`serial_fit`: dense vectors,
        the parts' gradients added in part order) and compare w: equal up to the
        reassociation of the gradient sums (``rtol`` 1e-12; bit for bit when the
        gradients are integers, as hinge loss on binary features).
    checkpoint : path, optional
        Directory every worker sees: the parts' w (and Top-k residuals) after every
        epoch; a lost worker then costs only the current epoch.
    resume : bool
        Continue the run recorded in ``checkpoint`` (same data and options).
    max_restarts : int
        Lost workers survived.
    callback : callable, optional
        ``callback(row)`` after every epoch.
    in_loop : bool
        Run the steps in the workers' event loops (they are short).
    exchange : {"direct", "graph"}, optional
        How the Program's messages travel (default ``daskhpc.runtime.exchange``):
        ``direct`` pushes them worker to worker, one task per worker and epoch;
        ``graph`` makes every step a task group. Bit-identical results.

    Returns
    -------
    LinearResult

    References
    ----------
    C. Renggli, "Efficient Sparse AllReduce For Scalable Machine Learning", ETH Zurich,
    2017: Algorithms 1-2, sections 2.2 and 2.4.
    """
    from daskhpc.runtime import Job, exchange_mode, run_job

    if client is None:
        from distributed import get_client

        client = get_client()
    s = prepare(X, y, nparts, test=test, **options)
    exchange = exchange_mode(exchange)
    job = Job("linear", s.nparts, s.options.epochs, row=functools.partial(row, s),
              fingerprint=fingerprint(s), program=functools.partial(program, s),
              statics=statics(s), assemble=functools.partial(assemble, s), warm_up=warm_up,
              unit_name="epochs", in_loop=in_loop, exchange=exchange)
    out = run_job(client, job, checkpoint=checkpoint, resume=resume,
                  max_restarts=max_restarts, callback=callback, progress_bar=progress)
    w = out.value
    info = sections(s, out.history, command=command)
    info["measured"] = dict(out.measured)
    info["timing"].update(run_s=out.timing["run_s"],
                          per_iteration_s=out.timing["per_iteration_s"],
                          setup_s=out.timing.get("setup_s"))
    info["recovery"] = out.recovery
    info["exchange"] = exchange
    info["placement"] = {str(p): out.placement.worker(p) for p in range(s.nparts)}
    if check_serial:
        from daskhpc.report import compare_arrays

        from ._serial import run_serial

        ser = run_serial(s)
        check = compare_arrays([(w, ser["w"])], rtol=1e-12)
        check["reference"] = "plain serial SGD (dense gradients summed in part order)"
        check["history_identical"] = all(
            a.get("test_accuracy") == b.get("test_accuracy")
            for a, b in zip(ser["history"], out.history))
        info["serial_check"] = check
    return LinearResult(w, s.data.classes, fit_intercept=s.data.fit_intercept,
                        history=out.history, info=info)
