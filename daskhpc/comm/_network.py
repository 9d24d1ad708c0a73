"""Named networks: the cost models ``--network PROFILE`` selects.

* ``calibrated``: what ``daskhpc info --calibrate --save`` measured and kept, per cluster
  (``calibrated:NAME`` names one; plain ``calibrated`` takes the cluster a run is on
  when it was saved, else the last one saved);
* ``infiniband-100g``: a 100 Gbit/s InfiniBand (EDR, or HDR100) fabric as an MPI code sees
  it: alpha 1.5 us, beta 1 / 12.5 GB/s;
* ``ethernet-10g``: 10 Gbit/s Ethernet with TCP: alpha 30 us, beta 1 / 1.25 GB/s;
* ``default``: the loopback calibration of the development machine (:mod:`._cost`).

Where the figures come from, and what each profile assumes of a core: docs/cli.md,
"Networks". Saved calibrations live in ``daskhpc-calibration.yaml`` in Dask's configuration
directory, under ``daskhpc.comm.clusters``. No dask here.

Examples
--------
>>> m = network_model("ethernet-10g")
>>> m.alpha, round(1 / m.beta / 1e9, 2)
(3e-05, 1.25)
"""

from __future__ import annotations

import os

from daskhpc.errors import InputError

from ._cost import CostModel

PROFILES = {
    "infiniband-100g": CostModel(alpha=1.5e-6, beta=1 / 12.5e9, flop_s=1e-9,
                                 memory_beta=1e-10, duplex=True, name="infiniband-100g",
                                 dense_flop_s=1e-10),
    "ethernet-10g": CostModel(alpha=3.0e-5, beta=1 / 1.25e9, flop_s=1e-9,
                              memory_beta=1e-10, duplex=True, name="ethernet-10g",
                              dense_flop_s=1e-10),
}

PROFILE_SOURCES = {
    "infiniband-100g": "100 Gbit/s line rate (12.5 GB/s); MPI small-message latency of "
                       "1-2 us on EDR/HDR InfiniBand (OSU micro-benchmarks)",
    "ethernet-10g": "10 Gbit/s line rate (1.25 GB/s); MPI over TCP latency of 20-50 us "
                    "on 10 GbE (OSU micro-benchmarks)",
}

#: What ``--network`` takes (``calibrated:NAME`` too; ``run`` also ``calibrate``)
NETWORKS = ("calibrated", *PROFILES, "default")

FILE = "daskhpc-calibration.yaml"


def calibration_path() -> str:
    """Where ``daskhpc info --calibrate --save`` keeps its measurements."""
    folder = os.environ.get("DASK_CONFIG") or os.path.join(os.path.expanduser("~"),
                                                           ".config", "dask")
    return os.path.join(folder, FILE)


def saved_calibrations() -> dict:
    """``{"clusters": {name: entry}, "last": name}`` from :func:`calibration_path` (empty
    when nothing was saved)."""
    import yaml

    path = calibration_path()
    if not os.path.exists(path):
        return {"clusters": {}, "last": None}
    with open(path, encoding="utf-8") as f:
        comm = ((yaml.safe_load(f) or {}).get("daskhpc") or {}).get("comm") or {}
    clusters = dict(comm.get("clusters") or {})
    last = comm.get("cluster")
    if not clusters and "alpha" in comm:    # a file written before clusters had names
        clusters = {"unnamed": {"alpha": comm["alpha"], "beta": comm["beta"]}}
        last = "unnamed"
    return {"clusters": clusters, "last": last}


def save_calibration(name: str, entry: dict) -> str:
    """Keep ``entry`` (what ``measure_network`` returns) as cluster ``name``'s
    calibration beside the others; returns the path."""
    import yaml

    path = calibration_path()
    data: dict = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f) or {}
    comm = data.setdefault("daskhpc", {}).setdefault("comm", {})
    comm.setdefault("clusters", {})[str(name)] = entry
    comm["cluster"] = str(name)
    # the last calibration is also dask.config's daskhpc.comm (CostModel.from_config):
    # a Dask transfer's cost where it was timed, as that key has always held
    top = entry.get("transfer") or entry
    comm.update(alpha=float(top["alpha"]), beta=float(top["beta"]))
    for key in CostModel.RATES:
        if entry.get(key) is not None:
            comm[key.replace("_", "-")] = float(entry[key])
    if entry.get("exchange"):
        comm["exchange"] = entry["exchange"]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(data, f, sort_keys=False)
    return path


def plan_network(name: str | None) -> str:
    """The network ``plan`` predicts on: ``name``, else ``calibrated`` if a calibration was
    saved, else ``ethernet-10g`` (a cluster-free plan needs some network)."""
    if name is not None:
        return name
    return "calibrated" if saved_calibrations()["clusters"] else "ethernet-10g"


def network_model(name: str | None, cluster: str | None = None,
                  exchange: str | None = None) -> CostModel:
    """The :class:`CostModel` of network ``name``.

    Parameters
    ----------
    name : str or None
        A profile (``infiniband-100g``, ``ethernet-10g``), ``calibrated``,
        ``calibrated:NAME`` or ``default``; None: ``calibrated`` if anything was saved,
        else ``default``.
    cluster : str, optional
        The cluster a run is on (its saved name): ``calibrated`` prefers its entry.
    exchange : str, optional
        How the run's messages travel (``direct``, ``graph``): a calibration's alpha and
        beta of that mode where it timed one.

    Raises
    ------
    InputError
        An unknown name, or ``calibrated`` with nothing saved.

    Examples
    --------
    >>> network_model("infiniband-100g").alpha
    1.5e-06
    >>> network_model("token-ring")
    Traceback (most recent call last):
    ...
    daskhpc.errors.InputError: unknown --network 'token-ring'; choose one of calibrated, \
calibrated:NAME, infiniband-100g, ethernet-10g, default (run also: calibrate)
    """
    if name in PROFILES:
        return PROFILES[name]
    if name == "default":
        return CostModel()
    if name is None or name == "calibrated" or str(name).startswith("calibrated:"):
        saved = saved_calibrations()
        clusters = saved["clusters"]
        wanted = str(name).partition(":")[2] if name else ""
        if wanted and wanted not in clusters:
            raise InputError(f"--network {name}: no calibration saved as {wanted!r} in "
                             f"{calibration_path()} (saved: {', '.join(clusters) or 'none'})")
        key = wanted or (cluster if cluster in clusters else saved["last"])
        if key is None or key not in clusters:
            if name is None:
                return CostModel()
            raise InputError(f"--network calibrated: nothing saved in {calibration_path()}; "
                             "measure the cluster with daskhpc info --calibrate --save, or "
                             "choose a profile (infiniband-100g, ethernet-10g)")
        return model_of(clusters[key], f"calibrated:{key}", exchange)
    raise InputError(f"unknown --network {name!r}; choose one of calibrated, "
                     f"calibrated:NAME, {', '.join(PROFILES)}, default (run also: calibrate)")


def model_of(entry: dict, name: str, exchange: str | None = None) -> CostModel:
    """The CostModel of a saved calibration ``entry`` (``exchange``: that mode's alpha and
    beta where it has them). Without ``duplex`` a link is full duplex, as switched ports
    and ``tc``-shaped links are."""
    fit = (entry.get("exchange") or {}).get(exchange) or entry
    return CostModel(alpha=float(fit["alpha"]), beta=float(fit["beta"]),
                     memory_beta=float(entry.get("memory_beta", 0.0)),
                     duplex=bool(entry.get("duplex", True)), name=name,
                     **{k: float(entry.get(k) or getattr(CostModel, k)) for k in CostModel.RATES})
