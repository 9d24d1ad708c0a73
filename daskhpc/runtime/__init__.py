"""Run daskhpc graphs on a Dask cluster: connect, place, pin, measure.

- :func:`connect` starts (or joins) a cluster set up for pinned graphs;
  :func:`worker_addresses` lists its workers in a stable order.
- :class:`Placement` maps parts to workers; :func:`submit_pinned` submits graphs whose
  every task has a hard worker restriction.
- :class:`WorkerWatch` / :func:`gather_watching` notice a lost worker instead of hanging,
  :func:`replace_lost` re-places its parts, :class:`CheckpointDir` holds the checkpoints.
- :class:`HoldingPlugin` holds tasks back until a pure policy releases them.
- :class:`TransferLedger` measures the bytes between workers; :func:`calibrate` and
  :func:`measure_network` fit the cluster's alpha-beta message cost.
- The workflow frame: :func:`run_job` runs a :class:`Job` (a workflow's dask-free
  pieces) with placement, part data on the workers (:class:`PartStore`), lost-worker
  recovery, checkpoints, unit reports, progress and measured-vs-planned bytes;
  :func:`run_phases` runs several jobs as one run.

Examples
--------
>>> from operator import add
>>> from daskhpc.runtime import connect, Placement, submit_pinned, TransferLedger
>>> with connect(n_workers=2) as client:                          # doctest: +SKIP
...     pl = Placement.from_client(client, nparts=2)
...     tasks = {"x": (add, 1, 2), "y": (add, "x", 1)}
...     with TransferLedger(client) as led:
...         [y] = submit_pinned(client, tasks, {"x": pl.worker(0), "y": pl.worker(1)}, ["y"])
...         y.result()
...     led.report()
{'inter_worker_bytes': 180, 'inter_worker_bytes_sizeof': 28, 'inter_worker_messages': 1}
"""

from daskhpc.runtime._calibrate import calibrate, calibrate_exchange
from daskhpc.runtime._checkpoint import (CheckpointDir, CheckpointWarning, array_digest,
                                         load_arrays, save_arrays, step_file)
from daskhpc.runtime._connect import (CLUSTER_CONFIG, NoScheduler, check_dashboard_address,
                                      connect, connected, free_dashboard_address,
                                      scheduler_file_security, worker_addresses, worker_info)
from daskhpc.runtime._fault import (WorkerLost, WorkerWatch, gather_direct, gather_watching,
                                    host_timeout, register_once, release_futures,
                                    replace_lost, run_on_workers)
from daskhpc.runtime._engine import ProgramRunner, step_of_key
from daskhpc.runtime._exchange import Exchange
from daskhpc.runtime._phases import Phase, PhaseContext, run_job, run_on_parts, run_phases
from daskhpc._numba import KernelsReport, prepare_kernels
from daskhpc._workflows import Call, RunOptions, Workflow, option
from daskhpc.runtime._job import (Attempt, AttemptGraph, Diverged, GaveUp, GraphJob, Job, Outcome,
                                  exchange_mode)
from daskhpc.runtime._graph import pinned_graph, submit_pinned
from daskhpc.runtime._holding import PARKED, HoldingPlugin, call, install, take
from daskhpc.runtime._latency import low_latency
from daskhpc.runtime._network import (cluster_name, measure_network, network_for,
                                      placed_hosts, worker_hosts)
from daskhpc.runtime._ledger import TransferLedger, logged_transfers
from daskhpc.runtime._placement import Placement
from daskhpc.runtime._progress import progress
from daskhpc.runtime._reports import ReportBatch, ReportInbox, send_report
from daskhpc.runtime._scaling import WorkersMissing, wait_for_cluster
from daskhpc.runtime._store import PartStore

__all__ = ["Attempt", "Call", "RunOptions", "Workflow", "option", "AttemptGraph",
           "CLUSTER_CONFIG", "CheckpointDir", "CheckpointWarning", "Diverged", "Exchange",
           "GaveUp", "GraphJob", "HoldingPlugin", "Job", "KernelsReport", "NoScheduler",
           "Outcome", "PARKED", "PartStore", "Phase", "PhaseContext", "Placement",
           "ProgramRunner", "ReportBatch", "ReportInbox", "TransferLedger", "WorkerLost",
           "WorkerWatch", "WorkersMissing", "array_digest", "calibrate",
           "calibrate_exchange", "cluster_name", "measure_network", "network_for",
           "placed_hosts", "worker_hosts", "call", "check_dashboard_address", "connect",
           "connected", "free_dashboard_address", "exchange_mode", "gather_direct",
           "gather_watching", "host_timeout", "install", "load_arrays", "logged_transfers",
           "low_latency", "pinned_graph", "prepare_kernels", "progress", "register_once",
           "release_futures", "replace_lost", "run_job", "run_on_parts", "run_on_workers",
           "run_phases", "save_arrays", "scheduler_file_security", "send_report",
           "step_file", "step_of_key", "submit_pinned", "take", "wait_for_cluster",
           "worker_addresses", "worker_info"]
