"""The benchmark scripts' one way to hand over their JSON: to a file, or stdout for ``-``."""

from __future__ import annotations

import json


def write_json(out: dict, path: str) -> None:
    """``out`` as indented JSON to ``path`` (``-``: stdout)."""
    text = json.dumps(out, indent=1)
    if path == "-":
        print(text)
    else:
        with open(path, "w") as f:
            f.write(text)
