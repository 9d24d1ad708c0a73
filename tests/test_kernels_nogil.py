"""Every numba kernel releases the GIL: a worker busy in one for a minute still answers
its scheduler's heartbeats (a run counts a worker silent for
``daskhpc.runtime.host-timeout`` seconds as lost) and still moves its messages."""

from __future__ import annotations

import importlib
import pkgutil

import numba.core.registry

import daskhpc


def kernels():
    for info in pkgutil.walk_packages(daskhpc.__path__, "daskhpc."):
        if ".testing" in info.name:
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if (isinstance(obj, numba.core.registry.CPUDispatcher)
                    and obj.py_func.__module__ == module.__name__):
                yield f"{module.__name__}.{name}", obj


def test_every_kernel_releases_the_gil():
    found = dict(kernels())
    assert len(found) > 80 and "daskhpc.cpals._kernels.mttkrp_rows" in found
    holding = sorted(n for n, k in found.items() if not k.targetoptions.get("nogil"))
    assert not holding, holding
