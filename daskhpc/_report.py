"""The JSON report every command writes with ``--json`` (contract: ../shared/CLI.md).

Keys that do not apply are omitted, never filled with zeros; numpy scalars are converted.
"""

from __future__ import annotations

import json
import shlex
import sys

import numpy as np

from daskhpc import __version__


def new_report(workflow: str, command: list[str] | None = None, **sections) -> dict:
    """A report with the fixed head (workflow, version, command) and the given sections."""
    cmd = command if command is not None else ["daskhpc", *sys.argv[1:]]
    report = {"workflow": workflow, "version": __version__, "command": shlex.join(cmd)}
    report.update({k: v for k, v in sections.items() if v is not None})
    return report


def _plain(obj):
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _plain(obj.tolist())
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    return obj


def to_json(report: dict) -> str:
    return json.dumps(_plain(report), indent=2)


def write_report(report: dict, path) -> None:
    """Write ``report`` as JSON to ``path`` (``-`` for standard output)."""
    text = to_json(report) + "\n"
    if str(path) == "-":
        sys.stdout.write(text)
        return
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
