"""Registry of workflows the CLI can plan, run and demo.

A workflow plugs in with a module that defines::

    NAME = "ssgd"
    HELP = "one line"
    def add_arguments(parser, mode): ...      # mode is "plan" or "run"
    def plan(args) -> dict: ...               # JSON report, no cluster
    def run(args, client) -> dict: ...        # JSON report, on a connected client
    def demo(client) -> dict: ...             # bundled data, small; returns a report

Built-in workflows are listed below as they land; third-party ones register through the
``daskhpc.workflows`` entry-point group (value: the module path).
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

BUILTIN: dict[str, str] = {
    "ssgd": "daskhpc.ssgd._cli",
    "spgemm": "daskhpc.spgemm._cli",
}


def available() -> dict[str, str]:
    """name -> module path of every workflow that can be loaded."""
    found = dict(BUILTIN)
    for ep in entry_points(group="daskhpc.workflows"):
        found.setdefault(ep.name, ep.value)
    return found


def load(name: str):
    """Import the CLI module of workflow ``name``."""
    from daskhpc.errors import InputError

    mods = available()
    if name not in mods:
        known = ", ".join(sorted(mods)) or "none yet"
        raise InputError(f"unknown workflow {name!r} (available: {known})")
    return importlib.import_module(mods[name])
