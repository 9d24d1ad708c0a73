"""Every registered workflow, through the real CLI, writes the docs/cli.md report:
the fixed head, top-level plan totals, measured bytes next to planned, timing, quality and
the serial check."""

from __future__ import annotations

import dataclasses
import json

import pytest

from daskhpc import _workflows, cli

PLAN_KEYS = {"tot_vol", "max_vol", "sum_max_vol", "tot_msgs", "max_msgs", "sum_max_msgs",
             "max_max_msgs", "phases", "unit", "words_per_unit"}


def small_run(name: str) -> list[str]:
    args = _workflows.load(name).small_run()
    if not args:
        pytest.skip(f"workflow {name!r} declares no small run (Workflow.small_run)")
    return list(args)


@pytest.mark.parametrize("name", sorted(_workflows.available()))
def test_run_report_carries_the_contract(name, tmp_path, client3):
    out = tmp_path / "r.json"
    args = small_run(name)
    # the session's cluster, joined as a job's client joins its own (no new workers to
    # start per workflow: the CI budget)
    address = client3.scheduler.address
    assert cli.main(["run", name, *args, "--scheduler-address", address,
                     "--json", str(out)]) == 0
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
def test_registration_names_a_workflow_with_the_hooks(name):
    wf = _workflows.load(name)
    assert isinstance(wf, _workflows.Workflow) and wf.name == name and wf.help
    for hook in ("add_arguments", "plan", "run", "demo", "check", "summary", "small_run"):
        assert callable(getattr(wf, hook, None)), f"{name}: no {hook}()"
    assert dataclasses.is_dataclass(wf.Options)


@pytest.mark.parametrize("name", sorted(_workflows.available()))
def test_run_options_are_declared_once(name):
    """A function that takes ``run: RunOptions`` takes none of its fields as a parameter
    of its own: such a parameter shadows the field, and the run never sees it
    (``spgemm.multiply(client=...)`` ran on the current client)."""
    import importlib
    import inspect

    package = _workflows.package_of(name)
    fields = {f.name for f in dataclasses.fields(_workflows.RunOptions)}
    mod = importlib.import_module(package)
    checked = 0
    for name in mod.__all__:
        f = getattr(mod, name)
        if not inspect.isfunction(f):
            continue
        params = inspect.signature(f).parameters
        if "RunOptions" not in str(getattr(params.get("run"), "annotation", "")):
            continue
        checked += 1
        assert not fields & set(params), (name, sorted(fields & set(params)))
    assert checked >= 1, f"{package}: no function takes run: RunOptions"
