"""dW^1 as rows between the parts that share them (``_plan.first_layer_rows``): the same
weights, bit for bit, as the dense allreduce of the whole dW^1, and the rows the plan
counts are the shared feature rows counted here from the features and the partition."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from daskhpc.comm import run_local
from daskhpc.gcn._plan import first_layer_rows, plan_sections
from daskhpc.gcn._program import assemble, program, statics
from daskhpc.gcn._setup import prepare


def communities(n=240, groups=4, d=100_000, seed=3):
    """A graph of ``groups`` dense communities with a few edges between them; each node
    has 3 features of its community's quarter of the columns and one of 8 shared by all
    (so the parts of a good partition share a few feature rows, not all; d_0 large
    enough that the dW^1 words saved outweigh the default model's 0.8 ms a message)."""
    rng = np.random.default_rng(seed)
    g = np.arange(n) % groups
    i, j = rng.integers(0, n, (2, 8 * n))
    keep = (g[i] == g[j]) | (rng.random(i.size) < 0.05)
    A = sp.coo_array((np.ones(keep.sum()), (i[keep], j[keep])), shape=(n, n)).tocsr()
    A = ((A + A.T) > 0).astype(float)
    span = (d - 8) // groups
    cols = g[:, None] * span + rng.integers(0, span, (n, 3))
    cols = np.hstack([cols, rng.integers(d - 8, d, (n, 1))])
    X = sp.csr_array((np.ones(cols.size), (np.repeat(np.arange(n), 4), cols.ravel())),
                     shape=(n, d))
    X.sum_duplicates()
    y = g % 3
    split = (np.arange(0, n, 2), np.arange(1, n, 4), np.arange(3, n, 4))
    return A, X, y, split


def fit_local(s, dense: bool):
    if dense:
        s.patterns()["w1"] = None          # the dense allreduce of every dW
    finals, reports = run_local(program(s), statics(s))
    return assemble(s, finals), reports


@pytest.mark.parametrize("K", [2, 3, 4])
@pytest.mark.parametrize("options", [{}, {"optimizer": "sgd", "lr": 0.5},
                                     {"dtype": "float32"}, {"minibatch": True}])
def test_rows_give_the_dense_allreduces_weights_bit_for_bit(K, options):
    A, X, y, split = communities()
    kw = dict(partition="hp", epochs=4, layers=(8,), **options)
    if kw.pop("minibatch", False):
        from daskhpc.gcn._minibatch import attach_batches

        rows, dense = (prepare(A, K, X, y, split, **kw) for _ in range(2))
        for s in (rows, dense):
            attach_batches(s, batch_size=0.5, steps=4, sampler="node")
    else:
        rows, dense = (prepare(A, K, X, y, split, **kw) for _ in range(2))
    w1 = first_layer_rows(rows)
    assert w1 is not None and w1["plan"].num_messages > 0
    a, rep_a = fit_local(rows, dense=False)
    b, rep_b = fit_local(dense, dense=True)
    assert first_layer_rows(dense) is None
    for x, z in zip(a["params"], b["params"]):
        assert x.dtype == z.dtype and np.array_equal(x, z)
    assert np.array_equal(a["logits"], b["logits"])
    assert [r[0].get("sums") for r in rep_a] == [r[0].get("sums") for r in rep_b]


def test_the_plan_counts_the_shared_feature_rows():
    A, X, y, split = communities()
    s = prepare(A, 3, X, y, split, partition="hp", epochs=1, layers=(8,))
    parts = s.assignment.parts
    support = [set() for _ in range(3)]
    for i, row in enumerate(sp.csr_array(X).tolil().rows):
        support[parts[i]].update(row)
    shared = sum(len(support[m] & support[n]) for m in range(3) for n in range(3) if m != n)
    rows = plan_sections(s, compare_rp=False)["allreduce"]["dW1_rows"]
    assert rows["tot_vol"] == shared > 0
    assert rows["planned_bytes"] == shared * 8 * 8           # 8 hidden words of 8 bytes
    assert rows["dense_bytes"] == 4 * 100_000 * 8 * 8        # K = 3: 4 messages of dW^1
    kept = [set(k.tolist()) for k in first_layer_rows(s)["keep"]]
    assert kept[1:] == support[1:] and kept[0] >= support[0]
    assert set().union(*kept) == set(range(X.shape[1]))     # part 0 keeps the unused


def test_dense_features_and_aggregate_first_keep_the_dense_allreduce():
    A, X, y, split = communities(d=2000)
    assert first_layer_rows(prepare(A, 2, X.toarray() + 0.5, y, split, epochs=1)) is None
    assert first_layer_rows(prepare(A, 2, X, y, split, epochs=1, order="aggregate")) is None
    assert first_layer_rows(prepare(A, 1, X, y, split, epochs=1)) is None


def test_the_plan_command_says_what_dw1_sends(capsys):
    from daskhpc.cli import main

    assert main(["plan", "gcn", "cora", "--parts", "2", "--no-compare"]) == 0
    line = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("dW allreduce")]
    assert line and "dW1 as " in line[0] and "shared rows in 2 messages" in line[0]


def test_few_features_keep_the_dense_rounds_where_rows_add_messages():
    """With 2,000 features the dW^1 words saved at K = 3 are worth less than the extra
    messages (every part sends to two, 0.8 ms each by the default model): the dense
    allreduce; at K = 2 the rows ride in the one round's message, so rows."""
    A, X, y, split = communities(d=2000)
    assert first_layer_rows(prepare(A, 3, X, y, split, partition="hp", epochs=1,
                                    layers=(8,))) is None
    assert first_layer_rows(prepare(A, 2, X, y, split, partition="hp", epochs=1,
                                    layers=(8,))) is not None
