"""Which partitioner a hypergraph gets when none is named (``partition(h, K, "auto")``).

Mt-KaHyPar's time grows with the pins and with K. On this project's 2-core machine
(shared, so within a factor of two) it cost about 2-5 microseconds per unit of
``work = pins * sqrt(K)`` with the ``default`` preset and 7-11 with ``deterministic``
(SOED, epsilon 0.03; docs/partitioning.md has the full table):

======================================  ====  =====  =======  =============
instance (pins of nets with >= 2 pins)  K     work   default  deterministic
======================================  ====  =====  =======  =============
ml-latest-small, 90% train (91k)        4     1.8e5  0.6 s    1.8 s
ml-latest-small, 90% train (91k)        256   1.4e6  2.6 s    10.2 s
power-law 1M ratings (0.9M)             32    5.1e6  21 s     -
power-law 1M ratings (0.9M)             1024  2.9e7  92 s     > 300 s
power-law 10M ratings (9M)              2     1.3e7  26 s     -
power-law 10M ratings (9M)              32    5.1e7  251 s    -
======================================  ====  =====  =======  =============

so the rule is, with ``work = pins * sqrt(K)``:

* ``work <= DETERMINISTIC_WORK`` (1.5e6, up to ~15 s): Mt-KaHyPar ``deterministic``:
  the same seed gives the same partition (ml-latest-small at every K up to 256, so all
  the tests that pin hypergraph rows).
* ``work <= MTKAHYPAR_WORK`` (6e6, up to ~30 s): Mt-KaHyPar ``default``, ~4x faster,
  not reproducible run to run (save it with ``--save-partition`` / ``Partition.save`` /
  the SSGD partition file to reuse it).
* above: the seeded random partition refined by label propagation (``lp``,
  :mod:`._refine`): seconds where Mt-KaHyPar takes many minutes, and deterministic. On
  the power-law ratings its SOED was within 1 % of Mt-KaHyPar's at K = 32 and 1024
  (11-18 % below random rows). It is a local method: on ml-latest-small at K = 2-8 it
  is 7-14 % worse than Mt-KaHyPar (where the structure is real and multilevel finds
  more), which is why it is only the fallback. Its pin-count table needs
  ``4 * nets * K`` bytes; beyond ``LP_MAX_BYTES`` the rule keeps Mt-KaHyPar ``default``.

Examples
--------
>>> from daskhpc.hypergraph import Hypergraph
>>> h = Hypergraph.from_nets(4, [[0, 1], [1, 2, 3]])
>>> choose_partitioner(h, 2)["options"]
{'preset': 'deterministic'}
"""

from __future__ import annotations

import numpy as np

from ._hypergraph import Hypergraph

__all__ = ["choose_partitioner", "mtkahypar_preset", "partition_work",
           "DETERMINISTIC_WORK", "MTKAHYPAR_WORK", "LP_MAX_BYTES"]

DETERMINISTIC_WORK = 1.5e6
MTKAHYPAR_WORK = 6.0e6
LP_MAX_BYTES = 4 * 2**30
LP_OPTIONS = {"passes": 4, "max_net_size": 128}


def partition_work(h: Hypergraph, nparts: int) -> float:
    """``pins * sqrt(K)`` over the nets a partitioner sees (two pins or more)."""
    sizes = h.net_sizes
    return float(sizes[sizes >= 2].sum()) * float(np.sqrt(max(int(nparts), 1)))


def mtkahypar_preset(h: Hypergraph, nparts: int) -> str:
    """``deterministic`` up to ``DETERMINISTIC_WORK``, else ``default``."""
    return "deterministic" if partition_work(h, nparts) <= DETERMINISTIC_WORK else "default"


def choose_partitioner(h: Hypergraph, nparts: int) -> dict:
    """The backend, its options and the reason, by the rule of the module docstring.

    Returns
    -------
    dict
        ``backend`` (a registered name), ``options`` (passed to it), ``work`` and
        ``rule`` (a sentence for the report).
    """
    work = partition_work(h, nparts)
    lp_bytes = 4 * h.num_nets * int(nparts)
    if work <= DETERMINISTIC_WORK:
        backend, options = "mtkahypar", {"preset": "deterministic"}
        rule = f"pins*sqrt(K) = {work:.3g} <= {DETERMINISTIC_WORK:.3g}: deterministic Mt-KaHyPar"
    elif work <= MTKAHYPAR_WORK or lp_bytes > LP_MAX_BYTES:
        backend, options = "mtkahypar", {"preset": "default"}
        rule = (f"pins*sqrt(K) = {work:.3g} <= {MTKAHYPAR_WORK:.3g}: Mt-KaHyPar default preset"
                if work <= MTKAHYPAR_WORK else
                f"pins*sqrt(K) = {work:.3g} but lp would need {lp_bytes / 2**30:.1f} GiB: "
                "Mt-KaHyPar default preset")
    else:
        backend, options = "lp", dict(LP_OPTIONS)
        rule = (f"pins*sqrt(K) = {work:.3g} > {MTKAHYPAR_WORK:.3g}: random start + "
                "label propagation")
    return {"backend": backend, "options": options, "work": work, "rule": rule}
