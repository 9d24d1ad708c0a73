"""The SpGEMM run's own facts in a frame checkpoint: b and Symbolic3D's numbers.

A restarted attempt or a resumed job must cut the batches exactly as the checkpoint's
batches were cut; the frame's manifest records units, this file records b.

Examples
--------
>>> stored_batches(ck)                        # doctest: +SKIP
{'batches': 4, 'symbolic': {...}}
"""

from __future__ import annotations

import json
import os

from daskhpc.errors import InputError

__all__ = ["stored_batches", "store_batches", "RUN_FILE"]

#: Run-wide facts next to the manifest: b and Symbolic3D's numbers (a restart or a
#: resumed job must use the b the checkpoint's batches were cut with).
RUN_FILE = "spgemm-run.json"


def stored_batches(ck) -> dict | None:
    """The run facts (``batches``, ``symbolic``) stored in checkpoint ``ck``, or None."""
    path = ck.extra(RUN_FILE)
    if not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            data = json.load(f)
        int(data["batches"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputError(f"{path}: unreadable spgemm checkpoint facts: {e}") from e
    return data


def store_batches(ck, nb: int, symbolic: dict) -> None:
    """Record b (and Symbolic3D's numbers) before the first batch runs: a job that dies
    before any batch is complete resumes with the same b."""
    ck.write_extra(RUN_FILE, {"batches": int(nb), "symbolic": symbolic})
