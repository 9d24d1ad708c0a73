"""Shared fixtures: where the real data lives, and the validated clusters every test folder
uses (real worker processes over TCP, built by ``daskhpc.testing.validated_client``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import dask.config
import pytest

ROOT = Path(__file__).resolve().parents[1]

# A LocalCluster closes the nanny of a removed worker if no worker of its name has joined
# `lost-worker-timeout` (15 s) later. Tests that kill a worker count on its nanny's
# restart, which on a loaded machine can take longer: the cluster then closed the nanny
# as the restarted worker joined, and the test lost that worker too.
dask.config.set({"distributed.deploy.lost-worker-timeout": "300s"})
SHARED_DATA = Path(os.environ.get("DASKHPC_SHARED_DATA", ROOT.parent / "shared" / "data"))


#: Compiled in the background while the session starts (see :func:`_warm_kernels`).
WARM = ("allreduce", "cpals", "spgemm", "gcn", "linear", "ssgd")   # the order tests/ meets them


@pytest.fixture(scope="session", autouse=True)
def _warm_kernels():
    """Fill numba's cache of a fresh install in one background process at the start.

    A fresh install compiles every kernel at its first call (about 60 CPU s over the six
    workflows, one core at a time), inside whichever test calls it first, while the
    session is mostly waiting on clusters and console scripts with the second core idle.
    numba's cache is shared by processes (each entry written whole), so the tests then
    load what this process compiled. Tests of the cold path use their own
    ``NUMBA_CACHE_DIR`` and are not touched."""
    if os.environ.get("PYTEST_XDIST_WORKER", "gw0") != "gw0":
        yield
        return
    code = ("from daskhpc._numba import prepare_kernels\n"
            f"for w in {WARM!r}:\n    prepare_kernels(w)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    yield
    if proc.poll() is None:
        proc.kill()
    proc.wait()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA


def _session_client(n: int):
    from daskhpc.testing import validated_client

    with validated_client(n) as client:
        yield client


@pytest.fixture(scope="session")
def client2():
    """Two single-threaded workers shared by the session (SpGEMM, workflows)."""
    yield from _session_client(2)


@pytest.fixture(scope="session")
def client3():
    """Three single-threaded workers shared by every test that only submits work."""
    yield from _session_client(3)


@pytest.fixture(scope="session")
def client4():
    """Four single-threaded workers (one SSGD part per worker at K = 4)."""
    yield from _session_client(4)


@pytest.fixture(scope="session")
def dash_client():
    """Two workers for the dashboard pages (their own: the pages show one run)."""
    yield from _session_client(2)


#: bokeh's inline bundle opens with this line; a page that loads BokehJS from a CDN has a
#: ``<script src=".../bokeh-3.x.y.min.js">`` instead, and shows empty plots offline
BOKEHJS_INLINE = re.compile(r"/\* BEGIN bokeh(\.min)?\.js \*/")
BOKEH_CDN = re.compile(r"https?://cdn\.bokeh\.org[^\"' ]*|https?://[^\"' ]*/bokeh[^\"' ]*\.js")


@pytest.fixture(scope="session")
def bokeh_cdn():
    """The pattern of a BokehJS script loaded from a CDN (a fixture: a test module cannot
    import this conftest by name, other folders' conftests share it)."""
    return BOKEH_CDN


@pytest.fixture
def offline_plots():
    """A check that an HTML page draws its bokeh plots with the network off: BokehJS is in
    the page and nothing of bokeh's comes from a CDN."""
    def check(html: str, name: str) -> None:
        cdn = BOKEH_CDN.findall(html)
        assert not cdn, f"{name}: BokehJS from a CDN (empty plots offline): {cdn[:3]}"
        assert BOKEHJS_INLINE.search(html), f"{name}: no BokehJS in the page"

    return check


@pytest.fixture
def make_client():
    """Factory for a private cluster that a test may scale, kill workers of, or close."""
    from daskhpc.testing import validated_client

    clients = []

    def make(n_workers: int):
        clients.append(validated_client(n_workers))
        return clients[-1]

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def unit_tasks():
    """Direct-exchange tasks of one unit each (``daskhpc.runtime.units-per-task: 1``; the
    default runs a window's units in one task per worker): a task's key then names its
    unit, so :class:`~daskhpc.testing.KillOnce` can kill a worker at a chosen unit."""
    import dask

    with dask.config.set({"daskhpc.runtime.units-per-task": 1}):
        yield


@pytest.fixture
def workers3(client3):
    """The three worker addresses in stable order; checks nobody scaled the cluster."""
    from daskhpc.runtime import worker_addresses

    addresses = worker_addresses(client3)
    assert len(addresses) == 3
    return addresses


#: Tests kept out of the default run for the CI budget (20 minutes on 2 cores), by node
#: id prefix: each is a second mode, parameter or console path of a check that the
#: default run keeps in another form. ``pytest -m slow`` runs them.
CI_BUDGET = (
    "tests/dashboard/test_dashboard_ssgd.py::test_ssgd_overview_agrees_with_the_console",
    "tests/ssgd/test_ssgd_windows.py::test_the_scheduler_holds_a_window_of_epochs_not_the_"
    "run[direct]",
    "tests/ssgd/test_ssgd_fault.py::test_lost_worker_restarts_from_the_start_without_"
    "checkpoint[graph]",
    "tests/ssgd/test_ssgd_fault.py::test_lost_worker_resumes_from_the_last_checkpoint[graph]",
    "tests/ssgd/test_ssgd_fault.py::test_checkpoint_then_resume_with_more_epochs[graph]",
    "tests/cpals/test_cpals_plans.py::test_plan_equals_the_brute_force_count[mlsmall",
    "tests/test_cli_newcomer.py::test_joining_a_cluster_fails_fast_with_one_line[option3",
    "tests/test_cli_newcomer.py::test_joining_a_cluster_fails_fast_with_one_line[option4",
    "tests/test_cli_newcomer.py::test_joining_a_cluster_fails_fast_with_one_line[option6",
    "tests/test_cli_newcomer.py::test_joining_a_cluster_fails_fast_with_one_line[option7",
    "tests/ssgd/test_ssgd_names.py::test_partition_file_of_the_matrix_as_read_fits_once_"
    "empty_rows_are_dropped",
    "tests/runtime/test_runtime_frame.py::test_a_killed_worker_costs_nothing_but_time[True-"
    "graph]",
    "tests/runtime/test_runtime_frame.py::test_a_killed_worker_costs_nothing_but_time[False-"
    "graph]",
    "tests/gcn/test_gcn_plan.py::test_plan_equals_independent_count[slashdot",
    "tests/hypergraph/test_hypergraph_partition.py::test_mtkahypar_beats_random_on_real_"
    "matrices[graphs/email-Enron",
    # the second cut (CI took 1,418 s on a quiet machine with the list above)
    "tests/ssgd/test_ssgd_plans.py::test_ml_small_bounds",
    "tests/test_notebooks.py::test_notebook_runs_and_renders",
    "tests/mpi/test_mpi_launcher.py::test_killed_worker_rank_ends_the_job",
    "tests/mpi/test_mpi_security.py::test_cluster_refuses_clients_without_the_job_credentials",
    "tests/test_notebook_display.py::test_a_counted_bar_is_one_updated_display",
    "tests/test_cli_output.py::test_run_json_alone_on_stdout_with_a_human_summary_on_stderr",
    "tests/test_cli_newcomer.py::test_joining_a_cluster_fails_fast_with_one_line[option0",
    "tests/test_cli_newcomer.py::test_joining_a_cluster_fails_fast_with_one_line[option2",
    "tests/slurm/test_slurm_launcher.py::test_bad_option_ends_every_task_with_2_before_start_up",
    "tests/ssgd/test_ssgd_names.py::test_run_refuses_too_many_parts_and_empty_rows_before_"
    "the_cluster",
    "tests/test_predict.py::test_the_saved_model_gives_the_runs_figure_back[gcn]",
    "tests/runtime/test_runtime_memory.py::test_the_client_process_holds_no_more_after_many_"
    "epochs[graph]",
    "tests/linear/test_linear_cluster.py::test_cluster_equals_fit_local_bitwise_and_serial_"
    "within_1e_12[graph]",
    "tests/cpals/test_cpals_plans.py::test_plan_equals_the_brute_force_count[umls",
    "tests/gcn/test_gcn_cluster.py::test_distributed_equals_serial[4-hp-graph]",
    # the third (the second cut's .ci/run: 1,280 s, tests 1,186 s); the frame's recovery
    # stays checked by runtime/test_runtime_frame.py, gcn's and ssgd's kill tests
    "tests/ssgd/test_ssgd_fault.py::test_lost_worker_restarts_from_the_start_without_"
    "checkpoint[direct]",
    "tests/linear/test_linear_cluster.py::test_a_killed_worker_gives_the_same_model",
    "tests/cpals/test_cpals_cluster.py::test_a_killed_worker_gives_the_same_factors",
    "tests/test_cli_output.py::test_ctrl_c_while_the_cluster_starts_exits_130_without_"
    "tracebacks",
    # the fourth (.ci/run 1,294 s, tests 1,188 s, quiet): the hinge loss's second checks
    # (log keeps both) and the graph mode's P2P and DSGD epochs (H&C keeps the graph mode)
    "tests/linear/test_linear_training.py::test_test_accuracy_at_least_sklearn_sgdclassifier"
    "[hinge",
    "tests/linear/test_linear_training.py::test_sparse_allreduce_training_equals_dense[hinge",
    "tests/ssgd/test_ssgd_distributed.py::test_distributed_equals_serial_bit_for_bit[graph-"
    "p2p",
    "tests/ssgd/test_ssgd_distributed.py::test_distributed_equals_serial_bit_for_bit[graph-"
    "dsgd",
    # (spgemm's save path stays in tests/spgemm/test_spgemm_save.py's default tests)
    "tests/test_predict.py::test_spgemm_c_loads_in_a_fresh_process_equal_to_scipys_product",
)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.nodeid.startswith(CI_BUDGET):
            item.add_marker(pytest.mark.slow)
