"""The launchers' choice of interface on a host with no default route (as many compute
nodes): the host's own address, never the loopback, or one line asking for
``--interface``. Run on a host of the virtual cluster, which has no default route."""

from __future__ import annotations

import subprocess
import sys

import pytest

from daskhpc.testing import hosts

pytestmark = pytest.mark.skipif(hosts.unavailable() is not None,
                                reason=f"virtual cluster: {hosts.unavailable()}")

PICK = ("import sys\nfrom daskhpc._launch import default_interface\n"
        "from daskhpc._mpi_options import BadOptions\n"
        "try:\n    print(default_interface(int(sys.argv[1])))\n"
        "except BadOptions as e:\n    print('BadOptions:', e)\n")


def pick(vc, nodes: int) -> str:
    out = vc.run(0, [sys.executable, "-c", PICK, str(nodes)], capture_output=True,
                 text=True, check=True)
    return out.stdout.strip()


def test_a_host_without_default_route_uses_its_own_address():
    with hosts.virtual_cluster(1) as vc:
        assert pick(vc, 4) == hosts.INTERFACE
        # with no address but the loopback: fine alone, one line on a job of 4 nodes
        subprocess.run(["ip", "-n", vc.names[0], "link", "set", hosts.INTERFACE, "down"],
                       check=True)
        assert pick(vc, 1) == "lo"
        said = pick(vc, 4)
        assert said.startswith("BadOptions:") and "pass --interface IF" in said, said
        assert "\n" not in said
