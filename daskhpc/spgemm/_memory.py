"""Peak memory of worker processes during a run (Linux ``/proc``), and size parsing.

``VmHWM`` after a run minus the resident size after ``clear_refs`` before it is the most
memory the run added to the process: everything, not only what Symbolic3D models.
"""

from __future__ import annotations

import re

from daskhpc.errors import InputError

_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_bytes(text) -> int:
    """``"512MB"``, ``"2GiB"``, ``1e9`` -> bytes."""
    if isinstance(text, (int, float)):
        return int(text)
    m = re.fullmatch(r"\s*([0-9.]+(?:e[0-9]+)?)\s*([a-zA-Z]*)\s*", str(text))
    if not m or m[2].lower() not in _UNITS:
        raise InputError(f"--memory-per-worker must look like 512MB or 2GiB, not {text!r}")
    return int(float(m[1]) * _UNITS[m[2].lower()])


def _status(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def reset_peak() -> int | None:
    """Reset this process's peak RSS; return the current RSS (bytes) or None."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return None
    return _status("VmRSS")


def read_peak() -> int | None:
    """Peak RSS (bytes) since the last :func:`reset_peak`, or None."""
    return _status("VmHWM")


def warm_up(semiring: int = 0, masked: bool = False) -> None:
    """Load every numba kernel once (``semiring``'s, a mask's), so compiling is not run memory."""
    import numpy as np
    import scipy.sparse as sp

    from daskhpc.spgemm import _consumers, _local
    from daskhpc.spgemm._block import CscBlock

    a = CscBlock.from_scipy(sp.random(8, 8, density=0.5, random_state=0))
    for acc in ("dense", "hash"):
        c = _local.local_multiply(a, a, accumulator=acc)
        _local.merge([c, c], sort=True, accumulator=acc)
        _local.fused_multiply([a, a], [a, a], accumulator=acc)
        _local.local_symbolic(a, a, accumulator=acc)
    _local.local_symbolic(a, a, mask=a)          # C<M>'s masked LocalSymbolic
    if semiring or masked:
        for acc in ("dense", "hash"):
            c2 = _local.local_multiply(a, a, accumulator=acc, semiring=semiring,
                                       mask=a if masked else None)
            _local.merge([c2, c2], accumulator=acc, semiring=semiring)
    _local.topk(c, 2)
    _local.select_columns(c, np.arange(2))
    _consumers._masked_dot(c.ptr, c.idx, c.val, a.ptr, a.idx, a.val, 8)
    _consumers._count_sum(c.val)
    _consumers.assemble([(c, np.arange(8), np.arange(8))], (8, 8))
    from daskhpc.spgemm._collect import _split

    _split((c, np.arange(8), np.arange(8)), np.array([0, 4, 8]), np.array([0, 8]))
