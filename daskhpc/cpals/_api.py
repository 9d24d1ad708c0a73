"""The public functions: ``fit`` (distributed, on the workflow frame), ``serial_fit`` (the
plain serial reference) and ``plan`` (no cluster)."""

from __future__ import annotations

import time
from dataclasses import replace

from daskhpc._workflows import RunOptions, checked_options
from daskhpc.comm import AllreduceSchedule, network_model, plan_network
from daskhpc.errors import InputError
from daskhpc.io import is_collection
from daskhpc.report import new_report, run_sections

from ._als import converged
from ._checkpoint import DISTRIBUTION, load_distribution
from ._collect import full_tensor, part_statics, read_tensor, rebuilder
from ._init import given_factors, svd_factors
from ._job import cpals_job, measured_section, serial_check
from ._layouts import iteration_cost, layout_name
from ._parts import iter_statics
from ._plan import mode_table, partition_section
from ._result import CPResult
from ._serial import run_serial
from ._setup import Options, Setup, choose, prepare
from ._data import as_tensor


def fit(X, rank: int = 10, nparts: int | None = None, *, grain: str = "fine",
        partition: str = "hp", iters: int = 20, tol: float = 1e-4, seed: int = 0,
        partitioner: str = "auto", epsilon: float = 0.03, reg: float = 0.0,
        nonnegative: bool = False, init="random", partition_file=None,
        in_loop: bool | None = None, columns=None, shape=None,
        run: RunOptions | None = None, **run_options) -> CPResult:
    """CP-ALS on a Dask cluster: the tensor's parts on their workers, Algorithm 3 (coarse
    grain) or 4 (fine grain) per mode, factor rows moved as the plan says.

    Parameters
    ----------
    X : path, sparse.COO, SparseInput, (coords, values, shape), or Dask collection
        A sparse tensor of order >= 3. A Dask DataFrame of nonzeros (0-based ids of every
        mode, then the value) or a Dask Array of ``sparse.COO`` chunks is read on the
        workers: only its ids reach the client (docs/collections.md).
    rank : int
        R, the number of rank-one components.
    nparts : int, optional
        K, the number of parts (default: one per worker), dealt round robin.
    grain, partition : str
        ``fine`` (``hp`` or ``random``) or ``coarse`` (``hp`` or ``block``).
    iters, tol : int, float
        At most ``iters`` iterations; with ``tol > 0`` stop once the fit changes by less
        than ``tol``.
    seed : int
        Initial factors (a function of seed, mode, row, column) and random partitions.
    partitioner, epsilon, partition_file
        As for :func:`plan`.
    reg : float
        L2 regularisation (SPLATT's ``--reg``): each solve is ``U_n = M (H + reg I)^+``.
    nonnegative : bool
        Projected ALS: each solve's negative entries set to 0.
    init : {"random", "svd"} or list of arrays
        Initial factors: seeded random rows, the R leading left singular vectors of each
        unfolding, or N given arrays ``I_n x R``.
    columns, shape : optional
        A DataFrame's id and value columns, and the tensor's shape (default: the
        largest ids + 1).
    in_loop : bool, optional
        Run steps in the workers' event loops (default: when they are short).
    run : RunOptions, optional
        :class:`daskhpc.runtime.RunOptions`, or its fields as keywords; ``check_serial``
        compares with the partition-aware reference (bit for bit) and plain CP-ALS (1e-9).

    Returns
    -------
    CPResult
        ``weights``, ``factors``, the per-iteration history and the full report.

    References
    ----------
    O. Kaya and B. Ucar, "Scalable sparse tensor decompositions in distributed memory
    systems", Inria RR-8722, 2015 (Algorithms 3 and 4).

    Examples
    --------
    >>> import daskhpc as dh
    >>> client = dh.connect(n_workers=2)                              # doctest: +SKIP
    >>> res = dh.cpals.fit("umls.tns", 10, 4, client=client, tol=0)  # doctest: +SKIP
    >>> res.fit[-1], res.report()["measured"]["inter_worker_bytes"]   # doctest: +SKIP
    """
    from daskhpc.runtime import (CheckpointDir, connected, network_for, placed_hosts,
                                 worker_addresses)

    run = RunOptions.of(run, **run_options)
    checkpoint, resume = run.checkpoint, run.resume
    with connected(run) as client:
        if nparts is None:
            nparts = len(worker_addresses(client))
        options = dict(rank=rank, grain=grain, partition=partition, iters=iters, tol=tol,
                       seed=seed, partitioner=partitioner, epsilon=epsilon, reg=reg,
                       nonnegative=nonnegative, init=init)
        source = None
        if is_collection(X):
            checked_options(Options, options, "CP-ALS")   # options first: cost nothing
            if isinstance(init, str) and init == "svd":
                raise InputError("init='svd' needs the tensor's values on the client; with "
                                 "a Dask collection use init='random' or given factors")
            X, nz, can = read_tensor(client, X, columns=columns, shape=shape,
                                     keep_pins=run.check_serial)
            source = (nz, can)
        elif columns is not None or shape is not None:
            raise InputError("columns= and shape= are for a Dask collection input")
        saved = CheckpointDir.saved(checkpoint, DISTRIBUTION) if checkpoint is not None \
            and resume else None
        layouts = None
        try:
            if saved is not None:
                checked_options(Options, options, "CP-ALS")
                X = as_tensor(X)
                d = load_distribution(saved, X, nparts)
                s = prepare(X, nparts, distribution=d, **options)
            else:
                s, layouts = _chosen(client, run, X, nparts, partition_file, options)
            job = cpals_job(s, in_loop=in_loop, exchange=run.exchange, statics=False)
            if source is None:
                out = _run_scattered(client, s, job, run)
            else:
                out, full = _run_collection(client, s, job, source, run)
                s = s if full is None else replace(s, tensor=full)
        finally:
            if source is not None:
                source[0].release()
        lam, factors = out.value
        model = network_for(run.network, client, job.exchange)
        info = run_sections(sections(s, out.history, command=run.command), out, s.K,
                            cost=iteration_cost(s, model, *placed_hosts(client, out.placement))
                            .section(model), layouts=layouts)
        # graph mode: the messages of the last step that ran are fetched only by the next
        # step, which a run stopped by the tol rule never submits (direct mode pushes them)
        info["measured"].update(measured_section(
            s, out, job.exchange == "graph" and job.stop is not None
            and len(out.history) < s.options.iters))
        info["execution"]["stop_rule"] = job.stop is not None
        if run.check_serial:
            info["serial_check"] = serial_check(s, lam, factors, out.history)
        return run.finish(CPResult(lam, factors, out.history, info))


def _chosen(client, run, X, nparts, partition_file, options):
    """``(setup, layouts)``: the asked layout, or ``auto``'s fastest (and all)."""
    from daskhpc.runtime import (Placement, exchange_mode, network_for, placed_hosts,
                                 worker_addresses)

    if options.get("partition") != "auto":
        return prepare(X, nparts, partition_file=partition_file, **options), None
    model = network_for(run.network, client, exchange_mode(run.exchange), auto=True)
    owner, hosts = placed_hosts(client, Placement(nparts, worker_addresses(client)))
    _, s, rows = choose(X, nparts, model, owner=owner, hosts=hosts,
                        partition_file=partition_file, **options)
    return s, rows


def _run_scattered(client, s, job, run):
    """``fit`` on a tensor in memory: each part's statics made and sent in turn."""
    from daskhpc.runtime import run_on_parts

    return run_on_parts(client, job, lambda placement: _scatter_statics(client, s, placement),
                        rebuild=lambda parts, placement: _scatter_statics(client, s,
                                                                          placement, parts),
                        **run.frame())


def _scatter_statics(client, s, placement, parts=None) -> dict:
    """``{part: Future}``: the statics of ``parts`` (default all), made and sent in turn."""
    out = {}
    for p, st in iter_statics(s, parts):
        out[p] = client.scatter(st, workers=[placement.worker(p)], broadcast=False,
                                hash=False)
        del st
    return out


def _run_collection(client, s, job, source, run):
    """``fit`` on a collection: the parts' statics built on their workers."""
    from daskhpc.runtime import run_on_parts

    nz, can = source
    full = full_tensor(client, nz, can, s.tensor) if run.check_serial else None

    def build(placement):
        futs, s.tensor.normx2 = part_statics(client, s, nz, can, placement)
        if full is not None:
            full.normx2 = s.tensor.normx2  # the references sum ||X||^2 as the run did
        return futs

    return run_on_parts(client, job, build, rebuild=rebuilder(client, s, nz, can),
                        release=[nz], **run.frame()), full


def serial_fit(data, rank: int = 10, *, iters: int = 20, tol: float = 1e-4, seed: int = 0,
               reg: float = 0.0, nonnegative: bool = False, init="random", callback=None,
               command=None) -> CPResult:
    """CP-ALS in one process on the whole tensor: the plain serial reference.

    ``data`` (a tensor of order >= 3) and the options are :func:`fit`'s (``tol=0``: run
    every iteration); ``callback(row)`` is called after every iteration.

    References
    ----------
    O. Kaya and B. Ucar, "Scalable sparse tensor decompositions in distributed memory
    systems", Inria RR-8722, 2015 (Algorithms 1 and 2); B. W. Bader, T. G. Kolda et al.,
    Tensor Toolbox (normalisation, fit and stop rule of ``cp_als``).

    Examples
    --------
    >>> res = serial_fit(([[0], [1], [2]], [2.0], (3, 3, 3)), 3, iters=3, tol=0)
    >>> res.fit[-1] > 1 - 1e-7                       # a one-nonzero tensor: exact
    True
    """
    opts = checked_options(Options, dict(rank=rank, iters=iters, tol=tol, seed=seed, reg=reg,
                                         nonnegative=nonnegative, init=init), "CP-ALS")
    X = as_tensor(data)
    t0 = time.perf_counter()
    start = None if opts.init_name == "random" else \
        svd_factors(X, opts.rank, opts.seed, opts.nonnegative) if opts.init_name == "svd" \
        else given_factors(opts.init, X, opts.rank)
    out = run_serial(X, opts.rank, opts.iters, opts.tol, opts.seed, reg=opts.reg,
                     nonnegative=opts.nonnegative, init=start, callback=callback)
    info = {"command": command, "input": X.describe(), "rank": opts.rank,
            "iters": opts.iters, "tol": opts.tol, "seed": opts.seed, "reg": float(opts.reg),
            "nonnegative": bool(opts.nonnegative), "init": opts.init_name,
            "timing": {"run_s": time.perf_counter() - t0,
                       "per_iteration_s": [h["time_s"] for h in out["history"]]},
            "quality": _quality(out["history"], opts.tol)}
    return CPResult(out["lam"], out["factors"], out["history"], info)


def plan(data, nparts: int, *, rank: int = 10, grain: str = "fine", partition: str = "hp",
         partitioner: str = "auto", epsilon: float = 0.03, seed: int = 0,
         partition_file=None, command=None, network=None) -> dict:
    """The communication of one CP-ALS iteration on ``nparts`` parts, without a cluster.

    Returns the JSON report (docs/cli.md): ``plan`` (volume and messages of the
    point-to-point phases, in factor rows of R words), ``allreduce`` (the Gram
    all-reduces), ``modes`` (per mode the paper's Table 2 columns), ``partition`` and
    ``timing``.

    Examples
    --------
    >>> from daskhpc import datasets
    >>> r = plan(datasets.path("tensor"), 8, grain="coarse", partition="block")
    >>> r["modes"][0]["msgs_max"] <= 7
    True
    """
    opts = dict(rank=rank, grain=grain, partition=partition, partitioner=partitioner,
                epsilon=epsilon, seed=seed)
    rows = None
    if network is None and partition != "auto":
        s = prepare(data, nparts, partition_file=partition_file, **opts)
    else:       # every layout, priced on the network (one part per host)
        model = network_model(plan_network(network))
        keep = None if partition == "auto" else layout_name(grain, partition)
        _, s, rows = choose(data, nparts, model, keep=keep, partition_file=partition_file,
                            **opts)
    info = sections(s, command=command)
    if rows is not None:
        info["plan"].update(iteration_cost(s, model).section(model))
        info["layouts"] = rows
    return new_report("cpals", command=info.pop("command"), **info)


def steps_per_iteration(s: Setup) -> int:
    """Program steps (rounds of Dask tasks) of one iteration (``_program``)."""
    L = len(AllreduceSchedule(s.K).rounds)
    if s.K == 1:        # the serial iteration in one step
        return 1
    return s.N * (L + 1) if s.dist.grain == "fine" else s.N * L


def sections(s: Setup, history=None, command=None) -> dict:
    """Report sections shared by ``plan`` and ``fit``."""
    o, d = s.options, s.dist
    out = {"command": command, "input": s.tensor.describe(), "parts": s.K,
           "partitioner": d.partitioner if d.method == "hp" else d.method,
           "objective": "km1" if d.method == "hp" else None, "seed": o.seed,
           "grain": d.grain, "partition_method": d.method, "rank": s.R}
    out["partition"] = partition_section(s.tensor, d, s.plans, o.epsilon)
    out["plan"] = s.iteration_plan().report()
    out["allreduce"] = s.allreduce_plan().report()
    out["modes"] = mode_table(s.tensor, d, s.plans)
    out["steps_per_iteration"] = steps_per_iteration(s)
    out["timing"] = {k: round(v, 6) for k, v in s.timing.items()}
    if history is not None:
        out["iters"], out["tol"] = o.iters, o.tol
        out["reg"], out["nonnegative"] = float(o.reg), bool(o.nonnegative)
        out["init"] = o.init_name
        out["timing"]["per_iteration_s"] = [h.get("time_s") for h in history]
        out["quality"] = _quality(history, o.tol)
    return out


def _quality(history, tol: float) -> dict:
    """``fit``, ``final_fit``, ``iterations``, and with ``tol > 0`` whether it converged."""
    fits = [h["fit"] for h in history]
    q = {"fit": fits, "final_fit": fits[-1] if fits else None, "iterations": len(fits)}
    if tol > 0 and len(fits) >= 2:
        q["converged"] = bool(converged(fits, tol))
        q["fit_change"] = abs(fits[-1] - fits[-2])
    return q
