"""CP-ALS on a real cluster (2 worker processes, TCP): equal to the partition-aware
reference bit for bit and to the plain serial reference to 1e-9, the same twice, sending
between workers exactly the planned messages with the documented framing, resuming from
checkpoints, stopping by the tol rule, surviving a killed worker."""

from __future__ import annotations

import collections
import json

import numpy as np
import pytest

import daskhpc as dh
from daskhpc.comm import run_local
from daskhpc.cpals import assemble, program, statics
from daskhpc.cpals._program import row
from daskhpc.cpals._serial import run_serial
from daskhpc.errors import InputError
from daskhpc.testing import KillOnce, TaskKey

METHODS = [("fine", "hp"), ("fine", "random"), ("coarse", "hp"), ("coarse", "block")]

#: Framing of one message between workers (docs/cpals.md), per exchange mode: a
#: worker-to-worker message bundles, per step and pair of workers, one float64 vector per
#: pair of parts; its logged size is the payload plus a constant plus a constant per part
#: pair, give or take the few bytes pickle spends on each vector's length and part ids.
#: direct: the pushed frames ([(mail id, vector), ...]); graph: the get_data reply.
#: bytes per message and per part pair in it: the direct exchange over its own sockets
#: (pickle protocol 5 with out-of-band buffers, the run's token, a size table; 104 and 27
#: over distributed's comm), the graph mode's task results
FRAMING = {"direct": (146, 35), "graph": (224, 160)}
FRAME_SLACK = 8


def rel(a, b):
    return float(np.abs(np.asarray(a) - b).max() / np.abs(b).max())


def references(s):
    """(lam, factors, fits) of the partition-aware reference and of the plain serial."""
    finals, reports = run_local(program(s), statics(s))
    lam, factors = assemble(s, finals)
    fits = [row(s, u, r)["fit"] for u, r in enumerate(reports)]
    o = s.options
    ser = run_serial(s.tensor, o.rank, o.iters, o.tol, o.seed)
    return (lam, factors, fits), (ser["lam"], ser["factors"], [h["fit"] for h in ser["history"]])


def worker_messages(s, placement: dict):
    """Independent count, from the program's per-step receivers and the placement: per
    step, the transfers between workers ({(src worker, dst worker): part pairs})."""
    where = {int(p): w for p, w in placement.items()}
    prog = program(s)
    out = []
    for t in range(prog.nsteps):
        pairs = collections.Counter()
        for src, dsts in prog.dests(t).items():
            for dst in dsts:
                if where[src] != where[dst]:
                    pairs[(where[src], where[dst])] += 1
        out.append((prog.unit_of(t), pairs))
    return out


#: Every K, grain and partition in both exchange modes; the default run keeps the direct
#: mode (the frame's default) complete and two graph-mode cases (one per grain), the other
#: graph-mode cases are marked slow (each is a few seconds; together they would double it).
GRAPH_DEFAULT = {(4, "fine", "hp"), (2, "coarse", "block")}
CASES = [(K, grain, part, "direct") for K in (2, 4) for grain, part in METHODS] + \
    [pytest.param(K, grain, part, "graph", marks=() if (K, grain, part) in GRAPH_DEFAULT
                  else pytest.mark.slow) for K in (2, 4) for grain, part in METHODS]


@pytest.mark.parametrize("K, grain, part, exchange", CASES)
def test_cluster_equals_references(client2, setup_of, K, grain, part, exchange):
    s = setup_of("umls", K, grain, part, rank=10, iters=20, tol=0.0)
    res = dh.cpals.fit(s.tensor, 10, K, grain=grain, partition=part, iters=20, tol=0,
                       client=client2, check_serial=True, progress=False,
                       exchange=exchange)
    (lam, factors, fits), (lam_s, factors_s, fits_s) = references(s)
    # the same Program in one process: the same bits
    assert np.array_equal(res.weights, lam)
    assert all(np.array_equal(a, b) for a, b in zip(res.factors, factors))
    assert res.fit == fits and len(fits) == 20
    # the textbook serial CP-ALS: another summation order, 1e-9 relative
    assert rel(res.weights, lam_s) <= 1e-9
    assert all(rel(a, b) <= 1e-9 for a, b in zip(res.factors, factors_s))
    assert rel(res.fit, fits_s) <= 1e-9
    rep = res.report()
    check = rep["serial_check"]
    assert check["identical"] is True and check["plain_serial"]["within_tolerance"] is True
    # messages between workers: the planned ones, per iteration
    assert rep["execution"]["exchange"] == exchange
    m = rep["measured"]
    base, per_pair = FRAMING[exchange]
    steps = worker_messages(s, rep["placement"])
    per_unit = collections.Counter()
    frame = collections.Counter()
    for u, pairs in steps:
        per_unit[u] += len(pairs)
        frame[u] += sum(base + per_pair * n for n in pairs.values())
    assert m["inter_worker_messages"] == m["planned_messages"] == sum(per_unit.values()) > 0
    for h in res.history:
        u = h["unit"]
        assert h["measured_messages"] == h["planned_messages"] == per_unit[u]
        # bytes: planned rows x R x 8 (+ the all-reduce words) + the framing
        extra = h["measured_bytes"] - h["planned_bytes"]
        assert abs(extra - frame[u]) <= FRAME_SLACK * per_unit[u], (u, extra, frame[u])
    assert m["planned_bytes"] == 8 * words_between_workers(s, rep["placement"])
    assert abs(m["inter_worker_bytes"] - m["planned_bytes"] - sum(frame.values())) <= \
        FRAME_SLACK * m["inter_worker_messages"]


def words_between_workers(s, placement: dict) -> int:
    """Words the run moves between workers: rows x R of the fold/expand plans plus the
    all-reduce vectors, over the messages whose parts sit on different workers."""
    where = np.array([placement[str(p)] for p in range(s.K)])
    total = 0
    for st in program(s).steps:
        if st.sends is not None:
            words = st.sends.volume * st.sends.message_words()
            total += int(words[where[st.sends.src] != where[st.sends.dst]].sum())
    return total


@pytest.mark.parametrize("grain, part", [
    ("fine", "hp"), pytest.param("coarse", "hp", marks=pytest.mark.slow)])
def test_the_same_run_twice_is_bitwise_identical(client2, grain, part):
    path = dh.datasets.path("tensor")
    a, b = (dh.cpals.fit(path, 8, 4, grain=grain, partition=part, iters=10, tol=0,
                         client=client2, progress=False) for _ in range(2))
    assert np.array_equal(a.weights, b.weights) and a.fit == b.fit
    assert all(np.array_equal(x, y) for x, y in zip(a.factors, b.factors))


@pytest.mark.parametrize("exchange", ["direct", "graph"])
def test_stop_rule_stops_where_the_serial_run_stops(client2, setup_of, exchange):
    s = setup_of("umls", 4, "fine", "random", rank=6, iters=50, tol=1e-3)
    res = dh.cpals.fit(s.tensor, 6, 4, grain="fine", partition="random", iters=50, tol=1e-3,
                       client=client2, check_serial=True, progress=False, exchange=exchange)
    ser = run_serial(s.tensor, 6, 50, 1e-3, 0)
    assert 2 <= len(res.history) == len(ser["history"]) < 50
    rep = res.report()
    assert rep["execution"]["stop_rule"] is True
    assert rep["serial_check"]["identical"] is True
    assert rep["serial_check"]["plain_serial"]["within_tolerance"] is True
    # graph mode: the last step's messages were never fetched, and are not planned either;
    # direct mode: they were pushed (into a mailbox nobody reads), and are planned
    m = rep["measured"]
    assert m["inter_worker_messages"] == m["planned_messages"]
    assert all(h["measured_messages"] == h["planned_messages"] for h in res.history)


def test_the_workers_stop_a_converging_run_in_one_task(client2, setup_of, tmp_path):
    """tol > 0, direct exchange: the parts evaluate the stop rule themselves (the fit is
    computed from allreduced terms, equal on every part), so the run is one task per
    worker, not a window per iteration the client waits for; it stops where the serial
    run stops, also when resumed one iteration before (the checkpoint keeps the last fit)."""
    from distributed import get_task_stream

    s = setup_of("umls", 4, "fine", "random", rank=6, iters=50, tol=1e-3)
    kw = dict(grain="fine", partition="random", tol=1e-3, client=client2, progress=False,
              exchange="direct")
    with get_task_stream(client2) as ts:
        res = dh.cpals.fit(s.tensor, 6, 4, iters=50, **kw)
    n = len(run_serial(s.tensor, 6, 50, 1e-3, 0)["history"])
    assert 2 <= len(res.history) == n < 50
    steps = [r["key"] for r in ts.data if str(r["key"]).startswith("('cpals-")
             and "-init-" not in str(r["key"]) and "-final-" not in str(r["key"])]
    assert len(steps) == 2                                   # one per worker
    ck = tmp_path / "ck"
    dh.cpals.fit(s.tensor, 6, 4, iters=n - 1, checkpoint=ck, **kw)
    rest = dh.cpals.fit(s.tensor, 6, 4, iters=50, checkpoint=ck, resume=True, **kw)
    assert rest.report()["recovery"]["resumed_from"] == n - 1
    assert len(rest.history) == n and rest.fit == res.fit
    assert all(np.array_equal(x, y) for x, y in zip(rest.factors, res.factors))


def test_checkpoint_then_resume_with_more_iterations(client2, tmp_path):
    path = dh.datasets.path("tensor")
    kw = dict(grain="fine", partition="hp", tol=0, client=client2, progress=False)
    full = dh.cpals.fit(path, 6, 4, iters=8, **kw)
    ck = tmp_path / "ck"
    first = dh.cpals.fit(path, 6, 4, iters=5, checkpoint=ck, **kw)
    assert (ck / "distribution.npz").exists()
    assert first.fit == full.fit[:5]
    with pytest.raises(InputError, match="--resume"):
        dh.cpals.fit(path, 6, 4, iters=8, checkpoint=ck, **kw)
    with pytest.raises(InputError, match="rank"):      # the fingerprint differs
        dh.cpals.fit(path, 7, 4, iters=8, checkpoint=ck, resume=True, **kw)
    rest = dh.cpals.fit(path, 6, 4, iters=8, checkpoint=ck, resume=True, **kw)
    assert rest.report()["recovery"]["resumed_from"] == 5
    assert [h["iteration"] for h in rest.history] == list(range(8))
    assert rest.fit == full.fit
    assert np.array_equal(rest.weights, full.weights)
    assert all(np.array_equal(x, y) for x, y in zip(rest.factors, full.factors))


def _kill_step(s, unit: int, exchange: str) -> int:
    """The step in the key of a task of iteration ``unit``: graph mode, the third step of
    the iteration; direct mode, the one task per worker that runs the iteration's steps
    (keyed by its last step)."""
    ends = program(s).unit_steps
    return ends[unit - 1] + 2 if exchange == "graph" else ends[unit]


@pytest.mark.parametrize("with_checkpoint, exchange", [
    # a private cluster, a nanny restart and a recovery: ~15-25 s each on this machine
    # (the kit's own kill tests take as long), so one in the default run
    (True, "direct"), pytest.param(True, "graph", marks=pytest.mark.slow),
    pytest.param(False, "direct", marks=pytest.mark.slow),
    pytest.param(False, "graph", marks=pytest.mark.slow)])
def test_a_killed_worker_gives_the_same_factors(make_client, setup_of, tmp_path,
                                                with_checkpoint, exchange, unit_tasks):
    client = make_client(2)
    s = setup_of("umls", 4, "coarse", "hp", rank=8, iters=10, tol=0.0)
    (lam, factors, fits), _ = references(s)
    step = _kill_step(s, 6, exchange)
    client.register_plugin(KillOnce(TaskKey("cpals-", {2: step}), str(tmp_path / "killed")),
                           name="kill-cpals")
    res = dh.cpals.fit(s.tensor, 8, 4, grain="coarse", partition="hp", iters=10, tol=0,
                       client=client, progress=False, max_restarts=2, exchange=exchange,
                       checkpoint=tmp_path / "ck" if with_checkpoint else None)
    assert (tmp_path / "killed").exists()
    rec = res.report()["recovery"]["recoveries"]
    assert len(rec) == 1 and rec[0]["lost"]
    assert rec[0]["restart"] == (6 if with_checkpoint else 0)
    assert np.array_equal(res.weights, lam) and res.fit == fits
    assert all(np.array_equal(x, y) for x, y in zip(res.factors, factors))


def test_cli_run_checkpoint_and_resume(client2, tmp_path, capsys):
    from daskhpc import cli

    path = dh.datasets.path("tensor")
    addr = client2.scheduler.address
    base = ["run", "cpals", path, "--parts", "2", "--rank", "5", "--tol", "0",
            "--scheduler-address", addr, "--checkpoint", str(tmp_path / "ck")]
    # the first half in graph mode, the rest in the default (direct): the same bits
    assert cli.main(base + ["--iters", "3", "--exchange", "graph",
                            "--json", str(tmp_path / "a.json")]) == 0
    assert cli.main(base + ["--iters", "6", "--resume", "--check-serial",
                            "--json", str(tmp_path / "b.json")]) == 0
    a = json.loads((tmp_path / "a.json").read_text())
    b = json.loads((tmp_path / "b.json").read_text())
    assert a["execution"]["exchange"] == "graph" and b["execution"]["exchange"] == "direct"
    assert a["quality"]["fit"] == b["quality"]["fit"][:3] and b["quality"]["iterations"] == 6
    assert b["recovery"]["resumed_from"] == 3
    assert b["serial_check"]["identical"] is True
    assert b["serial_check"]["plain_serial"]["within_tolerance"] is True
    assert "textbook serial CP-ALS: max relative difference" in capsys.readouterr().out
    assert cli.main(["run", "cpals", path, "--rank", "0", "--scheduler-address", addr]) == 2


def test_demo_and_the_dashboard_history(client2):
    from daskhpc.cpals import _cli
    from daskhpc.cpals._dashboard import fit_rows

    rep = _cli.CPALS().demo(client2)
    assert rep["serial_check"]["identical"] is True and rep["parts"] == 2
    fits = rep["quality"]["fit"]
    # the frame published every iteration's row to the scheduler's dashboard state, and
    # the CP-ALS panel draws them
    got = client2.run_on_scheduler(_panel_rows)
    assert got["fit"] == fits and got["iteration"] == list(range(len(fits)))
    assert all(t > 0 for t in got["time_ms"])
    assert fit_rows({"workflow": "ssgd"}, [{"fit": 1.0}])["fit"] == []


def _panel_rows(dask_scheduler):
    from daskhpc.cpals._dashboard import fit_rows
    from daskhpc.dashboard import PLUGIN_NAME

    st = dask_scheduler.plugins[PLUGIN_NAME].state
    return fit_rows(st.run, st.history)


def test_workers_run_blas_single_threaded(client2):
    """Dask's nanny starts workers with OPENBLAS_NUM_THREADS=1 (pre-spawn-environ)."""
    import os

    got = client2.run(lambda: os.environ.get("OPENBLAS_NUM_THREADS"))
    assert set(got.values()) == {"1"}
