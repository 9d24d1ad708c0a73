"""The workflows the CLI, ``daskhpc demo``, the mpi launcher and the dashboard know.

Every workflow, ours too, registers with one line in its distribution's
``pyproject.toml``::

    [project.entry-points."daskhpc.workflows"]
    cpals = "daskhpc.cpals._cli"

The value is the workflow's registration module, which defines::

    NAME = "cpals"
    HELP = "one line"
    def add_arguments(parser, mode): ...      # mode is "plan" or "run"
    def plan(args) -> dict: ...               # JSON report, no cluster
    def run(args, client) -> dict: ...        # JSON report, on a connected client
    def demo(client) -> dict: ...             # bundled data, small; returns a report
    CHECKPOINTS = True                        # optional: --checkpoint/--resume on `run`
    MPI_TEST_ARGS = lambda: [...]             # optional: a few-second run for the mpi tests
    DASHBOARD = "daskhpc.cpals._dashboard"    # optional: module with PANELS (its pages)

Adding a workflow touches nothing outside its own package (docs/architecture.md,
"Writing a workflow").
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

GROUP = "daskhpc.workflows"


def available() -> dict[str, str]:
    """name -> registration module of every registered workflow."""
    return {ep.name: ep.value for ep in entry_points(group=GROUP)}


def load(name: str):
    """Import the registration module of workflow ``name``."""
    from daskhpc.errors import InputError

    mods = available()
    if name not in mods:
        known = ", ".join(sorted(mods)) or "none (is daskhpc installed? pip install .)"
        raise InputError(f"unknown workflow {name!r} (available: {known})")
    return importlib.import_module(mods[name])
