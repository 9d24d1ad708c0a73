"""daskhpc.yaml in dask.config, overridable from the environment."""

from __future__ import annotations

import subprocess
import sys

import dask.config
import pytest

from daskhpc import _config


def test_defaults_loaded():
    assert _config.get("runtime.threads-per-worker") == 1
    assert _config.get("daskhpc.runtime.protocol") == "tcp"
    # the packaged default; a calibration the user saved (daskhpc info --calibrate
    # --save, in $DASK_CONFIG) wins over it, as it should
    import pathlib

    import yaml

    import daskhpc

    packaged = yaml.safe_load((pathlib.Path(daskhpc.__file__).parent / "daskhpc.yaml")
                              .read_text())
    assert packaged["daskhpc"]["comm"]["alpha"] == 8.0e-4
    assert _config.get("comm.alpha") > 0
    assert dask.config.get("daskhpc.partitioner.epsilon") == 0.03


def test_missing_key():
    with pytest.raises(KeyError):
        _config.get("runtime.no-such-key")
    assert _config.get("runtime.no-such-key", None) is None


def test_dask_config_set_wins():
    with dask.config.set({"daskhpc.runtime.workers": 7}):
        assert _config.get("runtime.workers") == 7


def test_defaults_outlive_a_config_block_open_at_import():
    """dask.config.set restores the config it found when its block closes: settings of
    daskhpc loaded inside it (the first import) would go with it."""
    code = ("import dask\n"
            "with dask.config.set({'daskhpc.runtime.transport': 'dask'}):\n"
            "    from daskhpc import _config\n"
            "    inside = _config.get('runtime.transport')\n"
            "print(inside, _config.get('runtime.transport'),"
            " _config.get('runtime.dashboard-address'))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["dask", "socket", "localhost:8787"]


def test_environment_variable_overrides_default():
    code = "from daskhpc import _config; print(_config.get('runtime.threads-per-worker'))"
    env = {"DASK_DASKHPC__RUNTIME__THREADS_PER_WORKER": "4", "PATH": ""}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.strip() == "4"


def test_hypergraph_and_comm_do_not_need_dask():
    # _config imports dask; the layers below runtime must not import it.
    import ast
    import pathlib

    import daskhpc

    root = pathlib.Path(daskhpc.__file__).parent
    for sub in ("hypergraph", "comm"):
        for path in (root / sub).glob("*.py"):
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module:
                    names = [node.module]
                elif isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                else:
                    continue
                for name in names:
                    top = name.split(".")
                    assert top[0] not in ("dask", "distributed"), (path, name)
                    assert top[:2] not in (["daskhpc", "_config"], ["daskhpc", "runtime"]), (
                        path,
                        name,
                    )
