"""Matrix completion by stratified SGD on Dask: DSGD, point-to-point and Hold-and-Combine.

K row blocks and K column blocks; in sub-epoch k part p updates column block (p + k) mod K
(ring strata). Only the d-gap rows of H (eq. (7), Algorithm 2) move, right after each
update (P2P, Algorithm 1) or combined into O(K lg K) messages per part and epoch (H&C,
Algorithm 3); DSGD, sending whole blocks, is the baseline. Rows are partitioned at random
or by the column-net hypergraph for SOED (section V). The distributed factors equal the
serial reference's bit for bit.

* :func:`fit` runs on a Dask cluster and returns an :class:`SSGDResult`;
* :func:`serial_fit` is the serial reference (same strata, same update order);
* :func:`plan` computes the section VI metrics of an epoch without a cluster;
* :class:`MatrixFactorization` is an estimator over them: (user, item, rating) rows by
  original id in, ``predict``/``recommend`` out (biased model by default);
* :func:`prepare` builds the dask-free :class:`Setup` all three share; :func:`sgd_block`
  is the SGD sweep over one block that every part runs;
* :class:`StratumPolicy` / :class:`StratumOrderPlugin` are the order rules and their
  scheduler adapter; :func:`power_law_ratings` makes seeded synthetic inputs.

Examples
--------
>>> import daskhpc as dh
>>> from daskhpc import datasets
>>> dh.ssgd.plan(datasets.ratings(), 8, strategy="hc", partition="random")["plan"]["max_msgs"]
23
>>> client = dh.connect(n_workers=2)                                   # doctest: +SKIP
>>> res = dh.ssgd.fit(datasets.ratings(), 2, client=client, strategy="hc")  # doctest: +SKIP
>>> res.report()["quality"]["final_test_rmse"]                         # doctest: +SKIP

References
----------
N. Abubaker, M. O. Karsavuran, C. Aykanat, "Scaling Stratified Stochastic Gradient Descent
for Distributed Matrix Completion", IEEE TKDE 35(10), 2023. Public code: CESSGD.
"""

from ._api import fit, plan, serial_fit
from ._estimator import MatrixFactorization
from ._policy import StratumPolicy, check_timeline
from ._kernels import sgd_block
from ._result import SSGDResult
from ._setup import Setup, prepare
from ._synthetic import power_law_ratings, write_ratings_csv, write_ratings_parquet

__all__ = ["fit", "serial_fit", "plan", "SSGDResult", "StratumPolicy", "StratumOrderPlugin",
           "check_timeline", "power_law_ratings", "write_ratings_csv", "write_ratings_parquet",
           "timeline", "prepare",
           "Setup", "sgd_block", "MatrixFactorization"]


def __getattr__(name):
    # The plugin imports distributed; keep ``import daskhpc.ssgd`` (and plan) dask-free.
    if name == "StratumOrderPlugin":
        from ._plugin import StratumOrderPlugin

        return StratumOrderPlugin
    raise AttributeError(f"module 'daskhpc.ssgd' has no attribute {name!r}")


def timeline(client, run: str) -> list[dict]:
    """Steps of ``run`` recorded by the stratum-order plugin (and forget them).

    ``run`` is the step-key prefix, ``"ssgd-step-<token>"``; ``fit`` already returns
    its run's timeline as ``SSGDResult.timeline``.
    """
    from ._plugin import fetch_timeline

    return fetch_timeline(client, run)
