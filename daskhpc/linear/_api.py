"""The public functions: ``fit`` (Dask), ``fit_local``, ``serial_fit`` and ``plan``."""

from __future__ import annotations

import functools
import time

import numpy as np

from daskhpc._workflows import RunOptions
from daskhpc.comm import run_local_history
from daskhpc.io import is_collection
from daskhpc.report import compare_arrays, new_report, run_sections

from . import _collect
from ._job import linear_job
from ._plan import sections
from ._program import assemble, fingerprint, model, program, row, statics
from ._result import LinearResult
from ._serial import run_serial
from ._setup import prepare
from ._update import stop_rule


def plan(X, y=None, nparts: int = 4, *, test=None, epochs_shown: int = 1, command=None,
         **options) -> dict:
    """Communication of training (per epoch: steps, messages, bytes), no cluster.

    Without Top-k the plans are exact (from the batches' feature sets); with Top-k they
    are the dense bound.
    """
    s = prepare(X, y, nparts, test=test, **options)
    t0 = time.perf_counter()
    info = sections(s, command=command, epochs=range(min(epochs_shown, s.options.epochs)))
    info["timing"]["plan_s"] = round(time.perf_counter() - t0, 6)
    return new_report("linear", command=info.pop("command"), **info)


def fit_local(X, y=None, nparts: int = 4, *, test=None, check_serial: bool = False,
              command=None, **options) -> LinearResult:
    """Train with the Program run in this process (``run_local``).

    Parameters
    ----------
    X, y
        Training data: a LIBSVM path or SparseInput (labels included), or a matrix and
        labels (two values: the larger is the positive class; three or more: one-vs-rest,
        one model per class, the K gradients allreduced in one call).
    nparts : int
        P: each part owns a seeded balanced share of the rows.
    test : path, SparseInput or (X_test, y_test), optional
        Test data for the per-epoch test loss and accuracy.
    check_serial : bool
        Also run :func:`serial_fit` and report the largest difference of w.
    **options
        ``loss`` ("log" or "hinge"), ``batch`` (B per part, or "auto"), ``epochs`` (5),
        ``learning_rate`` ("optimal", "constant", "invscaling"), ``lr``, ``power_t``,
        ``reg`` (alpha), ``penalty`` ("l2", "l1", "elasticnet"), ``l1_ratio``,
        ``class_weight`` (None, "balanced" or a dict label -> weight), ``topk`` (None, k
        or "approx" with ``k``), ``error_feedback`` (True), ``allreduce`` ("auto" or an
        algorithm), ``group``, ``alpha``, ``beta``, ``fit_intercept``, ``seed``.

    Examples
    --------
    >>> from daskhpc import datasets
    >>> r = fit_local(datasets.libsvm(), nparts=4, batch=512, epochs=1)
    >>> r.history[0]["train_accuracy"] > 0.8
    True

    References
    ----------
    C. Renggli, "Efficient Sparse AllReduce For Scalable Machine Learning", ETH Zurich,
    2017: Algorithms 1-2, sections 2.2 and 2.4, chapter 5.3.
    """
    s = prepare(X, y, nparts, test=test, **options)
    t0 = time.perf_counter()
    prog = program(s)
    s.timing["program_s"] = time.perf_counter() - t0
    finals, history = run_local_history(prog, statics(s), lambda u, rep: row(s, u, rep),
                                        stop=stop_rule(s.options))
    times = [h["time_s"] for h in history]
    w = assemble(s, finals)
    info = sections(s, history, command=command)
    info["timing"]["run_s"] = float(sum(times))
    info["steps"]["total"] = prog.nsteps
    if check_serial:
        ref = model(s, run_serial(s, epochs=len(history))["w"])
        diff = float(np.max(np.abs(ref - w)))
        info["serial_check"] = {"done": True, "identical": bool(np.array_equal(ref, w)),
                                "max_abs_diff": diff,
                                "max_rel_diff": diff / max(float(np.max(np.abs(ref))), 1e-300)}
    return LinearResult(w, s.data.classes, fit_intercept=s.data.fit_intercept,
                        history=history, info=info)


def serial_fit(X, y=None, nparts: int = 4, *, test=None, command=None,
               **options) -> LinearResult:
    """Plain serial SGD with the same batches (no streams, no allreduce)."""
    s = prepare(X, y, nparts, test=test, **options)
    t0 = time.perf_counter()
    out = run_serial(s)
    hist = [{**h, "time_s": 0.0} for h in out["history"]]
    info = {"command": command, "input": dict(s.data.source), "parts": s.nparts,
            "loss": s.options.loss, "classes": s.data.classes.tolist(), "models": s.K,
            "learning_rate": s.options.learning_rate, "penalty": s.options.penalty,
            "topk": s.options.topk,
            "options": {k: getattr(s.options, k) for k in s.options.__dataclass_fields__},
            "timing": {"run_s": time.perf_counter() - t0}}
    if hist:
        info["quality"] = {k: v for k, v in hist[-1].items() if k not in ("epoch", "time_s")}
    return LinearResult(model(s, out["w"]), s.data.classes, fit_intercept=s.data.fit_intercept,
                        history=hist, info=info)


def fit(X, y=None, nparts: int | None = None, *, test=None, in_loop: bool = True,
        run: RunOptions | None = None, **options) -> LinearResult:
    """Train a linear classifier with data-parallel SGD on a Dask cluster.

    Parameters
    ----------
    X, y, test, **options
        As :func:`~daskhpc.linear.fit_local`; X may also be a Dask Array of scipy.sparse
        (or numpy) row chunks and y a Dask Array: X's values then never pass through the
        client (docs/collections.md).
    nparts : int, optional
        P (default: one part per worker); part p runs on worker ``p mod W``.
    in_loop : bool
        Run the steps in the workers' event loops (they are short).
    run : RunOptions, optional
        :class:`daskhpc.runtime.RunOptions`, or its fields as keywords; ``check_serial``
        compares w with :func:`serial_fit` (rtol 1e-12: the gradient sums are reassociated).

    Returns
    -------
    LinearResult

    References
    ----------
    C. Renggli, "Efficient Sparse AllReduce For Scalable Machine Learning", ETH Zurich,
    2017: Algorithms 1-2, sections 2.2 and 2.4.
    """
    from daskhpc.runtime import connected

    run, options = RunOptions.split(run, options)
    with connected(run) as client:
        return run.finish(_fit(client, run, X, y, nparts, test, in_loop, options))


def _fit(client, run, X, y, nparts, test, in_loop, options):
    from daskhpc.runtime import exchange_mode, run_job, worker_addresses

    if nparts is None:
        nparts = len(worker_addresses(client))
    if run.network is not None:       # the allreduce choice on this network (calibrate: measured)
        from daskhpc.runtime import network_for

        options = network_for(run.network, client, exchange_mode(run.exchange)).fill(options)
    nz = None
    if is_collection(X) or is_collection(y) or _collect.test_collection(test):
        s, nz, y = _collect.prepare_collection(client, X, y, nparts, test, options)
    else:
        s = prepare(X, y, nparts, test=test, **options)
    exchange = exchange_mode(run.exchange)
    job = linear_job(s, functools.partial(_fingerprint, s, nz), with_statics=nz is None,
                     in_loop=in_loop, exchange=exchange)
    if nz is None:
        out = run_job(client, job, **run.frame())
    else:
        out, s_full = _run_collection(client, s, job, nz, run, y, test, options)
    w = out.value
    info = run_sections(sections(s, out.history, command=run.command), out, s.nparts)
    if run.check_serial:
        ser = run_serial(s if nz is None else s_full, epochs=len(out.history))
        check = compare_arrays([(w, model(s, ser["w"]))], rtol=1e-12)
        check["reference"] = "plain serial SGD (dense gradients summed in part order)"
        check["history_identical"] = all(
            a.get("test_accuracy") == b.get("test_accuracy")
            for a, b in zip(ser["history"], out.history))
        info["serial_check"] = check
    return LinearResult(w, s.data.classes, fit_intercept=s.data.fit_intercept,
                        history=out.history, info=info)


def _fingerprint(s, nz) -> dict:
    """The run's checkpoint fingerprint, with the tokens of the Dask collections it reads."""
    fp = fingerprint(s)
    if nz is not None:
        fp["collection"] = nz.token
        if getattr(s, "test_set", None) is not None:
            fp["test_collection"] = s.test_set.nz.token
    return fp


def _run_collection(client, s, job, nz, run, y, test, options):
    """``fit`` on a Dask Array (``_collect``); with ``check_serial`` also the full setup."""
    from daskhpc.runtime import run_on_parts

    sources = [nz] + [t for t in [getattr(s, "test_set", None)] if t is not None]
    try:
        full = _collect.full_setup(client, s, nz, y, test, options) if run.check_serial else None
        return run_on_parts(client, job, lambda pl: _collect.part_statics(client, s, nz, pl),
                            rebuild=_collect.rebuilder(client, s, nz), release=sources,
                            **run.frame()), full
    finally:
        for source in sources:
            source.release()
