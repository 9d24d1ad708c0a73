"""Run daskhpc graphs on a Dask cluster: connect, place, pin, measure.

- :func:`connect` starts (or joins) a cluster set up for pinned graphs;
  :func:`worker_addresses` lists its workers in a stable order, :func:`worker_info`
  what the scheduler knows of each.
- :class:`Placement` maps parts to workers and re-maps them when workers go.
- :func:`pinned_graph` / :func:`submit_pinned` build and submit graphs whose
  every task has a hard worker restriction.
- :class:`WorkerWatch` / :func:`gather_watching` notice a lost worker instead of
  hanging on its pinned tasks, :func:`replace_lost` re-places its parts, and
  :class:`CheckpointDir` holds the per-step checkpoints a run resumes from.
- :class:`HoldingPlugin` is the engine under scheduler plugins that hold tasks back
  until a pure policy releases them (SSGD's stratum order, SpGEMM's batch admission).
- :func:`low_latency` unbatches the scheduler <-> worker control messages for the
  duration of a run of short dependent tasks.
- :func:`wait_for_cluster` waits (bounded) for the workers a growing cluster was scaled
  to (:class:`WorkersMissing` when they do not come).
- :class:`TransferLedger` measures the bytes and messages that moved between
  workers; :func:`calibrate` fits the alpha-beta message cost of the cluster;
  :func:`network_for` the cost model a run is predicted on (:func:`measure_network`
  calibrates the cluster, between hosts), :func:`placed_hosts` where its parts sit.
- The workflow frame: :func:`run_job` runs a :class:`Job` (a workflow's dask-free pieces:
  a :class:`~daskhpc.comm.Program` or an attempt-graph builder, per-part data, history
  rows) with placement, part data kept on workers (:class:`PartStore`; built there from
  a collection: :func:`run_on_parts`), attempts with lost-worker recovery, checkpoints,
  unit reports (:func:`send_report`), progress, and measured-vs-planned bytes; :class:`ProgramRunner` is the Program engine under it.
  :func:`run_phases` runs a run of several jobs (:class:`Phase`: SpGEMM's symbolic step,
  then its batches) with one checkpoint, part store, dashboard run and restart budget.

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
                                      connected,
                                      connect, free_dashboard_address, scheduler_file_security,
                                      worker_addresses, worker_info)
from daskhpc.runtime._fault import (WorkerLost, WorkerWatch, gather_direct, gather_watching,
                                    host_timeout, register_once, release_futures,
                                    replace_lost, run_on_workers)
from daskhpc.runtime._engine import ProgramRunner, step_of_key
from daskhpc.runtime._exchange import Exchange
from daskhpc.runtime._phases import (Phase, PhaseContext, run_job, run_on_parts,
                                     run_phases)
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

__all__ = [
    "Attempt",
    "Call",
    "RunOptions",
    "Workflow",
    "option",
    "AttemptGraph",
    "CLUSTER_CONFIG",
    "CheckpointDir",
    "CheckpointWarning",
    "Diverged",
    "Exchange",
    "GaveUp",
    "GraphJob",
    "HoldingPlugin",
    "Job",
    "KernelsReport",
    "NoScheduler",
    "Outcome",
    "PARKED",
    "PartStore",
    "Phase",
    "PhaseContext",
    "Placement",
    "ProgramRunner",
    "ReportBatch",
    "ReportInbox",
    "TransferLedger",
    "WorkerLost",
    "WorkerWatch",
    "WorkersMissing",
    "array_digest",
    "calibrate",
    "calibrate_exchange",
    "cluster_name",
    "measure_network",
    "network_for",
    "placed_hosts",
    "worker_hosts",
    "call",
    "check_dashboard_address",
    "connect",
    "connected",
    "free_dashboard_address",
    "exchange_mode",
    "gather_direct",
    "gather_watching",
    "host_timeout",
    "install",
    "load_arrays",
    "logged_transfers",
    "low_latency",
    "pinned_graph",
    "prepare_kernels",
    "progress",
    "register_once",
    "release_futures",
    "replace_lost",
    "run_job",
    "run_on_parts",
    "run_on_workers",
    "run_phases",
    "save_arrays",
    "scheduler_file_security",
    "send_report",
    "step_file",
    "step_of_key",
    "submit_pinned",
    "take",
    "wait_for_cluster",
    "worker_addresses",
    "worker_info",
]
