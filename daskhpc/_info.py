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


def collect_info() -> dict:
    from daskhpc import _workflows
    from daskhpc._version import __version__

    # the mpich wheel's mpiexec next to this Python (the one mpi4py links against)
    mpiexec = os.path.join(sys.prefix, "bin", "mpiexec")
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
                "mpiexec": mpiexec if os.path.exists(mpiexec) else shutil.which("mpiexec")},
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


def calibrate_and_save(client, save: bool = False, name: str | None = None) -> dict:
    """Measure alpha, beta and the kernel rate on ``client``'s cluster (between two hosts
    where it has two); with ``save``, keep them as cluster ``name`` (default: ``local`` or
    the scheduler's address) for ``--network calibrated``."""
    from daskhpc.comm import CostModel, save_calibration
    from daskhpc.runtime import cluster_name, measure_network

    out = measure_network(client)
    out["cluster"] = name or cluster_name(client)
    if save:
        entry = {k: out[k] for k in ("alpha", "beta", *CostModel.RATES, "ring_alpha",
                                     "ring_beta", "duplex", "duplex_ratio", "exchange",
                                     "transfer", "workers", "hosts") if k in out}
        out["saved_to"] = save_calibration(out["cluster"], entry)
    return out
