"""Sparse allreduce: recursive doubling, split-allgather, the dynamic dense switch.

Every rank holds a length-N vector of which only some items are nonzero; every rank
ends with the sum, bit for bit the same on all ranks. The vectors travel in the thesis's
stream format (a count, then sorted (uint32 index, value) pairs, or all N values when
dense), and a merge switches to dense when the two inputs' items would cost as much as
the dense range (Listing 4.3), never back. Algorithms (Renggli 2017, chapter 3):
SSAR_Rec_Dbl, SSAR_Split_AllGather, DSAR_Split_AllGather, the early-switching DSAR, and
the dense baselines (Rabenseifner, ring, recursive doubling); ``auto`` picks one per
call from Table 3.1 with the cost model's alpha and beta and the measured densities.
:func:`allreduce` runs on a Dask cluster, :func:`allreduce_local` in this process (the
partition-aware serial reference), :func:`plan` without running.

Examples
--------
>>> import daskhpc.allreduce as ar
>>> r = ar.allreduce_local(N=1000, nparts=4, density=0.01, algorithm="ssar_split_allgather")
>>> r.report()["quality"]["ranks_identical"], r.plan.report()["tot_msgs"]
(True, 20)

References
----------
C. Renggli, "Efficient Sparse AllReduce For Scalable Machine Learning", Master's thesis,
ETH Zurich, 2017. Public code: SparCML (Renggli et al., SC 2019).
"""

from ._api import allreduce, allreduce_local, plan
from ._cost import CANDIDATES, choose, cost_model, expected_union, predicted_times
from ._embed import append_allreduce
from ._plan import call_plan, dense_bound_plan, simulate
from ._registry import ALGORITHMS, DEFAULT_GROUP, DENSE, SPARSE, make
from ._result import AllreduceResult
from ._serial import serial_allreduce
from ._stream import Format, Stream
from ._synthetic import uniform_vectors

__all__ = ["allreduce", "plan", "allreduce_local", "serial_allreduce", "append_allreduce",
           "AllreduceResult", "call_plan", "dense_bound_plan", "simulate", "choose",
           "predicted_times", "expected_union", "uniform_vectors", "make", "cost_model",
           "Format", "Stream", "ALGORITHMS", "SPARSE", "DENSE", "CANDIDATES", "DEFAULT_GROUP"]
