"""Graph convolutional network training on 1D row partitions of the adjacency (GCN paper).

Part m owns rows of A_hat and of every layer's H^k, Z^k and G^k; the weights are
replicated. Forward layer k sends each row of H^{k-1} once to every part that needs it
(eqs. 8-9), backward sends rows of G^k along A_hat^T, and the weight gradients are summed
by an allreduce (Algorithms 1-2). Rows are partitioned by the column-net hypergraph for
km1 (HP), the graph model (GP), random rows (RP), or for mini-batches the stochastic
hypergraph (SHP, Algorithm 3).

* :func:`fit`: training on a Dask cluster (the Program below, each part on its worker);
* :func:`serial_fit`: full-batch training on the whole graph (the reference);
* :func:`local_fit`: the distributed program run part by part in one process;
* :func:`plan`: the messages of an epoch and the paper's metrics, without a cluster;
* :func:`minibatch_plan`, :func:`hoeffding_nets`, :func:`minibatch_fit`: Algorithm 3;
* :func:`prepare`, :func:`program`, :func:`statics`: the pieces the others run on (a
  :class:`Setup`; the epochs as a :class:`daskhpc.comm.Program` and its per-part data).

Examples
--------
>>> from daskhpc import gcn
>>> gcn.plan("cora", 4, partition="rp")["plan"]["tot_msgs"]
48
>>> res = gcn.serial_fit("cora", epochs=200)                      # doctest: +SKIP
>>> res.info["quality"]["final_test_acc"]                         # doctest: +SKIP
0.812

References
----------
G. V. Demirci, A. Haldar, H. Ferhatosmanoglu, "Scalable Graph Convolutional Network
Training on Distributed-Memory Systems", PVLDB 16(4), 2022. T. N. Kipf, M. Welling,
"Semi-Supervised Classification with Graph Convolutional Networks", ICLR 2017.
"""

from ._api import fit, local_fit, plan, serial_fit
from ._minibatch import hoeffding_nets, minibatch_fit, minibatch_plan
from ._parts import statics
from ._program import program
from ._result import GCNResult
from ._setup import Setup, prepare

__all__ = ["fit", "serial_fit", "local_fit", "plan", "GCNResult", "minibatch_plan",
           "hoeffding_nets", "minibatch_fit", "prepare", "Setup", "program", "statics"]
