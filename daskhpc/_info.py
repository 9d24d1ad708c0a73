"""`daskhpc info`: versions, partitioner backends, MPI, and the alpha-beta calibration."""

from __future__ import annotations

import importlib
import os
import platform
import shutil
import sys
from importlib.metadata import PackageNotFoundError, version

PACKAGES = ("dask", "distributed", "numpy", "scipy", "sparse", "numba", "mtkahypar",
            "kahypar", "bokeh", "mpi4py", "dask-mpi", "mpich")


def _version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def _importable(module: str) -> bool:
    try:
        importlib.import_module(module)
        return True
    except Exception:  # noqa: BLE001 - a broken native library counts as "not found"
        return False


def mpiexec_path() -> str | None:
    """The mpiexec of the ``mpich`` wheel next to this Python (the one mpi4py links against)."""
    candidate = os.path.join(sys.prefix, "bin", "mpiexec")
    return candidate if os.path.exists(candidate) else shutil.which("mpiexec")


def collect_info() -> dict:
    from daskhpc import _workflows
    from daskhpc._version import __version__

    return {
        "daskhpc": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "packages": {name: _version(name) for name in PACKAGES},
        "partitioners": {"mtkahypar": _importable("mtkahypar"),
                         "kahypar": _importable("kahypar"),
                         "random": True, "block": True, "graph": _importable("mtkahypar")},
        "mpi": {"mpi4py": _version("mpi4py") is not None,
                "dask_mpi": _version("dask-mpi") is not None,
                "mpiexec": mpiexec_path()},
        "workflows": sorted(_workflows.available()),
    }


def format_info(info: dict) -> str:
    lines = [f"daskhpc {info['daskhpc']} on Python {info['python']} ({info['platform']}, "
             f"{info['cpus']} cpus)", "", "packages:"]
    lines += [f"  {k:<12} {v or 'not installed'}" for k, v in info["packages"].items()]
    found = [k for k, ok in info["partitioners"].items() if ok]
    lines += ["", f"partitioners: {', '.join(found)}",
              f"mpi: mpi4py {'yes' if info['mpi']['mpi4py'] else 'no'}, dask-mpi "
              f"{'yes' if info['mpi']['dask_mpi'] else 'no'}, mpiexec "
              f"{info['mpi']['mpiexec'] or 'not found'}",
              f"workflows: {', '.join(info['workflows']) or 'none yet'}"]
    return "\n".join(lines)


def calibrate_and_save(client, save: bool = False) -> dict:
    """Measure alpha and beta on ``client``'s cluster; optionally persist them for dask.config."""
    from daskhpc.runtime import calibrate, calibrate_exchange, worker_addresses

    cal = calibrate(client)
    out = {"alpha": float(cal["alpha"]), "beta": float(cal["beta"]),
           "workers": len(worker_addresses(client))}
    # what a message costs a Program in each exchange mode (ping-pong inside a run)
    out["exchange"] = {mode: {k: float(v) for k, v in calibrate_exchange(client, mode).items()
                              if k in ("alpha", "beta")} for mode in ("graph", "direct")}
    if save:
        import yaml

        folder = os.path.join(os.path.expanduser("~"), ".config", "dask")
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, "daskhpc-calibration.yaml")
        with open(path, "w", encoding="utf-8") as f:
            yaml.safe_dump({"daskhpc": {"comm": {"alpha": out["alpha"], "beta": out["beta"],
                                                 "exchange": out["exchange"]}}}, f)
        out["saved_to"] = path
    return out
