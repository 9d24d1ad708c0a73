"""The records of the virtual clusters up on this machine, and their removal.

A record (``STATE_DIR/<prefix>.json``: prefix, subnet, hosts, owner pid and its start
time) is written under a lock before anything of a cluster is made, so a cluster whose
owner died half-way is still found and removed, and two clusters never share a subnet.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import signal
import subprocess
import time
from collections.abc import Sequence

#: The tests' range (RFC 2544): 512 subnets of 256 addresses, one per cluster.
RANGE = ipaddress.ip_network("198.18.0.0/15")
#: Where each cluster's record lives while it is up (a tmpfs: gone after a reboot).
STATE_DIR = "/run/daskhpc-hosts"

def sh(args: Sequence[str], check: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run(list(args), capture_output=True, text=True)
    if check and out.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {out.stderr.strip() or out.returncode}")
    return out


def _owner_alive(pid: int, started: str) -> bool:
    """Whether the process that made a cluster still runs (its start time guards
    against a reused pid)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19] == started
    except (OSError, IndexError):
        return False


def _start_time(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[19]


def _record_path(prefix: str) -> str:
    return os.path.join(STATE_DIR, prefix + ".json")


def note(prefix: str, **fields) -> None:
    """Add ``fields`` to the record of the cluster ``prefix`` (e.g. its scheduler file)."""
    path = _record_path(prefix)
    with open(path) as f:
        rec = json.load(f)
    rec.update(fields)
    with open(path, "w") as f:
        json.dump(rec, f)


def clusters() -> list[dict]:
    """The virtual clusters up on this machine: their records (prefix, subnet, hosts,
    owner pid, whether the owner is alive)."""
    out = []
    with contextlib.suppress(FileNotFoundError):
        for name in sorted(os.listdir(STATE_DIR)):
            if name.endswith(".json"):
                with contextlib.suppress(OSError, ValueError):
                    with open(os.path.join(STATE_DIR, name)) as f:
                        rec = json.load(f)
                    rec["alive"] = rec.get("pid") is None or _owner_alive(rec["pid"],
                                                                          rec["started"])
                    out.append(rec)
    return out


def cleanup(prefix: str | None = None) -> list[str]:
    """Remove the cluster named ``prefix``, or (None) every cluster whose owner process
    has died; returns the prefixes removed.

    A record is written before anything is made, so even a cluster whose owner died
    half-way through making it is found and removed.
    """
    gone = []
    for rec in clusters():
        if (prefix is None and not rec["alive"]) or rec["prefix"] == prefix:
            teardown(rec["prefix"], rec["subnet"], rec["hosts"])
            gone.append(rec["prefix"])
    return gone


def teardown(prefix: str, subnet: str, hosts: int) -> None:
    names = [f"{prefix}-h{i}" for i in range(hosts)]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = [int(p) for ns in names
                for p in sh(["ip", "netns", "pids", ns], check=False).stdout.split()]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + 3.0
        while pids and time.monotonic() < deadline:
            pids = [p for p in pids if os.path.exists(f"/proc/{p}")]
            time.sleep(0.05)
    for ns in [*names, f"{prefix}-br"]:
        sh(["ip", "netns", "del", ns], check=False)
    sh(["ip", "route", "del", "blackhole", subnet], check=False)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(_record_path(prefix))


def claim_subnet(prefix: str, hosts: int) -> str:
    """A /24 of the range no other cluster holds, recorded for ``prefix`` under a lock
    (two sessions on one machine never share one)."""
    os.makedirs(STATE_DIR, mode=0o700, exist_ok=True)
    with open(os.path.join(STATE_DIR, "lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cleanup()                         # clusters of owners that died: stale
        taken = {rec["subnet"] for rec in clusters()}
        routes = sh(["ip", "route", "show", "type", "blackhole"], check=False).stdout
        taken |= set(routes.split())
        for net in RANGE.subnets(new_prefix=24):
            if str(net) not in taken:
                break
        else:
            raise RuntimeError("every subnet of 198.18.0.0/15 is taken by a virtual cluster")
        if os.path.exists(_record_path(prefix)):
            raise RuntimeError(f"a virtual cluster named {prefix!r} is up already")
        with open(_record_path(prefix), "w") as f:
            json.dump({"prefix": prefix, "subnet": str(net), "hosts": hosts,
                       "pid": os.getpid(), "started": _start_time(os.getpid())}, f)
    return str(net)
