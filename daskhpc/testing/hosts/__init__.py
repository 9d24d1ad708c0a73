"""A cluster of hosts on one machine: Linux network namespaces on a shaped bridge.

Each host is a network namespace with its own stack, one interface named ``eth0`` (as on
a real cluster, so one ``--interface eth0`` serves every host) and one address of a
subnet reserved for tests (198.18.0.0/15, RFC 2544). The hosts' links meet on a bridge
that lives in a namespace of its own; ``tc``'s token bucket filter (``tbf``) shapes a
host's link in both directions to a rate. Faults are applied from outside, as a
switch or a node would fail: :meth:`VirtualCluster.cut` detaches a host's port from the
bridge (its processes stay alive and its interface up; nothing it sends arrives),
:meth:`~VirtualCluster.kill` ends every process of a host.

Containment: the root namespace gets no interface of the cluster and, while it is up, a
blackhole route for its subnet (a process outside the cluster that tries an address of
it fails at once); no host has a default route (a wrong address fails with "network
unreachable"). Whatever talks to the hosts runs inside one of them
(:meth:`~VirtualCluster.popen`). Everything is named with a prefix of the run and
removed when the context ends; a cluster whose owner died (a crashed test) is removed by
the next :func:`virtual_cluster` or by :func:`cleanup`.

Needs root and iproute2 (:func:`unavailable` says why not).

Examples
--------
>>> with virtual_cluster(3, rate="100mbit") as vc:                     # doctest: +SKIP
...     p = vc.popen(1, ["python", "-m", "http.server", "--bind", vc.addresses[1]])
...     vc.cut(1); vc.restore(1); vc.shape(1, "10mbit")
>>> vc.names                                                          # doctest: +SKIP
['dh4242a-h0', 'dh4242a-h1', 'dh4242a-h2']
"""

from __future__ import annotations

import contextlib
import ipaddress
import itertools
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from daskhpc.testing.hosts._records import (claim_subnet, cleanup, clusters, note, sh,
                                            teardown)

__all__ = ["virtual_cluster", "VirtualCluster", "cleanup", "clusters", "unavailable",
           "parse_rate", "INTERFACE", "dask_env"]

#: Every host's interface name.
INTERFACE = "eth0"
_counter = itertools.count()


def unavailable() -> str | None:
    """Why a virtual cluster cannot be made here, or None if it can.

    Examples
    --------
    >>> unavailable() is None or isinstance(unavailable(), str)
    True
    """
    if os.name != "posix" or not os.path.isdir("/proc/self/ns"):
        return "network namespaces need Linux"
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"no `{tool}` (install Debian's iproute2)"
    return None


def parse_rate(rate: str) -> float:
    """Bits per second of a rate as ``tc`` writes it (``100mbit``, ``1gbit``, ``10mbps``).

    Examples
    --------
    >>> parse_rate("100mbit"), parse_rate("1gbit"), parse_rate("1mbps")
    (100000000.0, 1000000000.0, 8000000.0)
    """
    m = re.fullmatch(r"\s*([0-9.]+)\s*([kmgt]?)(bit|bps)?\s*", str(rate).lower())
    if not m or m.group(0).strip() == "":
        raise ValueError(f"rate {rate!r}: write it as tc does, e.g. 100mbit or 1gbit")
    scale = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}[m.group(2)]
    return float(m.group(1)) * scale * (8 if m.group(3) == "bps" else 1)


@dataclass
class VirtualCluster:
    """Hosts made by :func:`virtual_cluster`; host 0 is the scheduler's.

    Attributes
    ----------
    prefix : str
        Every name of the cluster starts with it.
    names : list of str
        The hosts' namespaces (``ip netns exec NAME ...``).
    addresses : list of str
        The hosts' addresses, in the order of ``names``.
    subnet : str
        The cluster's subnet (a /24 of 198.18.0.0/15).
    rates : list of str or None
        Each host's link rate (None: unshaped).
    """

    prefix: str
    subnet: str
    names: list[str]
    addresses: list[str]
    rates: list[str | None] = field(default_factory=list)
    interface: str = INTERFACE
    #: the processes :meth:`start_dask` started (reaped by :meth:`close`)
    procs: list = field(default_factory=list, repr=False)

    @property
    def bridge(self) -> str:
        """The namespace that holds the bridge and the switch side of each link."""
        return f"{self.prefix}-br"

    def __len__(self) -> int:
        return len(self.names)

    def command(self, i: int, args: Sequence[str]) -> list[str]:
        """``args`` as a command that runs on host ``i``."""
        return ["ip", "netns", "exec", self.names[i], *map(str, args)]

    def popen(self, i: int, args: Sequence[str], **kwargs) -> subprocess.Popen:
        """Start ``args`` on host ``i`` (keyword arguments: :class:`subprocess.Popen`'s)."""
        return subprocess.Popen(self.command(i, args), **kwargs)

    def run(self, i: int, args: Sequence[str], **kwargs) -> subprocess.CompletedProcess:
        """Run ``args`` on host ``i`` to its end (:func:`subprocess.run`)."""
        return subprocess.run(self.command(i, args), **kwargs)

    def cut(self, i: int) -> None:
        """Cut host ``i`` off, its processes alive: its port leaves the bridge, as a
        dead switch port would (the host's own interface stays up)."""
        sh(["ip", "-n", self.bridge, "link", "set", f"h{i}", "nomaster"])

    def restore(self, i: int) -> None:
        """Put host ``i``'s port back on the bridge."""
        sh(["ip", "-n", self.bridge, "link", "set", f"h{i}", "master", "br0"])

    def shape(self, i: int, rate: str | None) -> None:
        """Shape host ``i``'s link to ``rate`` both ways (None: unshaped).

        The token bucket holds about 4 ms of traffic at the rate (at least 8 KiB), so a
        transfer longer than that runs at the rate.
        """
        ends = [(self.names[i], self.interface), (self.bridge, f"h{i}")]
        for ns, dev in ends:
            if rate is None:
                sh(["tc", "-n", ns, "qdisc", "del", "dev", dev, "root"], check=False)
                continue
            burst = max(8192, int(parse_rate(rate) / 8 / 250))
            sh(["tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf",
                  "rate", str(rate), "burst", str(burst), "latency", "200ms"])
        self.rates[i] = rate

    def pids(self, i: int) -> list[int]:
        """The processes running on host ``i``."""
        out = sh(["ip", "netns", "pids", self.names[i]], check=False).stdout
        return [int(p) for p in out.split()]

    def kill(self, i: int, sig: int = signal.SIGKILL) -> list[int]:
        """Send ``sig`` to every process of host ``i`` (a node that died); returns them."""
        pids = self.pids(i)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        return pids

    def start_dask(self, directory: str, env: dict | None = None,
                   wait: float = 60.0) -> str:
        """A Dask scheduler on host 0 and one worker (under a nanny, one thread) on each
        other host, started with ``dask scheduler`` / ``dask worker`` as on an allocation
        and configured as :func:`daskhpc.connect` configures its clusters
        (:func:`dask_env`); returns the scheduler file's path once every worker joined.

        Their output goes to ``directory/host<i>.log``; they end with the cluster.
        """
        import sys

        os.makedirs(directory, exist_ok=True)
        sf = os.path.join(directory, "scheduler.json")
        env = {**os.environ, **dask_env(), **(env or {})}
        py = [sys.executable, "-m"]
        jobs = [(0, [*py, "distributed.cli.dask_scheduler", "--host", self.addresses[0],
                     "--port", "0", "--dashboard-address", f"{self.addresses[0]}:0",
                     "--scheduler-file", sf])]
        jobs += [(i, [*py, "distributed.cli.dask_worker", "--scheduler-file", sf,
                      "--host", self.addresses[i], "--nthreads", "1", "--name", str(i),
                      "--dashboard-address", f"{self.addresses[i]}:0"])
                 for i in range(1, len(self))]
        for i, args in jobs:
            log = open(os.path.join(directory, f"host{i}.log"), "ab")
            with log:
                self.procs.append(self.popen(i, args, env=env, stdout=log,
                                             stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL,
                                             start_new_session=True))
        # the wait runs on host 0: nothing outside the cluster talks to it
        self.run(0, [*py, "daskhpc.testing.hosts", "_wait", sf, str(len(self) - 1),
                     str(wait)], env=env, check=True)
        return sf

    def close(self) -> None:
        """End every process of the hosts and remove the namespaces and the route."""
        teardown(self.prefix, self.subnet, len(self.names))
        for proc in self.procs:
            proc.wait()


def dask_env() -> dict[str, str]:
    """The environment that gives ``dask scheduler`` and ``dask worker`` the settings
    :func:`daskhpc.connect` sets on its own clusters (``CLUSTER_CONFIG``) and the
    daskhpc dashboard pages."""
    from daskhpc.runtime import CLUSTER_CONFIG

    settings = {**CLUSTER_CONFIG,
                "distributed.scheduler.preload": ["daskhpc.dashboard.preload"]}
    return {"DASK_" + key.upper().replace(".", "__").replace("-", "_"): repr(value)
            for key, value in settings.items()}


def wait_for_workers(scheduler_file: str, n: int, timeout: float) -> None:
    """Return once ``n`` workers joined the scheduler of ``scheduler_file``."""
    from distributed import Client

    deadline = time.monotonic() + timeout
    while not os.path.exists(scheduler_file):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no scheduler wrote {scheduler_file} in {timeout:g} s")
        time.sleep(0.1)
    with Client(scheduler_file=scheduler_file, timeout=timeout) as client:
        client.wait_for_workers(n, timeout=max(deadline - time.monotonic(), 1.0))


def make(n: int, rate: str | Sequence[str | None] | None = None,
         prefix: str | None = None, owned: bool = True) -> VirtualCluster:
    """Make ``n`` hosts (see :func:`virtual_cluster`); the caller closes them.

    ``owned=False`` records no owner process: the cluster stays until
    :func:`cleanup` names it (``python -m daskhpc.testing.hosts up``).
    """
    why = unavailable()
    if why:
        raise RuntimeError(f"no virtual cluster here: {why}")
    if n < 1:
        raise ValueError(f"a virtual cluster needs at least 1 host, not {n}")
    rates = list(rate) if isinstance(rate, (list, tuple)) else [rate] * n
    if len(rates) != n:
        raise ValueError(f"{len(rates)} rates for {n} hosts")
    for r in rates:
        if r is not None:
            parse_rate(r)
    prefix = prefix or f"dh{os.getpid()}{chr(ord('a') + next(_counter) % 26)}"
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9]{0,11}", prefix):
        raise ValueError(f"prefix {prefix!r}: 1-12 letters and digits, a letter first")
    subnet = claim_subnet(prefix, n)
    if not owned:
        note(prefix, pid=None)
    net = ipaddress.ip_network(subnet)
    vc = VirtualCluster(prefix, subnet, [f"{prefix}-h{i}" for i in range(n)],
                        [str(net[i + 1]) for i in range(n)], [None] * n)
    try:
        br = vc.bridge
        # the routes first: a packet to the subnet from this namespace never leaves it
        sh(["ip", "route", "add", "blackhole", subnet])
        sh(["ip", "netns", "add", br])
        sh(["ip", "-n", br, "link", "add", "br0", "type", "bridge"])
        sh(["ip", "-n", br, "link", "set", "br0", "up"])
        for i, (ns, addr) in enumerate(zip(vc.names, vc.addresses)):
            sh(["ip", "netns", "add", ns])
            # both ends are made inside namespaces of the run: none in the root one
            sh(["ip", "-n", br, "link", "add", f"h{i}", "type", "veth",
                  "peer", "name", INTERFACE, "netns", ns])
            sh(["ip", "-n", br, "link", "set", f"h{i}", "master", "br0", "up"])
            sh(["ip", "-n", ns, "addr", "add", f"{addr}/{net.prefixlen}",
                  "dev", INTERFACE])
            sh(["ip", "-n", ns, "link", "set", INTERFACE, "up"])
            sh(["ip", "-n", ns, "link", "set", "lo", "up"])
            if rates[i] is not None:
                vc.shape(i, rates[i])
    except BaseException:
        vc.close()
        raise
    return vc


@contextlib.contextmanager
def virtual_cluster(n: int, rate: str | Sequence[str | None] | None = None,
                    prefix: str | None = None) -> Iterator[VirtualCluster]:
    """``n`` hosts as network namespaces on one bridge, removed at the end.

    Parameters
    ----------
    n : int
        Hosts; host 0 is the scheduler's by convention.
    rate : str or list, optional
        Link rate of every host, or one per host, as ``tc`` writes it (``"100mbit"``,
        ``"1gbit"``); None leaves a link unshaped.
    prefix : str, optional
        Names start with it (1-12 letters and digits); default ``dh<pid><letter>``.

    Yields
    ------
    VirtualCluster

    Examples
    --------
    >>> with virtual_cluster(2, rate="1gbit") as vc:                # doctest: +SKIP
    ...     vc.run(0, ["ip", "route"], capture_output=True, text=True).stdout
    '198.18.0.0/24 dev eth0 proto kernel scope link src 198.18.0.1 \\n'
    """
    vc = make(n, rate, prefix)
    try:
        yield vc
    finally:
        vc.close()


def load(prefix: str) -> VirtualCluster:
    """The cluster ``prefix`` that is up (made by ``up`` or by another process)."""
    for rec in clusters():
        if rec["prefix"] == prefix:
            net = ipaddress.ip_network(rec["subnet"])
            n = rec["hosts"]
            return VirtualCluster(prefix, rec["subnet"], [f"{prefix}-h{i}" for i in range(n)],
                                  [str(net[i + 1]) for i in range(n)], [None] * n)
    raise LookupError(f"no virtual cluster named {prefix!r} is up")
