"""The virtual cluster keeps to itself and leaves nothing behind.

Hosts are real network namespaces (root and iproute2 needed; without them these tests
skip, saying why): no interface of a cluster in the root namespace, a blackhole route for
its subnet while it is up, no route out of a host, links shaped with tc, a cut that
stops traffic with the processes alive, and nothing of a cluster left after its owner
crashed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from daskhpc.testing import hosts

pytestmark = pytest.mark.skipif(hosts.unavailable() is not None,
                                reason=f"virtual cluster: {hosts.unavailable()}")

#: Connect to ADDR:PORT with a short timeout; print the errno's name or "ok".
CONNECT = textwrap.dedent("""
    import errno, socket, sys
    s = socket.socket()
    s.settimeout(float(sys.argv[3]))
    try:
        s.connect((sys.argv[1], int(sys.argv[2])))
        print("ok")
    except socket.timeout:
        print("timeout")
    except OSError as e:
        print(errno.errorcode[e.errno])
""")


def ip(*args: str) -> str:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=True).stdout


def namespaces(prefix: str) -> list[str]:
    return [line.split()[0] for line in ip("netns", "list").splitlines()
            if line.startswith(prefix + "-")]


def blackholes() -> str:
    return ip("route", "show", "type", "blackhole")


def connect(vc, i: int, address: str, port: int, timeout: float = 2.0) -> str:
    out = vc.run(i, [sys.executable, "-c", CONNECT, address, str(port), str(timeout)],
                 capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_cluster_is_contained_and_removed():
    root_links = ip("-o", "link", "show")
    with hosts.virtual_cluster(3, rate="100mbit") as vc:
        assert len(vc.names) == len(vc.addresses) == 3
        assert all(a.startswith(("198.18.", "198.19.")) for a in vc.addresses)
        # nothing of the cluster in the root namespace but the blackhole route
        assert ip("-o", "link", "show") == root_links
        assert vc.subnet in blackholes().split()
        assert sorted(namespaces(vc.prefix)) == sorted([*vc.names, vc.bridge])
        for i in range(3):
            routes = vc.run(i, ["ip", "route"], capture_output=True, text=True).stdout
            assert "default" not in routes and vc.subnet in routes, routes
            links = vc.run(i, ["ip", "-o", "link"], capture_output=True, text=True).stdout
            assert [ln.split(":")[1].strip().split("@")[0] for ln in links.splitlines()] \
                == ["lo", hosts.INTERFACE]
        # a host reaches no address outside its subnet; this namespace none inside it
        assert connect(vc, 1, "198.51.100.1", 9) == "ENETUNREACH"
        probe = subprocess.run([sys.executable, "-c", CONNECT, vc.addresses[1], "9", "2"],
                               capture_output=True, text=True, check=True).stdout.strip()
        assert probe == "EINVAL"           # the blackhole route: refused at once, unsent
        # hosts reach each other (a closed port answers with a reset)
        assert connect(vc, 1, vc.addresses[2], 9) == "ECONNREFUSED"
        # both ends of each link shaped
        for ns, dev in ((vc.names[1], hosts.INTERFACE), (vc.bridge, "h1")):
            qdisc = subprocess.run(["tc", "-n", ns, "qdisc", "show", "dev", dev],
                                   capture_output=True, text=True, check=True).stdout
            assert "tbf" in qdisc and "100Mbit" in qdisc, qdisc
        prefix, subnet = vc.prefix, vc.subnet
    assert namespaces(prefix) == []
    assert subnet not in blackholes().split()
    assert ip("-o", "link", "show") == root_links


def test_cut_keeps_processes_and_restore_reconnects():
    with hosts.virtual_cluster(2) as vc:
        server = vc.popen(0, [sys.executable, "-m", "http.server", "--bind",
                              vc.addresses[0], "8000"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(100):                         # until it listens
                if connect(vc, 1, vc.addresses[0], 8000) == "ok":
                    break
            assert connect(vc, 1, vc.addresses[0], 8000) == "ok"
            vc.cut(0)
            assert connect(vc, 1, vc.addresses[0], 8000, timeout=1.0) == "timeout"
            assert server.poll() is None and server.pid in vc.pids(0)  # alive, cut off
            vc.restore(0)
            assert connect(vc, 1, vc.addresses[0], 8000) == "ok"
            vc.shape(1, "1gbit")
            assert vc.rates[1] == "1gbit"
            vc.shape(1, None)
            assert "tbf" not in subprocess.run(
                ["tc", "-n", vc.names[1], "qdisc", "show", "dev", hosts.INTERFACE],
                capture_output=True, text=True).stdout
            assert server.pid in vc.kill(0)
            assert server.wait(10) == -9
        finally:
            server.kill()


def test_crashed_owner_leaves_nothing_after_cleanup(tmp_path):
    prefix = f"dhc{os.getpid() % 100000}"
    code = textwrap.dedent(f"""
        import os, signal
        from daskhpc.testing import hosts
        vc = hosts.make(2, "10mbit", prefix={prefix!r})
        print(vc.subnet, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)     # no clean-up runs
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == -9, out.stderr
    subnet = out.stdout.strip()
    assert namespaces(prefix) and subnet in blackholes().split()   # left behind
    assert [r["prefix"] for r in hosts.clusters() if not r["alive"]].count(prefix) == 1
    assert prefix in hosts.cleanup()                                 # stale: removed
    assert namespaces(prefix) == [] and subnet not in blackholes().split()
    assert prefix not in [r["prefix"] for r in hosts.clusters()]


def test_two_clusters_get_their_own_subnets_and_names():
    with hosts.virtual_cluster(1) as a, hosts.virtual_cluster(1) as b:
        assert a.prefix != b.prefix and a.subnet != b.subnet
        assert {r["prefix"] for r in hosts.clusters()} >= {a.prefix, b.prefix}


def test_bad_arguments_say_what_is_wrong():
    with pytest.raises(ValueError, match="write it as tc does"):
        hosts.parse_rate("fast")
    with pytest.raises(ValueError, match="2 rates for 3 hosts"):
        hosts.make(3, ["1gbit", "1gbit"])
    out = subprocess.run([sys.executable, "-m", "daskhpc.testing.hosts", "run", "--hosts",
                          "2", "--cut", "1at3", "--", "true"], capture_output=True, text=True)
    assert out.returncode == 2 and "write it as I@S" in out.stderr
