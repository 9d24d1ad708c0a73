"""The biased model: mu + b_u + b_i + w_u . h_i, its biases carried by every
exchange, the model kept on disk, and the MatrixFactorization estimator."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import daskhpc as dh
from daskhpc.ssgd import MatrixFactorization, fit, plan, serial_fit
from daskhpc.ssgd._kernels import block_seed, sgd_block
from daskhpc.ssgd._setup import prepare


def test_one_biased_update_is_korens_rule():
    # Surprise's SVD.sgd: e = r - (mu + bu + bi + p.q); bu += lr (e - reg_b bu), same for
    # bi; p += lr (e q - reg p), q += lr (e p_old - reg q).
    W = np.array([[0.5, 1.0, 0.2]])           # [p_u | b_u]
    H = np.array([[2.0, -1.0, -0.3]])         # [q_i | b_i]
    p0, q0, bu, bi = W[0, :2].copy(), H[0, :2].copy(), 0.2, -0.3
    lr, reg, reg_b, mu, r = 0.1, 0.05, 0.02, 3.5, 4.0
    loss = sgd_block(W, H, np.array([0]), np.array([0]), np.array([r]), lr, reg,
                     block_seed(0, 0, 0, 0), True, reg_b, mu, True)
    e = r - (mu + bu + bi + p0 @ q0)
    assert np.allclose(W[0, :2], p0 + lr * (e * q0 - reg * p0))
    assert np.allclose(H[0, :2], q0 + lr * (e * p0 - reg * q0))
    assert np.isclose(W[0, 2], bu + lr * (e - reg_b * bu))
    assert np.isclose(H[0, 2], bi + lr * (e - reg_b * bi))
    assert np.isclose(loss, 0.5 * (e * e + reg * (p0 @ p0 + q0 @ q0) + reg_b * (bu**2 + bi**2)))


def test_unbiased_is_the_default_and_the_biased_model_differs(tiny):
    a = serial_fit(tiny, 2, epochs=2, partition="random", test_fraction=0.25)
    b = serial_fit(tiny, 2, epochs=2, partition="random", test_fraction=0.25, biased=False)
    c = serial_fit(tiny, 2, epochs=2, partition="random", test_fraction=0.25, biased=True)
    assert np.array_equal(a.W, b.W) and a.user_bias is None and "model" not in a.report()
    assert c.W.shape == a.W.shape and c.user_bias.shape == (12,) and c.item_bias.shape == (8,)
    assert c.mu == prepare(tiny, 2, partition="random", test_fraction=0.25).train.vals.mean()
    assert c.report()["model"] == {"biased": True, "mu": c.mu, "reg_bias": 0.1,
                                   "words_per_row": 17}
    # the result's own predictions are the biased formula
    u, i = np.array([0, 3, 11]), np.array([7, 0, 2])
    want = np.clip(c.mu + c.user_bias[u] + c.item_bias[i] +
                   np.einsum("if,if->i", c.W[u], c.H[i]), *c.clip)
    assert np.array_equal(c.predict(u, i), want)


@pytest.mark.parametrize("strategy", ["dsgd", "p2p", "hc"])
def test_biased_distributed_equals_serial_bit_for_bit(client2, tiny, exchange, strategy):
    res = fit(tiny, 2, client=client2, strategy=strategy, epochs=2, partition="random",
              test_fraction=0.25, biased=True, reg_bias=0.05, check_serial=True)
    rep = res.report()
    chk = rep["serial_check"]           # W and H with their bias columns, and the history
    assert chk["identical"] and chk["max_abs_diff"] == 0.0 and chk["history_identical"]
    ser = serial_fit(tiny, 2, strategy=strategy, epochs=2, partition="random",
                     test_fraction=0.25, biased=True, reg_bias=0.05)
    assert np.array_equal(res.user_bias, ser.user_bias)
    assert np.array_equal(res.item_bias, ser.item_bias)
    assert np.any(res.item_bias != 0)                      # the biases were trained
    # every moved H row carried its bias: the payload is F + 1 words per row, exactly
    assert rep["plan"]["words_per_unit"] == 17
    m = rep["measured"]
    assert m["planned_bytes"] > 0 and m["inter_worker_bytes_sizeof"] == m["planned_bytes"]
    rows = rep["run_plan"]["tot_vol"] + rep["eval_plan"]["tot_vol"]
    assert m["planned_bytes"] == 8 * 17 * rows


def test_biased_checkpoint_resumes_bit_for_bit(client2, tiny, tmp_path):
    # the checkpoint files hold W and H with their bias columns
    opts = dict(strategy="hc", partition="random", test_fraction=0.25, biased=True)
    ck = tmp_path / "ck"
    fit(tiny, 2, client=client2, checkpoint=ck, epochs=2, **opts)
    res = fit(tiny, 2, client=client2, checkpoint=ck, resume=True, epochs=4,
              check_serial=True, **opts)
    assert res.report()["recovery"]["resumed_from"] == 2
    assert res.report()["serial_check"]["identical"]
    with pytest.raises(dh.errors.InputError, match="this checkpoint was of a run with other options"):
        fit(tiny, 2, client=client2, checkpoint=ck, resume=True, epochs=4,
            **{**opts, "biased": False})


def test_plan_on_the_command_line_takes_biased(tmp_path):
    from cli_script import daskhpc

    path = tmp_path / "r.csv"
    path.write_text("userId,movieId,rating\n" + "".join(
        f"{u},{100 + (u * 7 + k) % 9},{1 + (u + k) % 5}\n" for u in range(12) for k in range(3)))
    code, out, err = daskhpc("plan", "ssgd", path, "--parts", "2", "--partition", "random",
                             "--rank", "8", "--biased", "--reg-bias", "0.05", "--json", "-")
    assert code == 0, err
    rep = json.loads(out)
    assert rep["plan"]["words_per_unit"] == 9
    assert rep["model"]["biased"] and rep["model"]["reg_bias"] == 0.05


@pytest.mark.slow
def test_run_biased_on_the_command_line_saves_the_biased_model(tmp_path):
    from cli_script import daskhpc

    code, out, err = daskhpc("run", "ssgd", dh.datasets.path("ratings"), "--workers", "2",
                             "--parts", "2", "--partition", "random", "--epochs", "2",
                             "--biased", "--check-serial", "--save", tmp_path / "m",
                             "--json", tmp_path / "r.json")
    assert code == 0, err
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["serial_check"]["identical"] and rep["plan"]["words_per_unit"] == 17
    assert rep["measured"]["inter_worker_bytes_sizeof"] == rep["measured"]["planned_bytes"]
    m = dh.load(tmp_path / "m", "ssgd")
    ser = serial_fit(dh.datasets.path("ratings"), 2, partition="random", epochs=2,
                     biased=True)
    assert m.biased and np.array_equal(m.item_bias, ser.item_bias) and m.mu == ser.mu
    assert np.array_equal(m.predict(ser.row_ids[:4], ser.col_ids[:4]),
                          ser.predict(ser.row_ids[:4], ser.col_ids[:4]))


def test_saved_biased_model_predicts_the_same_in_a_fresh_process(tmp_path):
    model = serial_fit(dh.datasets.path("ratings"), 1, epochs=1, biased=True, rank=4)
    model.save(tmp_path / "mf")
    u = int(model.row_ids[7])
    items = [int(x) for x in model.col_ids[:5]]
    code = ("import json, daskhpc as dh\n"
            f"m = dh.load({str(tmp_path / 'mf')!r}, 'ssgd')\n"
            f"print(json.dumps([m.recommend({u}, 10).tolist(), "
            f"m.predict([{u}] * 5, {items}).tolist(), m.mu, m.item_bias[:3].tolist()]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=280, check=True).stdout
    rec, pred, mu, bias = json.loads(out)
    assert rec == model.recommend(u, 10).tolist()
    assert pred == model.predict([u] * 5, items).tolist()
    assert mu == model.mu and bias == model.item_bias[:3].tolist()


RATINGS = [("ann", "m1", 5.0), ("ann", "m2", 3.0), ("bob", "m1", 4.0), ("bob", "m3", 1.0),
           ("cat", "m2", 2.0), ("cat", "m3", 2.5), ("dan", "m1", 4.5), ("dan", "m4", 3.5)]


def test_estimator_fits_and_predicts_by_original_ids():
    mf = MatrixFactorization(n_factors=4, epochs=5)
    assert mf.fit(RATINGS) is mf
    res = mf.result_
    assert res.row_ids.tolist() == ["ann", "bob", "cat", "dan"]
    assert res.col_ids.tolist() == ["m1", "m2", "m3", "m4"]
    mu = np.mean([r[2] for r in RATINGS])
    assert res.mu == pytest.approx(mu)
    got = mf.predict([("bob", "m2"), ("eve", "m2"), ("bob", "m9"), ("eve", "m9")])
    b, m2 = res.index(0, ["bob"])[0], res.index(1, ["m2"])[0]
    assert got[0] == res.predict(["bob"], ["m2"])[0]           # known pair: the model
    # unknown user or item: mu plus the known bias (Surprise's rule), unknown both: mu
    assert got[1] == pytest.approx(mu + res.item_bias[m2])
    assert got[2] == pytest.approx(mu + res.user_bias[b])
    assert got[3] == pytest.approx(mu)
    rec = mf.recommend("ann", 2)
    assert set(rec.tolist()) == {"m3", "m4"}                    # ann rated m1 and m2
    assert mf.recommend("eve", 1)[0] == res.col_ids[np.argmax(res.item_bias)]


def test_estimator_params_and_numeric_ids_from_an_array():
    mf = MatrixFactorization(n_factors=3, epochs=2, lr=0.01)
    assert mf.get_params()["lr"] == 0.01 and mf.get_params()["client"] is None
    assert mf.set_params(epochs=3, biased=False) is mf and mf.epochs == 3
    with pytest.raises(ValueError, match="invalid parameter 'rank'"):
        mf.set_params(rank=4)
    assert repr(mf) == "MatrixFactorization(n_factors=3, epochs=3, lr=0.01, biased=False)"
    a = np.array([[10, 700, 4.0], [10, 800, 2.0], [20, 700, 5.0], [30, 900, 3.0],
                  [20, 900, 1.0]])
    mf.fit(a)
    assert mf.result_.row_ids.dtype.kind == "i" and mf.result_.user_bias is None
    assert mf.predict([[10, 900]])[0] == mf.result_.predict([10], [900])[0]
    assert mf.predict([[99, 900]])[0] == pytest.approx(3.0)     # unbiased, unknown: mu
    with pytest.raises(dh.errors.InputError, match=r"an \(n, 3\) table"):
        mf.fit(np.ones((4, 2)))


def test_estimator_on_a_cluster_equals_the_serial_estimator(client2):
    ids = [(f"u{i}", f"i{(3 * i + k) % 7}", float(1 + (i + k) % 5))
           for i in range(10) for k in range(3)]
    kw = dict(n_factors=4, epochs=3, nparts=2)
    local = MatrixFactorization(**kw).fit(ids)
    dist = MatrixFactorization(client=client2, **kw).fit(ids)
    pairs = [("u1", "i3"), ("u9", "i0"), ("zz", "i1")]
    assert np.array_equal(local.predict(pairs), dist.predict(pairs))
    assert np.array_equal(local.result_.item_bias, dist.result_.item_bias)


def test_plan_words_per_row_grow_by_the_bias(tiny):
    a = plan(tiny, 2, strategy="p2p", partition="random", rank=8)["plan"]
    b = plan(tiny, 2, strategy="p2p", partition="random", rank=8, biased=True)["plan"]
    assert (a["words_per_unit"], b["words_per_unit"]) == (8, 9)
    assert a["tot_vol"] == b["tot_vol"] and b["planned_bytes"] == 9 * 8 * b["tot_vol"]


def test_bad_reg_bias_is_refused():
    with pytest.raises(dh.errors.InputError, match="--reg-bias must be"):
        plan(dh.datasets.ratings(), 2, partition="random", biased=True, reg_bias=-1.0)


@pytest.mark.slow
def test_biased_rmse_is_within_one_percent_of_surprise_svd(tmp_path):
    """The benchmark's claim (docs/benchmarks.md) on ml-latest-small, its 90/10 split."""
    pytest.importorskip("surprise")
    from surprise import SVD, Dataset, Reader

    r = np.loadtxt(dh.datasets.path("ratings"), delimiter=",", skiprows=1, usecols=(0, 1, 2))
    perm = np.random.default_rng(0).permutation(len(r))
    n = len(r) // 10
    train, test = r[perm[n:]], r[perm[:n]]
    ids = [(int(u), int(i)) for u, i in test[:, :2]]
    path = tmp_path / "train.csv"
    path.write_text("".join(f"{int(u)},{int(i)},{v}\n" for u, i, v in train))
    data = Dataset.load_from_file(str(path), Reader(line_format="user item rating", sep=",",
                                                    rating_scale=(0.5, 5.0)))
    algo = SVD(n_factors=50, n_epochs=20, random_state=0)
    algo.fit(data.build_full_trainset())
    ref = np.array([algo.predict(str(u), str(i)).est for u, i in ids])
    ours = MatrixFactorization(n_factors=50, epochs=20).fit(train).predict(ids)
    rmse = [float(np.sqrt(np.mean((p - test[:, 2]) ** 2))) for p in (ours, ref)]
    assert rmse[1] < 0.9 and rmse[0] <= 1.01 * rmse[1], rmse
