"""The public functions: ``fit`` (distributed), ``serial_fit`` (reference) and ``plan``."""

from __future__ import annotations

import time

import numpy as np

from daskhpc._workflows import RunOptions, check_parts, checked_options
from daskhpc.errors import InputError
from daskhpc.comm import network_model, plan_network
from daskhpc.report import (compare_arrays, new_report, ratio_or_none, run_sections,
                            unavailable)

from ._layouts import epoch_cost
from ._serial import run_serial, value_quality
from ._result import SSGDResult
from ._setup import Options, Setup, choose, load, prepare


def fit(data, nparts: int | None = None, *, order_plugin: bool = True,
        low_latency: bool = True, placement=None, partition_file=None,
        run: RunOptions | None = None, columns=None, **options) -> SSGDResult:
    """Factorise a ratings matrix with distributed stratified SGD on a Dask cluster.

    Parameters
    ----------
    data : path, SparseInput, scipy.sparse matrix, (rows, cols, vals[, shape]), or Dask collection
        The ratings (users x items). A ``dask.dataframe`` of (user, item, rating) with
        original ids, or a ``dask.array`` of sparse chunks (0-based indices): the ratings
        stay on the workers, only the ids come to the client (docs/collections.md).
    nparts : int, optional
        K: row blocks, column blocks and sub-epochs per epoch. Default: the number of
        workers. Consecutive parts share a worker (``ring_placement``).
    order_plugin : bool
        Enforce and record the stratum order with the scheduler plugin.
    low_latency : bool
        Send Dask's scheduler <-> worker control messages unbatched during the run.
    placement : daskhpc.runtime.Placement, optional
    partition_file : path, optional
        Row parts, ``-``, column blocks (the SSGD paper code's format).
    columns : list of 3 str, optional
        A DataFrame's user, item and rating columns (default: its first three).
    run : RunOptions, optional
        :class:`daskhpc.runtime.RunOptions`, or its fields as keywords; ``check_serial``
        reports whether W and H equal the serial reference's.
    **options
        ``rank`` (16), ``epochs`` (20), ``strategy`` ("hc", "p2p" or "dsgd"),
        ``partition`` ("hp" or "random"), ``partitioner`` ("mtkahypar"), ``strata``
        ("ring" or "random"), ``lr`` (0.02), ``reg`` (0.1), ``test_fraction`` (0.1),
        ``eval_every`` (1; 0 evaluates only after the last epoch), ``seed`` (0),
        ``init_scale``, ``epsilon``, ``ring_seed``, ``biased`` (False: the model
        mu + b_u + b_i + w_u . h_i; its H rows travel with their bias, one word more),
        ``reg_bias`` (``reg``).

    References
    ----------
    Abubaker, Karsavuran, Aykanat, "Scaling Stratified Stochastic Gradient Descent for
    Distributed Matrix Completion", IEEE TKDE 2023 (Algorithms 1-3, eq. (7), section VI).

    Examples
    --------
    >>> res = fit("ratings.csv", 4, client=client, strategy="p2p")   # doctest: +SKIP
    >>> res.report()["measured"]["inter_worker_bytes"]               # doctest: +SKIP
    """
    from daskhpc.runtime import connected

    run, options = RunOptions.split(run, options)
    with connected(run) as client:
        from daskhpc.io import is_collection

        collection = is_collection(data)
        if collection:
            from ._collect import read_input

            checked_options(Options, options, "SSGD")     # before anything is read
            if nparts is not None:
                check_parts(nparts)
            data = read_input(client, data, columns=columns,
                              keep_empty=bool(options.get("keep_empty", False)))
        elif columns is not None:
            raise InputError("columns= is for a Dask DataFrame of ratings")
        try:
            return run.finish(_fit(client, data, nparts, run, options,
                                   order_plugin=order_plugin, low_latency=low_latency,
                                   placement=placement, partition_file=partition_file))
        finally:
            if collection:
                data.values.release()


def _fit(client, data, nparts, run, options, *, order_plugin, low_latency, placement,
         partition_file):
    from daskhpc.runtime import (CheckpointDir, exchange_mode, placed_hosts, run_job,
                                 run_on_parts, worker_addresses)

    from ._job import ssgd_job

    checkpoint, resume = run.checkpoint, run.resume
    if nparts is None:
        nparts = len(worker_addresses(client))
    if checkpoint is not None and resume and partition_file is None:
        from ._checkpoint import PARTITION, check_input

        # read as a fresh run reads it: the same fingerprint (a collection's values are
        # digested on the workers)
        collection = getattr(data, "values", None) is not None
        if not collection:
            data = load(data, format=options.get("format"),
                        keep_empty=bool(options.get("keep_empty", False)))
        check_input(checkpoint, data.ratings, collection)   # before its partition is read
        partition_file = CheckpointDir.saved(checkpoint, PARTITION)   # the first job's blocks
    exchange = exchange_mode(run.exchange)
    s, model, layouts = _prepared(client, data, nparts, partition_file, options, run,
                                  exchange)
    timeline: list = []
    job = ssgd_job(s, checkpointing=checkpoint is not None, order_plugin=order_plugin,
                   timeline=timeline, exchange=exchange)
    if s.values is None:
        out = run_job(client, job, low_latency=low_latency, placement=placement,
                      **run.frame())
    else:
        # every part's ratings routed to its worker first (``_collect.Values``)
        out = run_on_parts(client, job, lambda pl: s.values.part_values(s, pl),
                           rebuild=s.values.rebuilder(s), release=[s.values.nz],
                           name="values", placement=placement, low_latency=low_latency,
                           **run.frame())
    W, H = out.value
    info = run_sections(sections(s, out.history, W=W, H=H, command=run.command), out, s.K,
                        cost=epoch_cost(s, model, *placed_hosts(client, out.placement))
                        .section(model), layouts=layouts)
    if "planned_bytes" in info["measured"]:
        info["measured"]["epochs_measured"] = sum(1 for h in out.history
                                                  if "measured_bytes" in h)
    info["execution"]["exchange"] = exchange
    if run.check_serial:
        from ._collect import full_setup

        # a collection's serial reference runs on the client
        ser = run_serial(full_setup(s) if s.values is not None else s)
        check = compare_arrays([(W, ser["W"]), (H, ser["H"])])
        check["history_identical"] = all(
            a.get("train_loss") == b.get("train_loss") and a.get("test_rmse") == b.get("test_rmse")
            for a, b in zip(ser["history"], out.history))
        info["serial_check"] = check
    return _named(SSGDResult(W, H, out.history, info, timeline or None), s)


def _prepared(client, data, nparts, partition_file, options, run, exchange):
    """``(setup, cost model, layouts)``: the asked layout, or ``auto``'s fastest (and all)."""
    from daskhpc.runtime import network_for, placed_hosts, worker_addresses

    from ._job import ring_placement

    auto = options.get("partition") == "auto"
    model = network_for(run.network, client, exchange, auto=auto)
    if not auto:
        return prepare(data, nparts, partition_file=partition_file, **options), model, None
    owner, hosts = placed_hosts(client, ring_placement(nparts, worker_addresses(client)))
    _, s, rows = choose(data, nparts, model, owner=owner, hosts=hosts,
                        partition_file=partition_file, **options)
    return s, model, rows


def _named(res: SSGDResult, s: Setup) -> SSGDResult:
    """The model's names: original ids, the training pattern, the rating range (the run's
    last use of ``s``: its ratings are let go first, the values' 4 bytes a rating with them)."""
    import scipy.sparse as sp

    rows, cols = s.index_maps
    res.row_ids = None if rows is None else _plain(rows)
    res.col_ids = None if cols is None else _plain(cols)
    res.clip = tuple(float(c) for c in s.clip)
    res.mu = s.mu
    t, s.ratings, s.train, s.test = s.train, None, None, None
    if t.on_workers:            # a DataFrame's ids: made on the keeper, 5 bytes a rating
        res.seen = s.values.seen(t.shape)
    else:
        t = (t.rows, t.cols, t.shape)
        res.seen = sp.csr_array((np.ones(t[0].size, np.int8), t[:2]), shape=t[2])
    if s.options.biased and res.W is not None:   # the last columns are the biases
        F = s.options.rank
        res.user_bias, res.item_bias = res.W[:, F].copy(), res.H[:, F].copy()
        res.W, res.H = np.ascontiguousarray(res.W[:, :F]), np.ascontiguousarray(res.H[:, :F])
    return res


def _plain(ids) -> np.ndarray:
    """Ids as an array numpy saves without pickle (strings as unicode)."""
    a = np.asarray(ids)
    return a.astype(str) if a.dtype == object else a


def serial_fit(data, nparts: int = 1, *, partition_file=None, command=None,
               **options) -> SSGDResult:
    """The serial reference: the same strata, blocks and update order in one process.

    ``fit(data, K, **opts).W`` equals ``serial_fit(data, K, **opts).W`` bit for bit.

    Examples
    --------
    >>> from daskhpc import datasets
    >>> res = serial_fit(datasets.ratings(), 2, epochs=2, partition="random")
    >>> len(res.history), res.W.shape
    (2, (610, 16))
    """
    s = prepare(data, nparts, partition_file=partition_file, **options)
    t0 = time.perf_counter()
    out = run_serial(s)
    info = sections(s, out["history"], W=out["W"], H=out["H"], command=command)
    info["timing"]["run_s"] = time.perf_counter() - t0
    return _named(SSGDResult(out["W"], out["H"], out["history"], info), s)


def plan(data, nparts: int, *, partition_file=None, command=None, network=None,
         **options) -> dict:
    """The communication plan of one epoch (section VI metrics), without a cluster.

    Returns the JSON report: ``plan`` (tot/max/sum-max/max-max vol and msgs per epoch, in
    rows of H of ``words_per_unit`` words), ``partition``, ``timing``; plus ``run_plan``
    (all epochs) and ``eval_plan`` (test-error messages) when they apply.

    Examples
    --------
    >>> from daskhpc import datasets
    >>> rep = plan(datasets.ratings(), 2, strategy="dsgd", partition="random")
    >>> rep["plan"]["tot_vol"], rep["plan"]["tot_msgs"]
    (19448, 4)
    """
    options.setdefault("eval_every", None)
    auto = options.get("partition") == "auto"
    rows = None
    if network is None and not auto:
        s = prepare(data, nparts, partition_file=partition_file, **options)
    else:       # every layout, priced on the network (one part per host)
        model = network_model(plan_network(network))
        keep = None if auto else options.get("partition", Options.partition)
        _, s, rows = choose(data, nparts, model, keep=keep, partition_file=partition_file,
                            **options)
    info = sections(s, None, command=command)
    if rows is not None:
        info["plan"].update(epoch_cost(s, model).section(model))
        info["layouts"] = rows
    return new_report("ssgd", command=info.pop("command"), **info)


def sections(s: Setup, history, W=None, H=None, command=None) -> dict:
    """Report sections shared by ``plan``, ``serial_fit`` and ``fit``."""
    o, a = s.options, s.assignment
    rp = s.runplan
    out = {"command": command, "input": dict(s.ratings.source) or
           {"shape": list(s.ratings.shape), "nnz": s.ratings.nnz},
           "parts": s.K, "strategy": o.strategy, "strata": o.strata, "rank": o.rank,
           "epochs": o.epochs, "seed": o.seed, "shuffle": bool(o.shuffle),
           "partition_method": a.method}
    if o.biased:       # unbiased reports keep their keys
        out["model"] = {"biased": True, "mu": s.mu, "reg_bias": o.bias_reg,
                        "words_per_row": o.width}
    out["input"].setdefault("shape", list(s.ratings.shape))
    out["input"].setdefault("nnz", s.ratings.nnz)
    if a.method == "hp":
        out.update(partitioner=a.partitioner, objective="soed")
    else:
        out["partitioner"] = a.method
    out["partition"] = a.report
    out["plan"] = rp.epoch_plan().report()
    if history is not None:
        out["run_plan"] = rp.run_plan().report()
    ev = rp.eval_plan()
    if ev is not None and history is not None:
        out["eval_plan"] = ev.report()
    out["timing"] = {k: round(v, 6) for k, v in s.timing.items()}
    if history is not None:
        out["timing"]["per_iteration_s"] = [h["time_s"] for h in history]
        out["quality"] = _quality(s, history, W, H)
    return out


def _quality(s: Setup, history, W, H) -> dict:
    q = {"train_loss": [h["train_loss"] for h in history],
         "train_loss_definition": "sum over the epoch's sweep of 0.5 (e^2 + reg (|w|^2 + "
                                  "|h|^2)), each rating taken just before its update"}
    rm = [h["test_rmse"] for h in history if "test_rmse" in h]
    if rm:
        q["test_rmse"] = rm
        q["test_rmse_epochs"] = [h["epoch"] for h in history if "test_rmse" in h]
    if s.options.biased:
        q["train_loss_definition"] = ("sum over the epoch's sweep of 0.5 (e^2 + reg (|w|^2 + "
                                      "|h|^2) + reg_bias (b_u^2 + b_i^2)), e = r - (mu + b_u + "
                                      "b_i + w.h), each rating taken just before its update")
    if s.values is not None:         # a collection: computed where its ratings are
        q.update(s.values.quality(W, H, s))
    else:
        t = s.train
        q.update(value_quality(t.rows, t.cols, t.vals, s.test.vals, W, H, s.options, s.mu,
                               s.clip))
    if s.test.nnz and rm:
        q["final_test_rmse"] = rm[-1]
        r = ratio_or_none(rm[-1], q["global_mean_rmse"])
        if r is None:       # implicit feedback (all values equal): nothing to improve on
            unavailable(q, "improvement_over_mean", "every test value equals the "
                        "training mean: its RMSE is 0")
        else:
            q["improvement_over_mean"] = 1.0 - r
    return q
