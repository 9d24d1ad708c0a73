"""The public namespace is pinned, and the no-dask layers stay free of dask."""

import subprocess
import sys

import daskhpc
import daskhpc.comm
import daskhpc.hypergraph


def test_hypergraph_namespace():
    assert set(daskhpc.hypergraph.__all__) == {
        "Hypergraph", "Partition", "partition", "partitioners", "register_partitioner",
        "OBJECTIVES", "column_net", "row_net", "tensor_coarse", "tensor_fine", "stochastic",
        "symmetric_graph", "assign_factor_rows", "fine_grain_volume", "recursive_bisection",
        "metrics", "connectivity", "connectivity_sets", "net_parts", "part_weights", "imbalance",
        "max_part_weight", "balance_report", "read_part_file", "read_pair_file",
        "write_pair_file", "choose_partitioner", "refine"}
    for name in daskhpc.hypergraph.__all__:
        assert hasattr(daskhpc.hypergraph, name)


def test_comm_namespace():
    assert set(daskhpc.comm.__all__) == {
        "Plan", "CostModel", "expand_plan", "fold_plan", "row_volume", "AllreduceSchedule",
        "tree_sum", "Program", "Step", "Context", "PlanMismatch", "run_local",
        "run_local_history", "StepCost", "rank_layouts", "network_model", "plan_network", "NETWORKS", "PROFILES",
        "calibration_path", "save_calibration", "saved_calibrations"}


def test_top_level_lazy():
    assert {"io", "hypergraph", "comm", "runtime", "connect"} <= set(daskhpc.__all__)


def test_plan_and_partition_without_dask():
    code = (
        "import sys, numpy as np, scipy.sparse as sp\n"
        "import daskhpc, daskhpc.hypergraph as hg, daskhpc.comm as cm\n"
        "A = sp.random_array((50, 40), density=0.1, random_state=0, format='csr')\n"
        "p = hg.partition(hg.column_net(A), 4, 'mtkahypar'); p.metrics()\n"
        "hg.partition(hg.column_net(A), 4, 'kahypar', objective='soed')\n"
        "cm.Plan.from_messages(2, [(0, 0, 1, [1])]).report()\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')]\n"
        "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True)
