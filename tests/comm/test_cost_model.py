"""The step cost model against counts made by hand, and the named networks."""

import numpy as np
import pytest

from daskhpc.comm import CostModel, Plan, network_model, save_calibration, saved_calibrations
from daskhpc.errors import InputError

# round numbers, so every expected time below is counted on paper
M = CostModel(alpha=1.0, beta=0.01, flop_s=0.001, memory_beta=0.001)


def rows(n):
    return list(range(n))


def test_one_message_between_two_hosts():
    # 100 units x 1 word x 8 bytes = 800 bytes; each host's link carries it once:
    # alpha 1 + 800 * 0.01 = 9 s on either host; busiest host: 9 s
    p = Plan.from_messages(2, [(0, 0, 1, rows(100))])
    c = M.step(p)
    assert c.comm_s == pytest.approx(9.0)
    assert c.host_link_bytes == [800, 800]
    assert c.host_link_messages == [1, 1]


def test_a_link_carries_its_sends_and_its_receives():
    # host 0 sends 800 B to host 1 and receives 400 B from it in the same phase:
    # each host's link: 2 messages, 1200 bytes -> 2 + 12 = 14 s (not max(9, 5) as
    # independent messages would give)
    p = Plan.from_messages(2, [(0, 0, 1, rows(100)), (0, 1, 0, rows(50))])
    assert M.step(p).comm_s == pytest.approx(14.0)
    # a duplex link: the busier direction, 1 message and 800 B -> 9 s
    assert M.replace(duplex=True).step(p).comm_s == pytest.approx(9.0)


def test_an_exchange_on_duplex_links_costs_the_busier_direction():
    # 4 hosts in a ring exchange, every host sends 800 B to the next and receives 800 B
    # from the previous, one phase: half duplex 2 msgs + 1600 B = 2 + 16 = 18 s a link;
    # full duplex each direction 1 + 8 = 9 s: half the time, as tc's two shaped
    # directions (and a switched port) give
    p = Plan.from_messages(4, [(0, h, (h + 1) % 4, rows(100)) for h in range(4)])
    assert M.step(p).comm_s == pytest.approx(18.0)
    assert M.replace(duplex=True).step(p).comm_s == pytest.approx(9.0)
    # the bytes on each link are counted both ways whatever the duplex
    assert M.replace(duplex=True).step(p).host_link_bytes == [1600] * 4


def test_dense_load_at_its_own_rate_and_a_floor_per_phase():
    # 2 parts, 2 phases. sparse flops [[1000, 2000], [0, 500]] at 0.001 s;
    # dense flops [[10000, 0], [4000, 4000]] at 0.0001 s:
    # phase 0: part 0 1 + 1 = 2 s, part 1 2 + 0 = 2 s -> 2; phase 1: 0.4 and 0.5 + 0.4 =
    # 0.9 -> 0.9; compute 2.9 s. A floor of 0.25 s a phase: + 0.5 s (no messages)
    m = M.replace(dense_flop_s=0.0001)
    c = m.step(None, [[1000, 2000], [0, 500]], dense_load=[[10000, 0], [4000, 4000]])
    assert c.compute_s == pytest.approx(2.9) and c.comm_s == 0.0
    assert c.phase_s == pytest.approx([2.0, 0.9])
    f = m.replace(floor_s=0.25).step(None, [[1000, 2000], [0, 500]],
                                     dense_load=[[10000, 0], [4000, 4000]])
    assert f.seconds == pytest.approx(3.4) and f.comm_s == pytest.approx(0.5)
    # the same flops all at the sparse rate: max(11, 2) + max(4, 4.5) = 15.5 s
    assert M.step(None, [[11000, 2000], [4000, 4500]]).compute_s == pytest.approx(15.5)


def test_parts_whose_working_set_fits_the_cache_compute_at_its_rate():
    # loads [[1000, 2000], [3000, 0]]; working sets [[100, 5000], [200, 0]] bytes, a
    # 1000-byte cache at 0.0001 s: phase 0 max(0.1, 2) = 2 s, phase 1 0.3 s
    m = M.replace(cache_flop_s=0.0001, cache_bytes=1000)
    c = m.step(None, [[1000, 2000], [3000, 0]], working_set=[[100, 5000], [200, 0]])
    assert c.phase_s == pytest.approx([2.0, 0.3])
    # no working set: nothing fits, every flop at flop_s
    assert m.step(None, [[1000, 2000], [3000, 0]]).phase_s == pytest.approx([2.0, 3.0])


def test_links_of_an_all_to_all_phase_pay_the_fan_beta():
    # 4 hosts, each sends 800 B to each other one (3 messages, 2400 B a direction):
    # duplex, beta 0.01: 3 + 24 = 27 s; at a fan_beta of 0.02 the bytes cost 48: 51 s
    m = M.replace(duplex=True, fan_beta=0.02)
    a2a = Plan.from_messages(4, [(0, h, g, rows(100)) for h in range(4) for g in range(4)
                                 if h != g])
    assert M.replace(duplex=True).step(a2a).comm_s == pytest.approx(27.0)
    assert m.step(a2a).comm_s == pytest.approx(51.0)
    # a ring sends to one host and receives from one: beta (9 s)
    ring = Plan.from_messages(4, [(0, h, (h + 1) % 4, rows(100)) for h in range(4)])
    assert m.step(ring).comm_s == pytest.approx(9.0)
    # host 0 receives from hosts 1 and 2 (fan in), sends to one: its receives at fan_beta
    two = Plan.from_messages(3, [(0, 1, 0, rows(100)), (0, 2, 0, rows(100)),
                                 (0, 0, 1, rows(100))])
    assert m.step(two).comm_s == pytest.approx(2 + 1600 * 0.02)
    # a fan_beta below beta changes nothing
    assert M.replace(duplex=True, fan_beta=0.001).step(a2a).comm_s == pytest.approx(27.0)


def test_busiest_host_not_sum_of_messages():
    # 3 hosts: 0 -> 1 (800 B), 0 -> 2 (800 B), 1 -> 2 (400 B), one phase.
    # host 0: 2 msgs, 1600 B -> 18; host 1: 2 msgs, 1200 B -> 14; host 2: 2 msgs, 1200 B -> 14
    p = Plan.from_messages(3, [(0, 0, 1, rows(100)), (0, 0, 2, rows(100)),
                               (0, 1, 2, rows(50))])
    c = M.step(p)
    assert c.comm_s == pytest.approx(18.0)
    assert c.host_link_bytes == [1600, 1200, 1200] and c.busiest_host == 0


def test_parts_on_one_host_share_its_link_and_talk_through_memory():
    # parts 0, 1 on workers 0, 1 of host "a"; part 2 on worker 2 of host "b".
    # 0 -> 2: 800 B over the link; 1 -> 2: 400 B over the link; 0 -> 1: 800 B in memory.
    # host a: 2 msgs + 1200 B = 2 + 12 = 14, plus memory 800 * 0.001 = 0.8 -> 14.8
    # host b: 2 msgs + 1200 B = 14
    p = Plan.from_messages(3, [(0, 0, 2, rows(100)), (0, 1, 2, rows(50)),
                               (0, 0, 1, rows(100))])
    c = M.step(p, hosts=["a", "a", "b"])
    assert c.comm_s == pytest.approx(14.8)
    assert c.host_link_bytes == [1200, 1200]


def test_parts_of_one_worker_send_for_free_and_compute_in_turn():
    # parts 0, 1 on worker 0, part 2 on worker 1 (each worker its host).
    # 0 -> 1 stays in the worker; 0 -> 2 and 1 -> 2 are bundled into one message of
    # 150 units (1200 B): worker 0's host: 1 + 12 = 13.
    # loads 1000, 2000, 2500 flops: worker 0 computes 3000 (3 s), worker 1 2500 (2.5 s).
    p = Plan.from_messages(3, [(0, 0, 1, rows(100)), (0, 0, 2, rows(100)),
                               (0, 1, 2, rows(50))])
    c = M.step(p, load=[1000, 2000, 2500], owner=[0, 0, 1])
    assert c.compute_s == pytest.approx(3.0)
    assert c.comm_s == pytest.approx(13.0)
    assert c.seconds == pytest.approx(16.0)


def test_phases_add_up_each_its_own_busiest():
    # phase 0: part 0 computes 4000 (4 s), sends 800 B to 1 (9 s);
    # phase 1: part 1 computes 1000 (1 s), sends 1600 B to 0 (1 + 16 = 17 s).
    # step: (4 + 9) + (1 + 17) = 31 s
    p = Plan.from_messages(2, [(0, 0, 1, rows(100)), (1, 1, 0, rows(200))])
    load = np.array([[4000, 0], [0, 1000]])
    c = M.step(p, load=load)
    assert c.phase_s == pytest.approx([13.0, 18.0])
    assert c.seconds == pytest.approx(31.0)


def test_words_and_word_bytes_count():
    # 10 units x 16 words x 4 bytes = 640 B: 1 + 6.4
    p = Plan.from_messages(2, [(0, 0, 1, rows(10))], words_per_unit=16, word_bytes=4)
    assert M.step(p).comm_s == pytest.approx(7.4)


def test_compute_only_step_and_bad_shapes():
    assert M.step(None, load=[1000, 3000]).seconds == pytest.approx(3.0)
    p = Plan.from_messages(2, [(0, 0, 1, rows(1))])
    with pytest.raises(ValueError, match="one entry per part"):
        M.step(p, load=[1, 2, 3])
    with pytest.raises(ValueError, match="one worker per part"):
        M.step(p, owner=[0])


def test_fewer_bytes_on_the_busiest_link_is_faster():
    # the shape of a partition comparison: the same loads, one plan cuts less
    cut = Plan.from_messages(4, [(0, 0, 1, rows(10)), (0, 2, 3, rows(10))])
    spread = Plan.from_messages(4, [(0, s, d, rows(40)) for s in range(4) for d in range(4)
                                    if s != d])
    load = [1000] * 4
    assert M.step(cut, load).seconds < M.step(spread, load).seconds


def test_named_profiles():
    ib, eth = network_model("infiniband-100g"), network_model("ethernet-10g")
    assert ib.beta == pytest.approx(1 / 12.5e9) and eth.beta == pytest.approx(1 / 1.25e9)
    assert ib.alpha < eth.alpha
    # both ports are full duplex, and a BLAS flop is cheaper than a sparse one
    assert ib.duplex and eth.duplex
    assert ib.dense_flop_s < ib.flop_s and eth.dense_flop_s < eth.flop_s
    with pytest.raises(InputError, match="unknown --network"):
        network_model("token-ring")


def test_saved_calibrations_per_cluster(tmp_path, monkeypatch):
    monkeypatch.setenv("DASK_CONFIG", str(tmp_path))
    assert network_model(None).name == "default"        # nothing saved
    with pytest.raises(InputError, match="nothing saved"):
        network_model("calibrated")
    save_calibration("rack-a", {"alpha": 1e-4, "beta": 1e-9, "flop_s": 2e-9})
    save_calibration("rack-b", {"alpha": 2e-4, "beta": 8e-9})
    saved = saved_calibrations()
    assert set(saved["clusters"]) == {"rack-a", "rack-b"} and saved["last"] == "rack-b"
    assert network_model("calibrated").alpha == 2e-4                 # the last one
    assert network_model("calibrated", cluster="rack-a").alpha == 1e-4
    assert network_model("calibrated:rack-a").flop_s == 2e-9
    with pytest.raises(InputError, match="no calibration saved as 'rack-c'"):
        network_model("calibrated:rack-c")
    # a calibration that measured its links half duplex; one saved before calibrations
    # measured it is taken as full duplex (switched ports, tc-shaped links)
    save_calibration("rack-d", {"alpha": 1e-4, "beta": 1e-9, "duplex": False,
                                "dense_flop_s": 1e-10})
    assert not network_model("calibrated:rack-d").duplex
    assert network_model("calibrated:rack-d").dense_flop_s == 1e-10
    assert network_model("calibrated:rack-a").duplex


def test_rank_layouts_fastest_first_and_keeps_the_asked_one():
    from daskhpc.comm import rank_layouts

    built = []

    def layout(load):
        def build():
            built.append(load)
            return load
        return build

    layouts = {"even": layout([2000, 2000]), "skewed": layout([3500, 500])}
    name, kept, rows = rank_layouts(layouts, lambda load: M.step(None, load))
    assert (name, kept) == ("even", [2000, 2000]) and len(built) == 2
    assert [r["layout"] for r in rows] == ["even", "skewed"]
    assert [r["predicted_s_per_step"] for r in rows] == pytest.approx([2.0, 3.5])
    name, kept, _ = rank_layouts(layouts, lambda load: M.step(None, load), keep="skewed")
    assert (name, kept) == ("skewed", [3500, 500])


def test_a_dense_allreduce_by_hand():
    # 8 parts: 3 rounds; each host sends and receives 800 B a round over one link:
    # 3 x 2 x (1 + 8) = 54 s; duplex: 27 s
    assert M.allreduce(800, 8) == pytest.approx(54.0)
    assert M.replace(duplex=True).allreduce(800, 8) == pytest.approx(27.0)
    assert M.allreduce(800, 1) == 0.0


def test_a_calibration_keeps_its_floor_and_each_exchange_modes_messages(tmp_path,
                                                                        monkeypatch):
    from daskhpc.comm._network import model_of

    monkeypatch.setenv("DASK_CONFIG", str(tmp_path))
    entry = {"alpha": 2.0, "beta": 0.5, "floor_s": 0.25, "flop_s": 0.125,
             "exchange": {"direct": {"alpha": 2.0, "beta": 0.5},
                          "graph": {"alpha": 8.0, "beta": 1.0}}}
    save_calibration("vc", entry)
    m = network_model("calibrated:vc")
    assert (m.alpha, m.beta, m.floor_s, m.flop_s) == (2.0, 0.5, 0.25, 0.125)
    # a task graph's messages: the graph mode's alpha and beta, the same floor
    g = network_model("calibrated:vc", exchange="graph")
    assert (g.alpha, g.beta, g.floor_s) == (8.0, 1.0, 0.25)
    # the in-cache rate, the cache and the all-to-all beta where a calibration has them
    save_calibration("vc2", {**entry, "cache_flop_s": 0.0625, "cache_bytes": 4096,
                             "fan_beta": 0.75})
    c = network_model("calibrated:vc2")
    assert (c.cache_flop_s, c.cache_bytes, c.fan_beta) == (0.0625, 4096, 0.75)
    assert m.fan_beta == 0.0 and m.as_dict()["cache_bytes"] == m.cache_bytes
    # the last calibration's in dask.config's daskhpc.comm (CostModel.from_config)
    import dask
    import yaml

    from daskhpc.comm._network import calibration_path

    with open(calibration_path()) as f:
        comm = yaml.safe_load(f)["daskhpc"]["comm"]
    with dask.config.set({f"daskhpc.comm.{k}": comm[k]
                          for k in ("cache-flop-s", "cache-bytes", "fan-beta")}):
        cfg = CostModel.from_config()
    assert (cfg.cache_flop_s, cfg.cache_bytes, cfg.fan_beta) == (0.0625, 4096, 0.75)
    # a mode the calibration did not time: the entry's own
    assert model_of({"alpha": 3.0, "beta": 1.0}, "x", "graph").alpha == 3.0


def test_an_allreduce_pays_a_floor_a_message_in_sequence():
    from daskhpc.allreduce._cost import predicted_times

    # 8 ranks: recursive doubling 3 rounds, Rabenseifner 6 and the ring 14 messages in
    # sequence, each a step of the run: a floor of 0.5 s adds 1.5, 3 and 7 s
    names = ("dense_rec_dbl", "dense_rabenseifner", "dense_ring")
    base = predicted_times(8, 1000, 10, 8, M, candidates=names)
    floored = predicted_times(8, 1000, 10, 8, M.replace(floor_s=0.5), candidates=names)
    assert [floored[n] - base[n] for n in names] == pytest.approx([1.5, 3.0, 7.0])


def test_auto_takes_the_dense_allreduce_where_the_sparse_one_sends_as_much():
    from daskhpc.allreduce._cost import choose

    # 4 ranks, 124 items, 100 a rank: every sparse message is capped at the dense
    # vector's size, a tie broken for the dense algorithm; 20,000 of 4M: sparse wins
    m = M.replace(floor_s=0.5)
    tie = choose(4, 124, 100, 8, m, candidates=("ssar_rec_dbl", "dense_rec_dbl"))
    assert tie["candidates"]["ssar_rec_dbl"] == tie["candidates"]["dense_rec_dbl"]
    assert tie["algorithm"] == "dense_rec_dbl"
    assert choose(4, 4_000_000, 20_000, 8, m)["algorithm"] == "ssar_rec_dbl"
