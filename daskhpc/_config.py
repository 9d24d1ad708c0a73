"""daskhpc settings in ``dask.config``: importing this module adds ``daskhpc/daskhpc.yaml`` to
Dask's defaults, so every key can be overridden like any Dask setting (an environment
variable such as ``DASK_DASKHPC__RUNTIME__WORKERS=3`` reaches every rank under dask-mpi).
Only ``daskhpc.runtime`` and what is above it import it: hypergraph and comm need no dask."""

from __future__ import annotations

import os
from typing import Any

import dask.config
import yaml

_YAML = os.path.join(os.path.dirname(__file__), "daskhpc.yaml")

with open(_YAML) as f:
    _defaults = yaml.safe_load(f)

# update_defaults keeps what the environment or a user YAML file set: DASK_DASKHPC__...
# variables win without dask.config.refresh(), which would also wipe the user's
# dask.config.set(...) calls made before this import.
dask.config.update_defaults(_defaults)

_no_default = object()


def get(key: str, default: Any = _no_default) -> Any:
    """A daskhpc setting: ``key`` below ``daskhpc`` (the prefix may be given), its current
    value; a missing key raises KeyError unless ``default`` is given."""
    if not key.startswith("daskhpc."):
        key = "daskhpc." + key
    try:
        return dask.config.get(key)
    except KeyError:
        # not in the live config: a ``dask.config.set({"daskhpc...": ...})`` block that
        # was open when this module loaded takes the defaults with it when it closes
        try:
            return dask.config.get(key, config=_defaults)
        except KeyError:
            if default is _no_default:
                raise
            return default


def progress_setting() -> bool | None:
    """``daskhpc.runtime.progress`` as True (show, lines off a terminal), False (never) or None
    (unset: on a terminal only); strings such as ``"off"`` or ``"1"`` count as their meaning."""
    value = get("runtime.progress", None)
    if value is None or isinstance(value, bool):
        return value
    text = str(value).lower()
    if text in ("false", "off", "0", "no"):
        return False
    return True if text in ("true", "on", "1", "yes") else None
