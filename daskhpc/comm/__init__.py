"""Communication plans: who sends which units to whom in which phase, and what it costs.

No dask here: a Plan for K = 1024 parts is computed and reported without a cluster.

Examples
--------
>>> from daskhpc.comm import Plan
>>> p = Plan.from_messages(2, [(0, 0, 1, [3, 4]), (1, 1, 0, [3])], words_per_unit=16)
>>> p.report()["tot_vol"], p.report()["planned_bytes"]
(3, 384)
"""

from ._cost import CostModel
from ._plan import Plan

__all__ = ["Plan", "CostModel"]
