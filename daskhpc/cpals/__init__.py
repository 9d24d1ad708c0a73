"""CP-ALS sparse tensor decomposition with coarse- and fine-grain MTTKRP over parts.

The tensor's work is partitioned by slices (coarse grain, Algorithm 3: parts receive
only factor rows) or by nonzeros (fine grain, Algorithm 4: partial MTTKRP rows folded to
their owners, new rows expanded back), by the paper's hypergraph models (``hp``) or its
baselines (coarse ``block``, fine ``random``). The distributed :class:`daskhpc.comm.Program`
run in one process (``run_local``) is the partition-aware reference.

* :func:`fit`: CP-ALS on a Dask cluster (the workflow frame: checkpoints, lost workers,
  measured bytes against the plan, the serial checks);
* :func:`serial_fit`: plain serial CP-ALS (Algorithms 1-2, Tensor Toolbox conventions);
* :func:`plan`: the per-iteration communication (Table 2 columns) without a cluster;
* :func:`prepare`, :func:`statics`, :func:`program`: the pieces ``fit`` runs on the kit;
  :func:`cpals_job`: all of them as the kit's Job (one prepared tensor, several runs);
* :func:`mttkrp`: the coordinate MTTKRP kernel;
* :func:`power_law_tensor` / :func:`write_tns`: seeded synthetic inputs at scale.

Examples
--------
>>> from daskhpc import cpals, datasets
>>> r = cpals.plan(datasets.path("tensor"), 4, grain="fine", partition="random")
>>> r["plan"]["max_msgs"] <= 3 * 2 * 3
True

References
----------
O. Kaya and B. Ucar, "Scalable sparse tensor decompositions in distributed memory
systems", Inria Research Report RR-8722, 2015 (HyperTensor).
"""

from ._api import fit, plan, serial_fit
from ._job import cpals_job
from ._kernels import mttkrp
from ._program import assemble, program
from ._parts import statics
from ._result import CPResult
from ._setup import Options, Setup, prepare
from ._synthetic import power_law_tensor, write_tns
from ._data import Tensor, as_tensor

__all__ = ["fit", "serial_fit", "plan", "CPResult", "prepare", "Setup", "Options", "statics",
           "program", "assemble", "mttkrp", "Tensor", "as_tensor", "power_law_tensor",
           "write_tns", "cpals_job"]
