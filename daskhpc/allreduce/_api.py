"""The public functions: ``allreduce`` (Dask), ``plan``, ``allreduce_local``."""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from daskhpc._workflows import RunOptions, check_bounds, check_parts
from daskhpc.comm import run_local_history
from daskhpc.errors import InputError
from daskhpc.report import new_report

from ._plan import plan_sections
from ._program import assemble, program, row, statics
from ._result import AllreduceResult
from ._serial import serial_allreduce
from ._setup import Setup, options_of, prepare
from ._synthetic import uniform_vectors


def setup_of(vectors=None, nparts=None, *, N=None, density=None, seed=0, dtype="float64",
             **options) -> Setup:
    """``prepare`` on the given vectors, or on the uniform model (N, nparts, density)."""
    if vectors is None:
        if N is None or nparts is None or density is None:
            raise InputError("without vectors give N, the number of parts and a density "
                             "(the thesis's uniform model)")
        check_bounds("--density", float(density), 0, 1)
        check_parts(nparts)
        check_bounds("--N", N, 1, 2 ** 32)
        vectors = uniform_vectors(int(N), int(nparts), float(density), seed=seed, dtype=dtype)
        src = {"model": "uniform", "N": int(N), "density": float(density), "seed": int(seed),
               "dtype": str(np.dtype(dtype))}
        return prepare(vectors, nparts, N=int(N), source=src, **options)
    return prepare(vectors, nparts, N=N, **options)


def sections(s: Setup, history=None, command=None) -> dict:
    """Report sections shared by ``plan`` and the runs."""
    k = [s.N if st.dense else st.nitems for st in s.streams]
    inp = {**s.source, "shape": [s.nparts, s.N], "nnz": int(sum(k)),
           "k_max": int(max(k)), "density_max": max(k) / s.N, "dtype": s.fmt.dtype.name}
    out = {"command": command, "input": inp, "parts": s.nparts, "algorithm": s.algo.name,
           "N": s.N, "isize": s.fmt.isize, "index_bytes": s.fmt.c,
           "dense_threshold_items": s.fmt.phi(s.N)}
    if s.choice is not None:
        out["choice"] = s.choice
    out.update(plan_sections(s.plan))
    out["plan"]["estimate_s"] = s.plan.estimate_time(s.choice["alpha"], s.choice["beta"]) \
        if s.choice else None
    if s.choice is not None:        # every algorithm's Table 3.1 time, fastest first
        times = s.choice["candidates"]
        out["plan"]["predicted_s_per_step"] = times.get(s.algo.name) + \
            s.choice.get("floor_s", 0.0)
        out["plan"]["prediction"] = {"network": {"name": "alpha-beta",
                                                 "alpha_s": s.choice["alpha"],
                                                 "beta_s_per_byte": s.choice["beta"]}}
        out["layouts"] = [{"layout": n, "predicted_s_per_step": t}
                          for n, t in sorted(times.items(), key=lambda kv: kv[1])]
    out["timing"] = {k2: round(v, 6) for k2, v in s.timing.items()}
    if history is not None:
        out["timing"]["per_iteration_s"] = [h["time_s"] for h in history]
    return out


def plan(vectors=None, nparts=None, *, N=None, density=None, seed=0, dtype="float64",
         command=None, **options) -> dict:
    """The plan of one call (messages, items, bytes per stage and rank), no cluster.

    Give ``vectors`` (one per rank), or ``N``, ``nparts`` and ``density`` for the
    thesis's uniform model (seeded). ``algorithm="auto"`` adds the choice and every
    candidate's Table 3.1 prediction.

    Examples
    --------
    >>> r = plan(N=1000, nparts=4, density=0.01, algorithm="auto", alpha=1e-3, beta=1e-9)
    >>> r["algorithm"], r["plan"]["phases"]
    ('ssar_rec_dbl', 2)
    """
    s = setup_of(vectors, nparts, N=N, density=density, seed=seed, dtype=dtype, **options)
    info = sections(s, command=command)
    return new_report("allreduce", command=info.pop("command"), **info)


def allreduce_local(vectors=None, algorithm: str = "auto", *, nparts=None, N=None,
                    density=None, seed=0, dtype="float64", check_serial: bool = False,
                    command=None, **options) -> AllreduceResult:
    """Run the allreduce Program in this process (``run_local``): every rank's total.

    Parameters
    ----------
    vectors : sequence, optional
        One vector per rank (dense array, ``(indices, values)`` or scipy sparse);
        default the uniform model of ``N``, ``nparts``, ``density``, ``seed``.
    algorithm : str
        ``auto`` or one of :data:`~daskhpc.allreduce.ALGORITHMS`.
    check_serial : bool
        Compare with the dense rank-order sum: integers must be equal; floats within
        the reassociation bound ``(P - 1) u sum_i |v_i|``.
    **options
        ``group`` (early switch), ``alpha``, ``beta`` (for ``auto``), ``repeat``.

    Returns
    -------
    AllreduceResult

    Examples
    --------
    >>> import numpy as np
    >>> r = allreduce_local([np.array([1, 0, 2]), np.array([0, 0, 5])], algorithm="ssar_rec_dbl")
    >>> r.total.tolist(), r.history[0]["sent_bytes"]
    ([1, 0, 7], 36)

    References
    ----------
    C. Renggli, "Efficient Sparse AllReduce For Scalable Machine Learning", Master's
    thesis, ETH Zurich, 2017 (chapter 3, Table 3.1; chapter 4).
    """
    s = setup_of(vectors, nparts, N=N, density=density, seed=seed, dtype=dtype,
                 algorithm=algorithm, **options)
    prog = program(s)
    finals, history = run_local_history(prog, statics(s), lambda u, rep: row(s, u, rep))
    times = [h["time_s"] for h in history]
    streams = assemble(s, finals)
    info = sections(s, history, command=command)
    info["timing"]["run_s"] = float(sum(times))
    info["quality"] = {"ranks_identical": _identical(streams),
                       "result_items": streams[0].nitems,
                       "result_dense": bool(streams[0].dense)}
    if check_serial:
        info["serial_check"] = _check(s, streams[0].to_dense())
    return AllreduceResult(streams, info, history, s.plan, s.choice)


def _identical(streams) -> bool:
    a = streams[0]
    return all(a.dense == b.dense and np.array_equal(a.val, b.val) and
               (a.dense or np.array_equal(a.idx, b.idx)) for b in streams[1:])


def _check(s: Setup, got: np.ndarray) -> dict:
    vecs = [(st.idx, st.val) if not st.dense else st.val for st in s.streams]
    want = serial_allreduce(vecs, s.N)
    diff = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)),
                        initial=0.0))
    out = {"done": True, "identical": bool(np.array_equal(got, want)), "max_abs_diff": diff}
    if s.fmt.dtype.kind == "f":
        absum = np.zeros(s.N, np.float64)
        for st in s.streams:
            absum += np.abs(st.to_dense())
        u = np.finfo(s.fmt.dtype).eps / 2
        out["bound"] = "(P - 1) u sum_i |v_i| per element"
        out["within_bound"] = bool(np.all(np.abs(got - want) <= 2 * (s.nparts - 1) * u * absum))
        out["bound_note"] = "2x: both the run and the serial sum are rounded"
    return out


def allreduce(vectors=None, algorithm: str = "auto", *, N=None, nparts=None, density=None,
              seed=0, dtype="float64", gather=None,
              run: RunOptions | None = None, **options) -> AllreduceResult:
    """Sum per-rank vectors on a Dask cluster; every rank ends with the same total.

    Parameters
    ----------
    vectors : sequence, optional
        One vector per rank: arrays on the client (dense, ``(indices, values)`` or scipy
        sparse), ``distributed.Future``s of them (each rank runs where its future lives),
        or a 2-D Dask Array of one row per rank (docs/collections.md). Default: the
        uniform model of ``N``, ``nparts``, ``density``, ``seed`` (section 5.1).
    algorithm : str
        ``auto`` (Table 3.1 with the calibrated alpha and beta) or one of
        :data:`~daskhpc.allreduce.ALGORITHMS`.
    gather : bool, optional
        Bring every rank's total to the client (default: only for client-side vectors;
        else they stay on the workers, ``result.futures``).
    run : RunOptions, optional
        :class:`daskhpc.runtime.RunOptions`, or its fields as keywords.
    **options
        ``repeat`` (calls, each a history row), ``group``, ``alpha``, ``beta``.

    Returns
    -------
    AllreduceResult

    Examples
    --------
    >>> r = allreduce(futs, N=10**7, client=client)                       # doctest: +SKIP
    >>> r.futures[2].result()       # rank 2's total, a stream payload    # doctest: +SKIP

    References
    ----------
    C. Renggli, "Efficient Sparse AllReduce For Scalable Machine Learning", Master's
    thesis, ETH Zurich, 2017 (chapters 3-4, Table 3.1).
    """
    from daskhpc.runtime import connected

    run, options = RunOptions.split(run, options)
    options_of(dict(algorithm=algorithm, **options))   # a wrong keyword: before a cluster
    with connected(run) as client:
        return run.finish(_allreduce(client, run, vectors, algorithm, N, nparts, density,
                                     seed, dtype, gather, options))


def _allreduce(client, run, vectors, algorithm, N, nparts, density, seed, dtype, gather,
               options):
    from daskhpc.io import is_collection
    from daskhpc.runtime import exchange_mode, worker_addresses

    from ._job import are_futures, from_futures, run_program, with_values
    from ._stream import from_payload

    t_start = time.perf_counter()
    workers = worker_addresses(client)
    if run.network is not None:       # auto decides on this network (calibrate: measured)
        from daskhpc.runtime import network_for

        model = network_for(run.network, client, exchange_mode(run.exchange))
        options = model.fill(options)
    collection = vectors is not None and is_collection(vectors)
    if collection:                         # one rank per row, run where its row is
        from ._collect import rank_futures

        vectors, n, collection = rank_futures(client, vectors)
        if N is not None and int(N) != n:
            raise InputError(f"N={N} but the Dask Array's rows have length {n}")
        N = n
    futures_in = vectors is not None and are_futures(vectors)
    inputs = None
    if futures_in:
        try:
            s, inputs, owner = from_futures(client, vectors, N, dict(algorithm=algorithm,
                                                                     **options))
        finally:
            if collection:
                for f in vectors:
                    f.release()            # the canonical inputs hold the rows now
        if collection:
            s.source = collection
    else:
        s = setup_of(vectors, nparts, N=N, density=density, seed=seed, dtype=dtype,
                     algorithm=algorithm, **options)
        owner = [workers[r % len(workers)] for r in range(s.nparts)]
    gather = (not futures_in) if gather is None else bool(gather)
    keep = futures_in or not gather
    exchange = exchange_mode(run.exchange)
    out = run_program(client, s, owner, dataclasses.replace(run, exchange=exchange),
                      inputs=inputs, keep=keep)
    history, finals, measured, timing = out
    futures = finals if keep else []
    streams = [] if keep else finals
    if futures and (gather or run.check_serial):
        streams = [from_payload(p, 0, s.N) for p in client.gather(futures)]
    info = sections(s, history, command=run.command)
    info["execution"] = {"exchange": exchange}
    info["measured"] = measured.pop("summary")
    for st in info["stages"]:
        st.update(measured["stages"].get(st["stage"], {}))
    info["timing"].update(timing)
    times = [h["time_s"] for h in history]
    info["timing"]["call_s_median"] = float(np.median(times))
    info["timing"]["total_s"] = time.perf_counter() - t_start
    q = {"result_items": None}
    if streams:
        q.update(ranks_identical=_identical(streams), result_items=streams[0].nitems,
                 result_dense=bool(streams[0].dense))
    if s.choice:
        q["predicted_s"] = s.choice["predicted_s"]
        q["steps_per_call"] = int(s.algo.nstages) + 1     # the stages and the final put
    q["measured_call_s"] = float(np.median(times))
    info["quality"] = {k: v for k, v in q.items() if v is not None}
    if run.check_serial:
        vs = s if not futures_in else with_values(client, s, inputs)
        info["serial_check"] = _check(vs, streams[0].to_dense())
    return AllreduceResult(streams if gather else [], info, history, s.plan, s.choice,
                           futures=futures)
