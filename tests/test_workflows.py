"""Every registered workflow, through the real CLI, writes the docs/cli.md report:
the fixed head, top-level plan totals, measured bytes next to planned, timing, quality and
the serial check."""

from __future__ import annotations

import json

import pytest

from daskhpc import _workflows, cli

PLAN_KEYS = {"tot_vol", "max_vol", "sum_max_vol", "tot_msgs", "max_msgs", "sum_max_msgs",
             "max_max_msgs", "phases", "unit", "words_per_unit"}


def small_run(name: str) -> list[str]:
    mod = _workflows.load(name)
    args = getattr(mod, "MPI_TEST_ARGS", None)
    if args is None:
        pytest.skip(f"workflow {name!r} declares no small run (MPI_TEST_ARGS)")
    return list(args() if callable(args) else args)


@pytest.mark.parametrize("name", sorted(_workflows.available()))
def test_run_report_carries_the_contract(name, tmp_path):
    out = tmp_path / "r.json"
    args = small_run(name)
    assert cli.main(["run", name, *args, "--workers", "3", "--json", str(out)]) == 0
    rep = json.loads(out.read_text())
    assert rep["workflow"] == name and rep["version"] and rep["command"]
    assert {"input", "parts", "plan", "measured", "timing", "quality"} <= set(rep)
    assert PLAN_KEYS <= set(rep["plan"]), sorted(PLAN_KEYS - set(rep["plan"]))
    m = rep["measured"]
    assert {"inter_worker_bytes", "inter_worker_messages", "planned_bytes"} <= set(m)
    assert m["inter_worker_bytes"] >= m["planned_bytes"] >= 0
    assert {"run_s", "per_iteration_s"} <= set(rep["timing"])
    if "--check-serial" in args:
        assert rep["serial_check"]["done"] and rep["serial_check"]["identical"] is True


@pytest.mark.parametrize("name", sorted(_workflows.available()))
def test_registration_module_has_the_hooks(name):
    mod = _workflows.load(name)
    assert mod.NAME == name and mod.HELP
    for hook in ("add_arguments", "plan", "run", "demo"):
        assert callable(getattr(mod, hook, None)), f"{name}: no {hook}()"
