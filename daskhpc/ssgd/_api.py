"""The public functions: ``fit`` (distributed), ``serial_fit`` (reference) and ``plan``.

Examples
--------
>>> import daskhpc as dh
>>> from daskhpc import datasets
>>> r = dh.ssgd.plan(datasets.ratings(), 4, strategy="hc", partition="random")
>>> r["plan"]["tot_msgs"] <= 4 * 4 * 3
True
>>> client = dh.connect(n_workers=2)                             # doctest: +SKIP
>>> res = dh.ssgd.fit(datasets.ratings(), 2, client=client, epochs=5)  # doctest: +SKIP
>>> res                                                          # doctest: +SKIP
SSGDResult(strategy=hc, parts=2, rank=16, epochs=5)
...
"""

from __future__ import annotations

import time

import numpy as np

from ._result import SSGDResult
from ._setup import Setup, prepare

__all__ = ["fit", "serial_fit", "plan"]


def fit(data, nparts: int | None = None, *, client=None, check_serial: bool = False,
        progress: bool = False, order_plugin: bool = True, low_latency: bool = True,
        placement=None, partition_file=None, checkpoint=None, resume: bool = False,
        max_restarts: int = 3, command=None, **options) -> SSGDResult:
    """Factorise a ratings matrix with distributed stratified SGD on a Dask cluster.

    Parameters
    ----------
    data : path, SparseInput, scipy.sparse matrix, or (rows, cols, vals[, shape])
        The ratings (users x items).
    nparts : int, optional
        K: row blocks, column blocks and sub-epochs per epoch. Default: the number of
        workers. Parts are placed round robin on the workers.
    client : distributed.Client, optional
        Default: the current client (``daskhpc.connect()`` makes one).
    check_serial : bool
        Also run the serial reference and report whether W and H are bit-identical.
    progress : bool
        Progress bar on standard error.
    order_plugin : bool
        Enforce and record the stratum order with the scheduler plugin.
    low_latency : bool
        Send Dask's scheduler <-> worker control messages unbatched during the run
        (the default 2-5 ms batching dominates small epochs; see ``_latency``).
    placement : daskhpc.runtime.Placement, optional
    partition_file : path, optional
        Row parts, ``-``, column blocks (the SSGD paper code's format).
    checkpoint : path, optional
        Directory (seen by every worker) for a checkpoint after every epoch; a lost
        worker then costs only the epochs since the last one (see ``_checkpoint``).
        Without it a lost worker restarts the run from the start (same result).
    resume : bool
        Continue from the newest complete epoch in ``checkpoint`` (with its saved
        partition); a fresh start if it holds none.
    max_restarts : int
        Lost-worker recoveries before the run gives up with an error.
    **options
        ``rank`` (16), ``epochs`` (20), ``strategy`` ("hc", "p2p" or "dsgd"),
        ``partition`` ("hp" or "random"), ``partitioner`` ("mtkahypar"), ``strata``
        ("ring" or "random"), ``lr`` (0.02), ``reg`` (0.1), ``test_fraction`` (0.1),
        ``eval_every`` (1; 0 evaluates only after the last epoch), ``seed`` (0),
        ``init_scale``, ``epsilon``, ``ring_seed``.

    Returns
    -------
    SSGDResult

    References
    ----------
    Abubaker, Karsavuran, Aykanat, "Scaling Stratified Stochastic Gradient Descent for
    Distributed Matrix Completion", IEEE TKDE 2023 (Algorithms 1-3, eq. (7), section VI).

    Examples
    --------
    >>> res = fit("ratings.csv", 4, client=client, strategy="p2p")   # doctest: +SKIP
    >>> res.report()["measured"]["inter_worker_bytes"]               # doctest: +SKIP
    """
    from ._driver import run_distributed

    if client is None:
        from distributed import get_client

        client = get_client()
    if nparts is None:
        nparts = len(client.scheduler_info(n_workers=-1)["workers"])
    ck = None
    if checkpoint is not None and resume and partition_file is None:
        from ._checkpoint import partition_path

        partition_file = partition_path(checkpoint)    # the blocks of the first job
    s = prepare(data, nparts, partition_file=partition_file, **options)
    if checkpoint is not None:
        from ._checkpoint import SSGDCheckpoint

        ck = SSGDCheckpoint.open(checkpoint, s, resume=resume)
    out = run_distributed(client, s, progress=progress, placement=placement,
                          order_plugin=order_plugin, low_latency=low_latency,
                          checkpoint=ck, max_restarts=max_restarts)
    run = out["setup"]                   # the last attempt: what the ledger measured
    owner = [out["placement"][p] for p in range(s.K)]
    n_before = len(out["history"]) - run.E
    history = out["history"][:n_before]
    if out["ledger"] is not None:
        history += _attribute_bytes(run, out["history"][n_before:], out["ledger"], owner)
    check = None
    if check_serial:
        from ._serial import run_serial

        ser = run_serial(s)
        same = bool(np.array_equal(ser["W"], out["W"]) and np.array_equal(ser["H"], out["H"]))
        diff = max(float(np.max(np.abs(ser["W"] - out["W"]), initial=0.0)),
                   float(np.max(np.abs(ser["H"] - out["H"]), initial=0.0)))
        same_hist = all(a.get("train_loss") == b.get("train_loss") and
                        a.get("test_rmse") == b.get("test_rmse")
                        for a, b in zip(ser["history"], out["history"]))
        check = {"done": True, "identical": same, "max_abs_diff": diff,
                 "history_identical": same_hist}
    measured = dict(out["measured"])
    if out["ledger"] is not None:
        # planned for the epochs the last attempt ran (all of them without a restart)
        rplan, ev = run.runplan.run_plan(), run.runplan.eval_plan()
        measured["planned_bytes"] = _cross(rplan, owner) + (_cross(ev, owner) if ev else 0)
        measured["planned_bytes_training"] = _cross(rplan, owner)
        measured["epochs_measured"] = run.E
        msgs = measured["inter_worker_messages"]
        if msgs:
            measured["framing_bytes_per_message"] = \
                (measured["inter_worker_bytes"] - measured["planned_bytes"]) / msgs
    measured["parts_per_worker"] = s.K / len(set(owner))
    info = sections(s, history, W=out["W"], H=out["H"], command=command)
    info["measured"] = measured
    info["timing"]["run_s"] = out["run_s"]
    info["placement"] = {str(p): w for p, w in out["placement"].items()}
    info["recovery"] = {"recoveries": out["recoveries"], "max_restarts": max_restarts,
                        "checkpoint": None if ck is None else ck.path,
                        "resumed_from_epoch": out["resumed_from"],
                        "epochs_saved": None if ck is None else ck.latest()}
    if check:
        info["serial_check"] = check
    return SSGDResult(out["W"], out["H"], history, info, out["timeline"])


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
    from ._serial import run_serial

    s = prepare(data, nparts, partition_file=partition_file, **options)
    t0 = time.perf_counter()
    out = run_serial(s)
    info = sections(s, out["history"], W=out["W"], H=out["H"], command=command)
    info["timing"]["run_s"] = time.perf_counter() - t0
    return SSGDResult(out["W"], out["H"], out["history"], info)


def plan(data, nparts: int, *, partition_file=None, command=None, **options) -> dict:
    """The communication plan of one epoch (section VI metrics), without a cluster.

    Returns the JSON report: ``plan`` (tot/max/sum-max/max-max vol and msgs per epoch,
    in rows of H; ``words_per_unit`` = F), ``partition``, ``timing``; plus ``run_plan``
    (all epochs) and ``eval_plan`` (test-error messages) when they apply.

    Examples
    --------
    >>> from daskhpc import datasets
    >>> rep = plan(datasets.ratings(), 2, strategy="dsgd", partition="random")
    >>> rep["plan"]["tot_vol"], rep["plan"]["tot_msgs"]
    (19448, 4)
    """
    from daskhpc.report import new_report

    options.setdefault("eval_every", None)
    s = prepare(data, nparts, partition_file=partition_file, **options)
    info = sections(s, None, command=command)
    return new_report("ssgd", command=info.pop("command"), **info)


def sections(s: Setup, history, W=None, H=None, command=None) -> dict:
    """Report sections shared by ``plan``, ``serial_fit`` and ``fit``."""
    o, a = s.options, s.assignment
    rp = s.runplan
    out = {"command": command, "input": dict(s.ratings.source) or
           {"shape": list(s.ratings.shape), "nnz": s.ratings.nnz},
           "parts": s.K, "strategy": o.strategy, "strata": o.strata, "rank": o.rank,
           "epochs": o.epochs, "seed": o.seed, "partition_method": a.method}
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
    if W is not None:
        t = s.train
        e = t.vals - np.einsum("if,if->i", W[t.rows], H[t.cols])
        reg = s.options.reg
        q["final_objective"] = float(0.5 * np.sum(e * e + reg * (
            np.einsum("if,if->i", W[t.rows], W[t.rows]) +
            np.einsum("if,if->i", H[t.cols], H[t.cols]))))
        q["final_train_rmse"] = float(np.sqrt(np.mean(e * e)))
    if s.test.nnz:
        mu = s.train.mean()
        q["global_mean_rmse"] = float(np.sqrt(np.mean((s.test.vals - mu) ** 2)))
        if rm:
            q["final_test_rmse"] = rm[-1]
            q["improvement_over_mean"] = 1.0 - rm[-1] / q["global_mean_rmse"]
    return q


def _cross(plan, owner) -> int:
    """Planned bytes of the messages between parts on different workers (the rest never
    leave their worker)."""
    owner = np.asarray([str(w) for w in owner])
    cross = owner[plan.src] != owner[plan.dst]
    return int(plan.volume[cross].sum()) * plan.unit_bytes


def _attribute_bytes(s: Setup, history, ledger, owner) -> list[dict]:
    """Planned (between workers) and measured wire bytes of each epoch's sends."""
    from ._driver import STEP

    K, E = s.K, s.E
    plan = s.runplan.run_plan()
    owner = np.asarray([str(w) for w in owner])
    cross = owner[plan.src] != owner[plan.dst]
    planned = np.zeros(E, np.int64)
    np.add.at(planned, plan.phase[cross] // K, plan.volume[cross] * plan.unit_bytes)
    measured = np.zeros(E, np.float64)
    for entry in ledger.entries:
        total = sum(entry["keys"].values()) or 1
        for key, nbytes in entry["keys"].items():
            key = tuple(key) if isinstance(key, list) else key
            if isinstance(key, tuple) and str(key[0]).startswith(STEP):
                measured[int(key[2])] += entry["bytes"] * nbytes / total
    out = []
    for h, p, m in zip(history, planned, measured):
        out.append({**h, "planned_bytes": int(p), "measured_bytes": int(round(m))})
    return out
