"""The public functions: ``fit`` (on a Dask cluster), ``serial_fit`` (reference),
``local_fit`` (the distributed program run in one process) and ``plan``."""

from __future__ import annotations

import functools
import time

import numpy as np

from daskhpc._workflows import RunOptions
from daskhpc.comm import network_model, plan_network, run_local
from daskhpc.errors import InputError
from daskhpc.io import is_collection
from daskhpc.report import new_report, run_sections

from ._collect import (full_setup, part_statics, predictions_array, prepare_collection,
                       rebuilder, short_steps_of)
from ._layouts import LAYOUTS, epoch_cost
from ._job import (gcn_job, minibatch_info, plan_info, prepare_run, rows, serial_check,
                   short_steps, steps_per_epoch)
from ._plan import plan_sections
from ._program import assemble, program, row, statics
from ._result import GCNResult, quality, sections
from ._serial import run_serial
from ._setup import Options, choose, prepare


def fit(graph, features=None, labels=None, split=None, nparts: int | None = None, *,
        layers=(16,), partition: str = "hp", epochs: int = 200, optimizer: str = "adam",
        dropout: float = 0.5, seed: int = 0, minibatch=None, in_loop="auto",
        partition_file=None, columns=None, run: RunOptions | None = None,
        **options) -> GCNResult:
    """Train a GCN on a Dask cluster, one row block of A_hat per part (Algorithms 1-2).

    Parameters
    ----------
    graph, features, labels, split
        ``"cora"``, a Planetoid ``.npz``, a Facebook-style directory, a graph file (seeded
        random node data), a GraphData, a PyG ``Data``, or a scipy matrix with
        ``features``, ``labels`` and ``split`` ((train, val, test) indices or masks).
    nparts : int, optional
        K, the row blocks. Default: the number of workers (parts dealt round robin).
    layers, partition, epochs, optimizer, dropout, seed
        Hidden widths ((16,): 2 layers), the row partition (``hp``, ``gp``, ``rp``,
        ``random``), epochs, ``adam`` or ``sgd``, dropout, seed.
    minibatch : bool or dict, optional
        Mini-batch training (section 4.3.3): ``True`` or ``{"batch_size": 0.5 (a fraction
        of the nodes, or a count), "steps": 200, "sampler": "node" or "uniform",
        "shp": True}``, on the SHP partition (Algorithm 3) unless ``shp`` is False.
    in_loop : bool or "auto"
        Run the steps in the workers' event loops (short steps).
    partition_file : path, optional
        One part id per line (``daskhpc partition ... --save-partition``).
    columns : list of str, optional
        A Dask DataFrame edge list's source, target (and weight) columns. Such a graph is
        read on the workers; ``features`` and ``labels`` may then be Dask Arrays, and
        ``predictions`` comes back as one (docs/collections.md).
    run : RunOptions, optional
        :class:`daskhpc.runtime.RunOptions`, or its fields as keywords; ``check_serial``
        compares with the partition-aware reference (``identical``) and the plain one
        (``textbook``: 1e-10 relative in float64).
    **options
        ``lr``, ``weight_decay``, ``bias``, ``order``, ``eval_every``, ``partitioner``,
        ``epsilon``, ``weights`` (``"nnz+features"``: feature nonzeros balanced too),
        ``symmetrize``, ``dtype`` (``"float32"`` halves the bytes exchanged),
        ``random_features``, ``random_classes``.

    Returns
    -------
    GCNResult
        Weights, predictions, logits, the per-epoch history and the full report.

    References
    ----------
    Demirci, Haldar, Ferhatosmanoglu, "Scalable Graph Convolutional Network Training on
    Distributed-Memory Systems", PVLDB 16(4), 2022 (Algorithms 1-3).

    Examples
    --------
    >>> res = fit("cora", nparts=4, client=client, epochs=30, check_serial=True)  # doctest: +SKIP
    >>> res.report()["serial_check"]["identical"]                      # doctest: +SKIP
    True
    """
    if isinstance(features, (int, np.integer)) and not isinstance(features, bool):
        raise InputError(f"features must be an array, not {features!r}: pass the number "
                         "of parts as nparts=")
    if in_loop not in ("auto", True, False):
        raise InputError(f"in_loop must be 'auto', True or False, not {in_loop!r}")
    from daskhpc.runtime import connected

    run, options = RunOptions.split(run, options)
    options = dict(options, layers=layers, partition=partition, epochs=epochs,
                   optimizer=optimizer, dropout=dropout, seed=seed)
    with connected(run) as client:
        return run.finish(_fit(client, run, graph, features, labels, split, nparts,
                               minibatch, in_loop, partition_file, options, columns))


def _fit(client, run, graph, features, labels, split, nparts, minibatch, in_loop,
         partition_file, options, columns=None):
    from daskhpc.runtime import (exchange_mode, network_for, placed_hosts, run_job,
                                 worker_addresses)

    exchange = exchange_mode(run.exchange)
    workers = len(worker_addresses(client))
    source = layouts = None
    if any(is_collection(x) for x in (graph, features, labels)):
        s, source = prepare_collection(client, graph, features, labels, split,
                                       nparts or workers, minibatch, run.checkpoint,
                                       run.resume, partition_file, options, columns)
        loop = short_steps_of(s, source, workers) if in_loop == "auto" else bool(in_loop)
    else:
        if columns is not None:
            raise InputError("columns= is for a Dask DataFrame edge list")
        s, layouts = _chosen(client, run, exchange, graph, features, labels, split,
                             nparts or workers, minibatch, partition_file, options)
        if s is None:
            s = prepare_run(graph, features, labels, split, nparts or workers, minibatch,
                            run.checkpoint, run.resume, partition_file, options)
        loop = short_steps(s, workers) if in_loop == "auto" else bool(in_loop)
    job = gcn_job(s, in_loop=loop, exchange=exchange)
    if source is not None:
        job.fingerprint = functools.partial(_with_tokens, job.fingerprint, source.tokens)
    if source is None or source.rows is None:
        out = run_job(client, job, **run.frame())
    else:
        out, s = _run_collection(client, s, job, source, run)
    value, history = out.value, rows(out.history)
    info = sections(s, command=run.command)
    info.update(plan_info(s))
    cost = None
    if not s.batches and "plan" in info:     # the model prices a full-batch epoch
        model = network_for(run.network, client, exchange)
        cost = epoch_cost(s, model, *placed_hosts(client, out.placement)).section(model)
    run_sections(info, out, s.K, cost=cost, layouts=layouts)
    steps = steps_per_epoch(s)
    per = [h["time_s"] for h in history if h.get("time_s") is not None]
    info["timing"]["steps_per_epoch"] = steps
    if len(per) > 1:
        med = float(np.median(per[1:]))
        info["timing"].update(median_epoch_s=med, median_step_s=med / steps)
    final = {k: v for k, v in (history[-1] if history else {}).items()
             if k.startswith("final_")}
    info["quality"] = quality(s, history, final)
    if s.batches:
        info["minibatch"] = minibatch_info(s)
    if run.check_serial:
        info["serial_check"] = serial_check(s, value)
    predictions = value["predictions"]
    if source is not None:            # a collection in, a Dask Array out
        source.release()
        predictions = predictions_array(client, predictions, source,
                                        worker_addresses(client))
    return GCNResult(value["params"], predictions, history, info, value["logits"])


def _chosen(client, run, exchange, graph, features, labels, split, nparts, minibatch,
            partition_file, options):
    """With ``partition="auto"``: ``(setup or None, layouts)``; else ``(None, None)``."""
    if options.get("partition") != "auto":
        return None, None
    from daskhpc.runtime import Placement, network_for, placed_hosts, worker_addresses

    model = network_for(run.network, client, exchange, auto=True)
    owner, hosts = placed_hosts(client, Placement(nparts, worker_addresses(client)))
    name, s, rows = choose(graph, nparts, model, features, labels, split, owner=owner,
                           hosts=hosts, partition_file=partition_file, **options)
    options["partition"] = name if name in LAYOUTS else options["partition"]
    if minibatch or (run.checkpoint is not None and run.resume) or name not in LAYOUTS:
        return None, rows
    return s, rows


def _with_tokens(fingerprint, tokens: dict) -> dict:
    """The checkpoint fingerprint of a run on Dask collections: the job's and their tokens."""
    return {**fingerprint(), "collection": tokens.get("edges"),
            "features_collection": tokens.get("features")}


def _run_collection(client, s, job, source, run):
    """``fit`` with the features on the workers: each part's statics built on its worker."""
    from daskhpc.runtime import run_on_parts

    # check_serial: the serial references run on the client, with the features there
    full = full_setup(client, s, source) if run.check_serial else s
    shells, job.statics = job.statics, None
    return run_on_parts(client, job, lambda pl: part_statics(client, shells, source, pl),
                        rebuild=rebuilder(client, shells, source), release=[source.rows],
                        **run.frame()), full


def serial_fit(graph, features=None, labels=None, split=None, *, command=None, callback=None,
               **options) -> GCNResult:
    """Full-batch GCN training on the whole graph in this process (the textbook reference).

    ``graph``, ``features``, ``labels``, ``split`` and ``**options`` are :func:`fit`'s;
    ``callback(row)`` is called after every epoch.

    References
    ----------
    Kipf & Welling, ICLR 2017 (the model); Demirci, Haldar, Ferhatosmanoglu, "Scalable
    Graph Convolutional Network Training on Distributed-Memory Systems", PVLDB 16(4), 2022
    (eqs. 1-5).

    Examples
    --------
    >>> res = serial_fit("cora", epochs=5)
    >>> len(res.history), res.predictions.shape
    (5, (2708,))
    """
    s = prepare(graph, 1, features, labels, split, partition="rp", **options)
    t0 = time.perf_counter()
    out = run_serial(s, callback=callback)
    info = sections(s, command=command, partitioned=False)
    info["timing"]["run_s"] = time.perf_counter() - t0
    info["timing"]["per_iteration_s"] = [h["time_s"] for h in out["history"]]
    info["quality"] = quality(s, out["history"], out["final"])
    return GCNResult(out["params"], out["predictions"], out["history"], info, out["logits"])


def local_fit(graph, nparts: int, features=None, labels=None, split=None, *, command=None,
              partition_file=None, **options) -> GCNResult:
    """The distributed program run part by part in this process.

    What ``fit`` computes on a cluster, bit for bit; its weights equal
    :func:`serial_fit`'s to about 1e-14 (the dW sums are taken in part order).

    Examples
    --------
    >>> res = local_fit("cora", 2, partition="rp", epochs=3)
    >>> res.info["parts"], len(res.history)
    (2, 3)
    """
    s = prepare(graph, nparts, features, labels, split, partition_file=partition_file,
                **options)
    t0 = time.perf_counter()
    finals, reports = run_local(program(s), statics(s))
    history = [row(s, u, r) for u, r in enumerate(reports)]
    out = assemble(s, finals)
    info = sections(s, command=command)
    info["timing"]["run_s"] = time.perf_counter() - t0
    final = {k: v for k, v in history[-1].items() if k.startswith("final_")}
    info["quality"] = quality(s, history, final)
    return GCNResult(out["params"], out["predictions"], history, info, out["logits"])


def plan(graph, nparts: int, features=None, labels=None, split=None, *, command=None,
         partition_file=None, compare_rp: bool = True, network=None, **options) -> dict:
    """The messages of one epoch and the paper's metrics, without a cluster.

    Returns the JSON report: ``plan`` (the epoch's Plan report), ``volume`` (km1 of the
    forward and backward patterns, sum_k (d_{k-1} + d_k) km1), ``per_part`` (Table 2's
    avg/max volume and messages), ``allreduce`` (the dW reduction), ``graph_model`` (the
    GP estimate) and ``vs_rp`` (ratios to the paper's random rows, and Table 2's numbers).

    Examples
    --------
    >>> r = plan("cora", 8, partition="hp")
    >>> r["vs_rp"]["avg_vol"] < 0.5
    True
    """
    t0 = time.perf_counter()
    rows = None
    if network is None and options.get("partition") != "auto":
        s = prepare(graph, nparts, features, labels, split, partition_file=partition_file,
                    **options)
    else:       # every layout, priced on the network (one part per host)
        model = network_model(plan_network(network))
        keep = None if options.get("partition") == "auto" else \
            options.get("partition", Options.partition)
        _, s, rows = choose(graph, nparts, model, features, labels, split, keep=keep,
                            partition_file=partition_file, **options)
    t1 = time.perf_counter()
    info = sections(s, command=command)
    info.update(plan_sections(s, compare_rp=compare_rp))
    if rows is not None:
        info["plan"].update(epoch_cost(s, model).section(model))
        info["layouts"] = rows
    info["timing"]["plan_s"] = time.perf_counter() - t1
    info["timing"]["total_s"] = time.perf_counter() - t0
    return new_report("gcn", command=info.pop("command"), **info)
