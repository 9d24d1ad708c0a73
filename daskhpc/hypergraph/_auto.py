"""Which partitioner a hypergraph gets when none is named (``partition(h, K, "auto")``)."""

from __future__ import annotations

import numpy as np

from ._hypergraph import Hypergraph

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
    """The backend, its options and the reason, by ``work = pins * sqrt(K)``.

    Up to ``DETERMINISTIC_WORK``: Mt-KaHyPar ``deterministic`` (reproducible); up to
    ``MTKAHYPAR_WORK``: Mt-KaHyPar ``default`` (~4x faster, not reproducible); above: the
    seeded random partition refined by label propagation (``lp``), unless its pin-count
    table (``4 * nets * K`` bytes) would exceed ``LP_MAX_BYTES``. The measurements behind
    the thresholds: docs/partitioning.md.

    Returns
    -------
    dict
        ``backend`` (a registered name), ``options`` (passed to it), ``work`` and
        ``rule`` (a sentence for the report).

    Examples
    --------
    >>> from daskhpc.hypergraph import Hypergraph
    >>> h = Hypergraph.from_nets(4, [[0, 1], [1, 2, 3]])
    >>> choose_partitioner(h, 2)["options"]
    {'preset': 'deterministic'}
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
