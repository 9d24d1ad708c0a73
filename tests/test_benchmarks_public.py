"""The benchmark scripts use only the public API: no import in
workflows/benchmarks/*.py names a private module of daskhpc (a path component starting
with "_"), so what the project measures is what a user can call."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import pathlib

import pytest

BENCHMARKS = pathlib.Path(__file__).resolve().parents[1] / "workflows" / "benchmarks"
SCRIPTS = sorted(BENCHMARKS.glob("*.py"))


def private_imports(source: str) -> list[str]:
    """Every daskhpc module path with a private component that ``source`` imports
    (``import daskhpc._x``, ``from daskhpc.cpals._serial import f``, ``from daskhpc.spgemm
    import _memory``), also inside functions."""
    bad = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            paths = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            base = node.module or ""
            paths = [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for path in paths:
            parts = path.split(".")
            if parts[0] == "daskhpc" and any(p.startswith("_") for p in parts[1:]):
                bad.append(path)
    return bad


def test_the_check_sees_private_imports():
    src = ("import daskhpc.cpals._serial\n"
           "from daskhpc.spgemm import _memory, multiply\n"
           "def f():\n    from daskhpc.gcn._setup import prepare\n"
           "from daskhpc.cpals import serial_fit\nimport numpy._core\n")
    assert private_imports(src) == ["daskhpc.cpals._serial", "daskhpc.spgemm._memory",
                                    "daskhpc.gcn._setup.prepare"]


def test_there_are_benchmarks():
    assert len(SCRIPTS) >= 8, SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_benchmark_imports_only_public_names(script):
    bad = private_imports(script.read_text())
    assert not bad, f"{script.name} imports private modules of daskhpc: {bad}"


def imported_names(source: str) -> list[tuple[str, str]]:
    """(module, name) of every ``from daskhpc... import name`` in ``source``."""
    return [(node.module, a.name) for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.ImportFrom) and not node.level and node.module
            and node.module.split(".")[0] == "daskhpc" for a in node.names]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_benchmark_names_are_exported(script):
    """Public means listed: every name a benchmark takes from a daskhpc package is in
    that package's ``__all__`` (or is a public submodule of it)."""
    bad = []
    for module, name in imported_names(script.read_text()):
        if private_imports(f"from {module} import {name}"):
            continue                                  # the test above reports it
        mod = importlib.import_module(module)
        if name not in getattr(mod, "__all__", ()) and \
                importlib.util.find_spec(f"{module}.{name}") is None:
            bad.append(f"{module}.{name}")
    assert not bad, f"{script.name} imports names not in their package's __all__: {bad}"
