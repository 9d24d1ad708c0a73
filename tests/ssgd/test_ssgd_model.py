"""The factor model after the run: predictions and top-N recommendations by the input's
own ids, kept on disk and used in a fresh process."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import daskhpc as dh
from daskhpc import datasets


@pytest.fixture(scope="module")
def model():
    return dh.ssgd.serial_fit(datasets.path("ratings"), 2, epochs=3, partition="random")


def test_predictions_by_original_id_equal_predictions_by_index(model):
    users, items = model.row_ids[[0, 5, 9]], model.col_ids[[3, 1, 100]]
    by_id = model.predict(users, items)
    W, H = model.W[[0, 5, 9]], model.H[[3, 1, 100]]
    assert np.array_equal(by_id, np.clip(np.einsum("if,if->i", W, H), *model.clip))
    with pytest.raises(KeyError, match="unknown user 999999"):
        model.predict([999999], [items[0]])
    with pytest.raises(KeyError, match="unknown item -4"):
        model.predict([users[0]], [-4])


def test_recommend_never_returns_an_item_rated_in_training(model):
    for u in model.row_ids[:40]:
        rec = model.recommend(u, 20)
        assert len(rec) == 20 and len(set(rec.tolist())) == 20
        i = model.index(0, [u])[0]
        rated = model.col_ids[model.seen.indices[model.seen.indptr[i]:model.seen.indptr[i + 1]]]
        assert not set(rec.tolist()) & set(rated.tolist())
        scores = model.predict(np.full(20, u), model.recommend(u, 20, shrink=0))
        assert np.all(np.diff(scores) <= 1e-12)          # best first (before clipping ties)
        # by default: best first by the lift damped by the item's training ratings
        lift = model.W[i] @ model.H[model.index(1, rec)].T
        n_i = np.diff(model.seen.tocsc().indptr)[model.index(1, rec)]
        base = (model.W[i] @ model.H[model.seen.indices[
            model.seen.indptr[i]:model.seen.indptr[i + 1]]].T).mean()
        assert np.all(np.diff(base + n_i / (n_i + 25) * (lift - base)) <= 1e-12)


def test_the_saved_model_recommends_the_same_in_a_fresh_process(model, tmp_path):
    model.save(tmp_path / "mf")
    u = int(model.row_ids[7])
    code = ("import json, daskhpc as dh\n"
            f"m = dh.load({str(tmp_path / 'mf')!r}, 'ssgd')\n"
            f"print(json.dumps([m.recommend({u}, 10).tolist(), "
            f"m.predict([{u}], [int(m.col_ids[0])]).tolist()]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=280, check=True).stdout
    rec, pred = json.loads(out)
    assert rec == model.recommend(u, 10).tolist()
    assert pred == model.predict([u], [model.col_ids[0]]).tolist()


@pytest.mark.parametrize("fitted", ["MatrixFactorization", "serial_fit"])
def test_default_top10_are_items_many_users_rated(fitted):
    """Every user's default top 10 of the bundled ratings: items of a median of at least
    20 ratings each, by the estimator (biased, Surprise's defaults) and by the paper's
    unbiased ``fit`` defaults alike (undamped, both list items of 1-3 ratings)."""
    r = datasets.ratings()
    users, items = r.index_maps[0], r.index_maps[1][r.meta["cols"]]
    ids, counts = np.unique(items, return_counts=True)

    def median_ratings(top):                # of the items of one list
        return np.median(counts[np.searchsorted(ids, top)])

    if fitted == "MatrixFactorization":
        table = np.column_stack([users[r.meta["rows"]], items, r.meta["vals"]])
        recommend = dh.ssgd.MatrixFactorization().fit(table).recommend
    else:
        recommend = dh.ssgd.serial_fit(datasets.path("ratings"), 2).recommend
    medians = np.array([median_ratings(recommend(u, 10)) for u in users])
    assert medians.size == 610 and (medians >= 20).all(), np.sort(medians)[:10]
    undamped = [median_ratings(recommend(u, 10, shrink=0)) for u in users[:50]]
    assert np.median(undamped) < 20          # what the damping changes
