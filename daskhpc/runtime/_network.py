"""The network a run is priced on: measured on its cluster, or a named profile."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from daskhpc.comm import CostModel, network_model

if TYPE_CHECKING:
    from distributed import Client


def worker_hosts(client: Client, workers=None) -> list[str]:
    """The host (IP address or name, as the scheduler sees it) of every worker."""
    from daskhpc.runtime._connect import worker_addresses

    workers = list(workers if workers is not None else worker_addresses(client))
    info = client.sync(client.scheduler.identity, n_workers=-1)["workers"]
    return [str(info.get(w, {}).get("host") or _host_of(w)) for w in workers]


def placed_hosts(client: Client, placement) -> tuple[list[int], list[str] | None]:
    """``(owner, hosts)`` of a :class:`~daskhpc.runtime.Placement` as
    :meth:`daskhpc.comm.CostModel.step` takes them: the worker index of every part, the host
    of every worker (None on one host: every worker its own link)."""
    workers = list(placement.workers)
    index = {w: i for i, w in enumerate(workers)}
    owner = [index[placement.worker(p)] for p in range(placement.nparts)]
    hosts = worker_hosts(client, workers)
    return owner, (hosts if len(set(hosts)) > 1 else None)


def _host_of(address: str) -> str:
    """``tcp://10.0.0.2:4711`` -> ``10.0.0.2``."""
    return address.split("://", 1)[-1].rsplit(":", 1)[0]


def cluster_name(client: Client) -> str:
    """What the calibration of ``client``'s cluster is saved under when not named: ``local``
    for a scheduler on the loopback, else its address."""
    address = client.scheduler.address
    host = _host_of(address)
    return "local" if host in ("127.0.0.1", "localhost", "::1", "[::1]") else address


def kernel_flop_seconds(n: int = 200_000, density: float = 1e-5, width: int = 16,
                        repeats: int = 5, fastest: bool = True, seconds: float = 0.0) -> float:
    """Seconds per flop (2 per multiply-add) of a CSR x dense product on this core: the
    fastest of ``repeats`` (the median with ``fastest=False``; calls go on for at least
    ``seconds``)."""
    import scipy.sparse as sp

    rng = np.random.default_rng(0)
    nnz = int(n * n * density)
    # coordinates drawn directly: sp.random draws without replacement from n * n cells
    # (a permutation of 4e8 entries here)
    A = sp.csr_array((rng.random(nnz), (rng.integers(0, n, nnz), rng.integers(0, n, nnz))),
                     shape=(n, n))
    X = rng.random((n, width))
    return _timed(lambda: A @ X, repeats, fastest, seconds) / (2.0 * A.nnz * width)


def dense_flop_seconds(rows: int = 20_000, inner: int = 64, width: int = 16,
                       repeats: int = 5, fastest: bool = True, seconds: float = 0.0) -> float:
    """Seconds per flop of a dense ``(rows x inner) @ (inner x width)`` product (GCN's H W)
    on this core, as :func:`kernel_flop_seconds`."""
    rng = np.random.default_rng(0)
    H, W = rng.random((rows, inner)), rng.random((inner, width))
    return _timed(lambda: H @ W, repeats, fastest, seconds) / (2.0 * rows * inner * width)


def core_cache_bytes() -> int:
    """Bytes of this core's own largest data cache (Linux: the level 1-2 caches in sysfs;
    else the model's default)."""
    sizes = []
    for d in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            level, kind, size = ((d / f).read_text().strip() for f in ("level", "type", "size"))
        except OSError:
            continue
        if int(level) <= 2 and kind != "Instruction" and size.endswith("K"):
            sizes.append(int(size[:-1]) << 10)
    return max(sizes, default=int(CostModel.cache_bytes))


def _timed(f, repeats: int, fastest: bool = True, seconds: float = 0.0) -> float:
    """Seconds of the fastest (else the median) of at least ``repeats`` calls of ``f``
    after a first one, going on for ``seconds``."""
    f()
    times, end = [], time.perf_counter() + seconds
    while len(times) < repeats or time.perf_counter() < end:
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return float(min(times) if fastest else np.median(times))


def busy_flop_seconds(client: Client, workers) -> dict:
    """``flop_s``, ``dense_flop_s`` and ``cache_flop_s`` (the sparse kernel on 0.7 MB) with
    every worker timing the kernels at once (the median over workers): the rates a
    bulk-synchronous step sees on shared cores; ``cache_bytes`` of the workers' cores.
    Each worker times for a second, so that the workers overlap though they start apart
    (a few short calls can each find a core free, and time an idle machine's rate)."""
    def rate(f, **kw):
        got = client.run(f, workers=list(workers), **kw)
        return float(np.median(list(got.values())))

    kw = {"repeats": 7, "fastest": False, "seconds": 1.0}
    return {"flop_s": rate(kernel_flop_seconds, **kw),
            "dense_flop_s": rate(dense_flop_seconds, **kw),
            "cache_flop_s": rate(kernel_flop_seconds, n=2000, density=4e-3, **kw),
            "cache_bytes": rate(core_cache_bytes)}


def _payload(nbytes: int, salt: int) -> np.ndarray:
    return np.full(nbytes, salt % 251, dtype=np.uint8)


def _nbytes(x) -> int:
    return int(x.nbytes)


def link_duplex(client: Client, pair, nbytes: int = 4 * 2 ** 20,
                repeats: int = 3) -> dict:
    """Whether the link between ``pair``'s workers is full duplex: one-way transfers of
    ``nbytes`` against two opposite ones at once (``ratio`` about 1: duplex; 2: shared).
    ``{"duplex", "ratio", "one_way_s", "both_s"}``."""
    from distributed import wait

    a, b = pair

    def placed(worker, salt):
        f = client.submit(_payload, nbytes, salt, workers=[worker], pure=False)
        wait(f)
        return f

    def timed(moves):
        t0 = time.perf_counter()
        wait([client.submit(_nbytes, src, workers=[dst], pure=False,
                            allow_other_workers=False) for src, dst in moves])
        return time.perf_counter() - t0

    one, both = np.inf, np.inf
    for r in range(repeats):
        xa, xb = placed(a, 2 * r), placed(b, 2 * r + 1)
        one = min(one, timed([(xa, b)]))
        xa, xb = placed(a, 2 * r + 7), placed(b, 2 * r + 8)
        both = min(both, timed([(xa, b), (xb, a)]))
    ratio = float(both / one)
    return {"duplex": bool(ratio < 1.5), "ratio": ratio, "one_way_s": float(one),
            "both_s": float(both)}


def measure_network(client: Client, *, exchanges=("direct", "graph"), steps: int = 40,
                    transfer: bool = True) -> dict:
    """Calibrate ``client``'s cluster: an entry for :func:`daskhpc.comm.save_calibration`.

    Two workers on different hosts (where there are two) exchange messages of 8 B to 4 MiB
    and test their link's duplex; every worker at once times the kernels and sends rings of
    8 B and 4 MiB.

    Parameters
    ----------
    exchanges, steps : tuple of str, int
        The exchange modes whose Program messages are timed; ping-pong steps per size.
    transfer : bool
        Also time Dask's own transfers (``calibrate``).

    Returns
    -------
    dict
        ``alpha``, ``beta`` (of the first mode, or the busy rings' ``ring_alpha`` and
        ``ring_beta`` where those are dearer), ``duplex``, ``duplex_ratio``, ``flop_s``,
        ``dense_flop_s``, ``floor_s``, ``exchange`` (per mode), ``transfer`` (if timed),
        ``workers``, ``hosts``, ``pair``.

    Examples
    --------
    >>> cal = measure_network(client)                                 # doctest: +SKIP
    """
    from daskhpc.runtime._calibrate import calibrate, calibrate_exchange
    from daskhpc.runtime._connect import worker_addresses

    workers = worker_addresses(client)
    if len(workers) < 2:
        raise ValueError(f"calibrate needs two workers, the cluster has {len(workers)}")
    hosts = worker_hosts(client, workers)
    pair = _pair_across_hosts(workers, hosts)
    out: dict = {}
    modes = {}
    for mode in exchanges:
        fit = calibrate_exchange(client, mode, steps=steps, workers=pair)
        modes[mode] = {"alpha": float(fit["alpha"]), "beta": float(fit["beta"])}
    first = modes[exchanges[0]]
    out.update(alpha=first["alpha"], beta=first["beta"], exchange=modes)
    if transfer:
        cal = calibrate(client, workers=pair)
        out["transfer"] = {"alpha": float(cal["alpha"]), "beta": float(cal["beta"])}
    both = link_duplex(client, pair)
    out.update(duplex=both["duplex"], duplex_ratio=round(both["ratio"], 3))
    out.update(busy_flop_seconds(client, workers))
    out.update(busy_ring(client, out, exchanges[0], workers, hosts))
    for fit in modes.values():      # a step's messages cost at least what the busy rings' do
        fit.update(alpha=max(fit["alpha"], out["ring_alpha"]),
                   beta=max(fit["beta"], out["ring_beta"]))
    out["fan_beta"] = max(out["fan_beta"], out["beta"])
    out.update(workers=len(workers), hosts=len(set(hosts)), pair=list(pair))
    return out


def busy_ring(client: Client, cal: dict, exchange: str, workers, hosts,
              nbytes: int = 4 * 2 ** 20) -> dict:
    """A message's, a step's and a byte's cost with every worker taking part, from rings
    of 8 bytes and ``nbytes``: ``ring_alpha`` (a message more in a step of the 8-byte all
    to all than of the ring; ``alpha``, the larger of ``cal``'s and that), ``floor_s`` (the
    small ring's step less its alpha-beta price), ``ring_beta`` (the large ring's seconds
    per byte over the small one's), ``beta``, the larger of ``cal``'s and that, and
    ``fan_beta``: a byte's cost on the busiest link when every worker sends ``nbytes``
    split over all the others."""
    from daskhpc.runtime._calibrate import calibrate_ring
    from daskhpc.runtime._pingpong import ring_plan

    K, ways = len(workers), 1 if cal["duplex"] else 2
    hosts = hosts if len(set(hosts)) > 1 else None
    fan = max(1, K - 1)      # all to all: to each other worker
    small = calibrate_ring(client, exchange, 40, workers)
    spread = calibrate_ring(client, exchange, 40, workers, 8, fan=fan) if fan > 1 else small
    # a worker's messages share its core with the others' (and their sends with its link)
    ring_alpha = max(0.0, spread - small) / (ways * max(fan - 1, 1))
    model = CostModel(alpha=max(cal["alpha"], ring_alpha), beta=cal["beta"],
                      duplex=cal["duplex"])
    priced = model.step(ring_plan(K, 8), hosts=hosts).seconds
    big = calibrate_ring(client, exchange, 5, workers, nbytes)
    # a duplex link carries the ring's send and receive at once, else one after the other
    ring_beta = max(0.0, big - small) / (nbytes * ways)
    step = calibrate_ring(client, exchange, 5, workers, nbytes // fan, fan=fan)
    links = model.replace(alpha=0.0, beta=1.0).step(ring_plan(K, nbytes // fan, fan),
                                                    hosts=hosts)
    return {"floor_s": max(0.0, small - priced), "ring_alpha": ring_alpha,
            "alpha": model.alpha, "ring_beta": ring_beta, "beta": max(cal["beta"], ring_beta),
            "fan_beta": max(0.0, step - spread) / max(links.seconds, 1.0)}


def _pair_across_hosts(workers, hosts) -> tuple[str, str]:
    """Two workers on different hosts, else the first two."""
    for i in range(1, len(workers)):
        if hosts[i] != hosts[0]:
            return workers[0], workers[i]
    return workers[0], workers[1]


def network_for(network: str | None, client: Client | None = None,
                exchange: str = "direct", *, auto: bool = False) -> CostModel:
    """The :class:`~daskhpc.comm.CostModel` of a ``--network`` value.

    ``calibrate`` measures ``client``'s cluster now; a profile name is looked up;
    ``calibrated`` prefers the entry saved for this cluster (:func:`cluster_name`); None:
    ``calibrate`` when the run chooses its layout (``auto``) on a cluster, else a saved
    calibration if there is one, else the built-in defaults.

    Examples
    --------
    >>> network_for("ethernet-10g").name
    'ethernet-10g'
    """
    if network is None and auto and client is not None:
        network = "calibrate"
    if network == "calibrate":
        if client is None:
            from daskhpc.errors import InputError

            raise InputError("--network calibrate measures a cluster: it is for daskhpc run "
                             "(plan takes a profile or calibrated)")
        got = measure_network(client, exchanges=(exchange,), steps=10, transfer=False)
        return CostModel(alpha=got["alpha"], beta=got["beta"], duplex=got["duplex"],
                         name="calibrate", **{k: got[k] for k in CostModel.RATES})
    return network_model(network, cluster_name(client) if client is not None else None,
                         exchange)
