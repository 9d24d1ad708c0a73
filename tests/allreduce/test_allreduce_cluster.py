"""The allreduce on real clusters: it equals run_local bit for bit on every rank, reruns
are identical, futures in -> totals stay on the ranks' workers, and what moves between
workers per stage is the plan on the same workers plus a per-message framing."""

from __future__ import annotations

import json

import numpy as np
import pytest
from allreduce_reference import vectors

import daskhpc.allreduce as ar


ALGOS = sorted(ar.ALGORITHMS)


def same_streams(a, b) -> bool:
    return a.dense == b.dense and np.array_equal(a.val, b.val) and \
        (a.dense or np.array_equal(a.idx, b.idx))


def check_equal_to_local(res, vecs, algorithm, **kw):
    loc = ar.allreduce_local(vecs, algorithm=algorithm, **kw)
    assert len(res.streams) == len(loc.streams)
    for got, want in zip(res.streams, loc.streams):
        assert same_streams(got, want)
    assert res.report()["quality"]["ranks_identical"] is True
    return loc


@pytest.mark.parametrize("algorithm", ALGOS)
@pytest.mark.parametrize("P", [4, 5])
def test_allreduce_equals_run_local_bitwise(client3, algorithm, P):
    # P = 5 folds (3.1.4) and puts two ranks on some workers; float values, some overlap
    vecs = vectors(3000, P, 0.05, seed=P, integer=False)
    res = ar.allreduce(vecs, algorithm, client=client3, check_serial=True, progress=False)
    check_equal_to_local(res, vecs, algorithm)
    check = res.report()["serial_check"]
    assert check["within_bound"] is True
    m = res.report()["measured"]
    assert m["inter_worker_bytes"] >= m["planned_bytes"] > 0


@pytest.mark.parametrize("exchange", ["direct", "graph"])
def test_allreduce_equals_run_local_and_reruns_are_identical(client3, exchange):
    vecs = vectors(20000, 3, 0.01, seed=7, integer=False)
    kw = dict(algorithm="ssar_split_allgather", client=client3, repeat=2)
    a = ar.allreduce(vecs, exchange=exchange, **kw)
    assert a.report()["execution"]["exchange"] == exchange
    check_equal_to_local(a, vecs, "ssar_split_allgather")
    b = ar.allreduce(vecs, exchange=exchange, **kw)
    for x, y in zip(a.streams, b.streams):
        assert same_streams(x, y)
    assert [h["call"] for h in a.history] == [0, 1]
    m = a.report()["measured"]
    # P = 3 folds onto Q = 2: fold 1 + split Q (Q - 1) + allgather Q log2 Q + unfold 1
    assert m["inter_worker_messages"] == m["planned_messages"] == 2 * (1 + 2 + 2 + 1)
    assert 0 < m["framing_bytes_per_message"] < 1000


def test_measured_bytes_per_stage_are_the_plan_plus_framing(client3):
    # one rank per worker: every planned message between ranks is one transfer
    vecs = vectors(60000, 3, 0.02, seed=3, integer=False)
    res = ar.allreduce(vecs, "ssar_rec_dbl", client=client3, repeat=2, exchange="graph",
                       progress=False)
    rep = res.report()
    # an independent count of the plan per stage: stage 0 folds rank 2 into rank 0
    # (k items), stage 1 exchanges the partials of ranks 0 and 1, the unfold sends the
    # total to rank 2; every item is 12 bytes while sparse
    H = [np.flatnonzero(v) for v in vecs]
    u02 = np.union1d(H[0], H[2])
    want = [12 * H[2].size, 12 * (u02.size + H[1].size), 12 * np.union1d(u02, H[1]).size]
    assert [s["bytes"] for s in rep["stages"]] == want
    for s, b in zip(rep["stages"], want):
        assert s["planned_worker_bytes"] == 2 * b                # two calls
        assert s["measured_messages"] == s["planned_worker_messages"] == 2 * s["messages"]
        framing = (s["measured_bytes"] - s["planned_worker_bytes"]) / s["measured_messages"]
        assert 100 < framing < 1000, framing                     # Dask's message framing
    m = rep["measured"]
    assert m["inter_worker_messages"] == m["planned_messages"] == 2 * 4
    assert m["inter_worker_bytes"] == sum(s["measured_bytes"] for s in rep["stages"])


@pytest.mark.parametrize("P", [2, 4])
def test_measured_messages_are_the_planned_ones_on_two_workers(client2, P):
    # P = 4 on 2 workers: the plan bundles the messages per worker pair, as they are sent
    vecs = vectors(20000, P, 0.01, seed=P, integer=False)
    res = ar.allreduce(vecs, "ssar_rec_dbl", client=client2, repeat=3, progress=False)
    rep = res.report()
    m = rep["measured"]
    assert m["inter_worker_messages"] == m["planned_messages"] > 0, m
    assert m["inter_worker_bytes"] >= m["planned_bytes"]
    for s in rep["stages"]:
        assert s["measured_messages"] == s["planned_worker_messages"], s


def _pair(idx, val):
    return idx, val


def test_futures_in_totals_stay_on_the_ranks_workers(client3):
    from daskhpc.runtime import worker_addresses

    ws = worker_addresses(client3)
    N = 50000
    vecs = ar.uniform_vectors(N, 3, 0.01, seed=11, dtype="int64")
    futs = [client3.submit(_pair, i, v, workers=[ws[(r + 1) % 3]], pure=False)
            for r, (i, v) in enumerate(vecs)]
    res = ar.allreduce(futs, N=N, client=client3, check_serial=True)
    assert res.streams == [] and len(res.futures) == 3
    where = client3.who_has(res.futures)
    for r, f in enumerate(res.futures):
        assert where[f.key] == (ws[(r + 1) % 3],)               # computed where rank r is
    want = ar.allreduce_local(vecs, N=N, algorithm=res.choice["algorithm"])
    for got, w in zip(client3.gather(res.futures), want.streams):
        assert all(np.array_equal(a, b) for a, b in zip(got, ar._stream.to_payload(w)))
    assert res.report()["serial_check"]["identical"] is True    # integers: exact
    assert np.array_equal(res.total, want.total)                 # fetched from rank 0's worker
    bad = [client3.submit(_pair, np.array([5]), np.array([1.0]), pure=False)]
    from daskhpc.errors import InputError

    with pytest.raises(InputError, match="outside"):
        ar.allreduce(bad, N=4, client=client3)


@pytest.mark.parametrize("algorithm", ["ssar_rec_dbl", "ssar_split_allgather",
                                       "dsar_split_allgather"])
def test_futures_are_read_and_totals_kept_where_they_are(client3, algorithm):
    from daskhpc.runtime import worker_addresses

    ws = worker_addresses(client3)
    N, P = 40000, 4
    vecs = vectors(N, P, 0.02, seed=5, integer=False)
    futs = [client3.submit(np.asarray, vecs[r], workers=[ws[(r + 2) % 3]], pure=False)
            for r in range(P)]
    prog = ar.allreduce(futs, algorithm, N=N, client=client3, repeat=2, progress=False)
    rep = prog.report()
    assert prog.streams == []
    where = client3.who_has(prog.futures)
    assert [where[f.key] for f in prog.futures] == [(ws[(r + 2) % 3],) for r in range(P)]
    loc = ar.allreduce_local(vecs, algorithm=algorithm)
    for a, want in zip(client3.gather(prog.futures), loc.streams):
        assert all(np.array_equal(x, y) for x, y in zip(a, ar._stream.to_payload(want)))
    m = rep["measured"]
    assert m["inter_worker_messages"] == m["planned_messages"] > 0, m
    # the vectors from the client with gather=False: the totals stay on the workers too
    kept = ar.allreduce(vecs, algorithm, client=client3, gather=False, progress=False)
    assert kept.streams == []
    for a, want in zip(client3.gather(kept.futures), loc.streams):
        assert all(np.array_equal(x, y) for x, y in zip(a, ar._stream.to_payload(want)))


def test_cli_run_reports_stages_and_the_choice(client3):
    from daskhpc.errors import InputError
    from daskhpc.testing import workflow_call

    def run(*argv):        # the real CLI parser, run on the session's cluster
        wf, call, opts = workflow_call("run", "allreduce", argv, client3)
        return wf.run(call, opts)

    rep = run("--N", "20000", "--parts", "4", "--density", "0.01", "--repeat", "2",
              "--exchange", "graph", "--check-serial")
    assert rep["choice"]["algorithm"] == rep["algorithm"]
    assert rep["execution"]["exchange"] == "graph"
    assert rep["serial_check"]["within_bound"] is True
    assert len(rep["timing"]["per_iteration_s"]) == 2
    assert all("measured_bytes" in s for s in rep["stages"])
    assert rep["measured"]["inter_worker_messages"] == rep["measured"]["planned_messages"]
    json.dumps(rep)                                           # plain values only
    with pytest.raises(InputError, match="density"):
        run("--N", "10", "--parts", "2")
