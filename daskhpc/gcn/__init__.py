"""Graph convolutional network training on 1D row partitions of the adjacency (GCN paper).

Part m owns rows of A_hat, of every layer's H^k, Z^k and G^k; the weights are replicated.
Forward layer k sends each row of H^{k-1} once to every part whose A_hat rows need it
(eqs. 8-9), backward sends rows of G^k along A_hat^T (the exact gradient, also for directed
graphs), and the weight gradients are summed by an allreduce (Algorithms 1-2). The row
partition is the column-net hypergraph of A_hat for km1 (HP, whose km1 is the volume),
the graph model (GP), or random rows (RP); mini-batch training partitions the stochastic
hypergraph of sampled batches (SHP, Algorithm 3).

* :func:`fit`: training on a Dask cluster (the Program below, each part on its worker);
* :func:`serial_fit`: full-batch training on the whole graph (the reference);
* :func:`local_fit`: the distributed program run part by part in one process;
* :func:`plan`: the messages of an epoch and the paper's metrics, without a cluster;
* :func:`minibatch_plan`, :func:`hoeffding_nets`, :func:`minibatch_fit`: Algorithm 3;
* :func:`prepare`, :func:`program`, :func:`statics`: the pieces the others run on (the
  checked graph and row partition as a :class:`Setup`; the epochs as a
  :class:`daskhpc.comm.Program` and its per-part data, e.g. for ``run_local``).

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
