"""Communication plans: who sends which units to whom in which phase, and what it costs.

A :class:`Plan` holds the messages and the papers' metrics; :class:`Program` is a
bulk-synchronous program of steps over parts, each with its Plan, run here by
:func:`run_local` and on a cluster by ``daskhpc.runtime``; :class:`CostModel` prices a
step on a named network (:func:`network_model`).

No dask here: a Plan for K = 1024 parts is computed and reported without a cluster.

Examples
--------
>>> from daskhpc.comm import Plan
>>> p = Plan.from_messages(2, [(0, 0, 1, [3, 4]), (1, 1, 0, [3])], words_per_unit=16)
>>> p.report()["tot_vol"], p.report()["planned_bytes"]
(3, 384)
"""

from ._allreduce import AllreduceSchedule, tree_sum
from ._builders import expand_plan, fold_plan, row_volume
from ._cost import CostModel, StepCost, rank_layouts
from ._network import (NETWORKS, PROFILES, calibration_path, network_model, plan_network,
                       save_calibration, saved_calibrations)
from ._plan import Plan
from ._program import Context, PlanMismatch, Program, Step, run_local, run_local_history

__all__ = ["Plan", "CostModel", "StepCost", "rank_layouts", "network_model", "plan_network", "NETWORKS", "PROFILES",
           "calibration_path", "save_calibration", "saved_calibrations", "expand_plan", "fold_plan", "row_volume",
           "AllreduceSchedule", "tree_sum", "Program", "Step", "Context", "PlanMismatch",
           "run_local", "run_local_history"]
