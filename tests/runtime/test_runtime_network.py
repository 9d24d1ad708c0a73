"""measure_network / network_for on a LocalCluster: a calibration per cluster, kept and
read back by name."""

import pytest

from daskhpc.comm import PROFILES, save_calibration
from daskhpc.runtime import (Placement, cluster_name, measure_network, network_for,
                             placed_hosts, worker_addresses)


def test_measure_save_and_read_back(client3, tmp_path, monkeypatch):
    monkeypatch.setenv("DASK_CONFIG", str(tmp_path))
    got = measure_network(client3, exchanges=("direct",), steps=3, transfer=False)
    assert got["alpha"] >= 0 and got["beta"] > 0 and got["flop_s"] > 0
    # a BLAS product runs faster a flop than the sparse kernel; the duplex is measured
    assert 0 < got["dense_flop_s"] < got["flop_s"]
    # the sparse kernel on operands in cache runs faster a flop than out of cache; all
    # to all a byte costs at least what it does in a ring
    assert 0 < got["cache_flop_s"] < got["flop_s"] and got["cache_bytes"] >= 1 << 15
    assert got["fan_beta"] >= got["beta"] > 0
    # a message costs at least what one more costs in the busy all to all of 8 bytes
    assert got["alpha"] >= got["ring_alpha"] >= 0
    assert got["exchange"]["direct"]["alpha"] >= got["ring_alpha"]
    assert isinstance(got["duplex"], bool) and got["duplex_ratio"] > 0
    assert got["workers"] == 3 and got["hosts"] == 1          # a LocalCluster: one host
    assert got["pair"][0] != got["pair"][1]
    assert cluster_name(client3) == "local"
    save_calibration("local", got)
    model = network_for("calibrated", client3)
    assert (model.alpha, model.beta, model.flop_s) == (got["alpha"], got["beta"],
                                                      got["flop_s"])
    assert (model.dense_flop_s, model.duplex) == (got["dense_flop_s"], got["duplex"])
    assert (model.cache_flop_s, model.fan_beta) == (got["cache_flop_s"], got["fan_beta"])
    # a step over every worker costs something beyond its 8-byte ring's alpha and beta
    assert got["floor_s"] >= 0 and model.floor_s == got["floor_s"]
    assert model.name == "calibrated:local"
    # no --network: the saved calibration of this cluster
    assert network_for(None, client3).name == "calibrated:local"


def test_profiles_need_no_cluster_and_calibrate_needs_one():
    from daskhpc.errors import InputError

    assert network_for("infiniband-100g") is PROFILES["infiniband-100g"]
    with pytest.raises(InputError, match="measures a cluster"):
        network_for("calibrate")


def test_one_host_counts_every_worker_as_its_link(client3):
    owner, hosts = placed_hosts(client3, Placement(6, worker_addresses(client3)))
    assert owner == [0, 1, 2, 0, 1, 2] and hosts is None
