"""The sparse allreduce as a :class:`~daskhpc.runtime.Workflow` (``daskhpc plan|run allreduce``).

Inputs: none (or ``uniform``) for the uniform model, or one file per rank: ``.npy``
(dense 1-D) or ``.npz`` with ``idx`` and ``val`` (and ``N``).
"""

from __future__ import annotations

from daskhpc._workflows import Call, RunOptions, Workflow

from ._setup import CommandOptions, read_vectors, validate_input


class Allreduce(Workflow):
    """Sparse allreduce (Renggli 2017, chapters 3-4)."""

    name = "allreduce"
    help = "sparse allreduce (SSAR_Rec_Dbl, split-allgather, DSAR, dense baselines; auto)"
    Options = CommandOptions
    inputs = "none or 'uniform' (the uniform model), or one .npy/.npz vector per rank"
    checkpoints = False          # a call is short: nothing to resume
    by_name = ("uniform",)

    def check(self, call: Call) -> None:
        """The vector files read and checked before a cluster starts."""
        call.data = validate_input([i for i in call.inputs if i != "uniform"],
                                   call.options.N)

    def plan(self, call: Call) -> dict:
        from ._api import plan

        kw = _call_args(call)
        kw.pop("repeat")
        if call.network is not None:      # auto decides on the named network
            from daskhpc.comm import network_model

            model = network_model(call.network)
            kw = model.fill(kw)
            report = plan(**kw)
            net = ((report.get("plan") or {}).get("prediction") or {}).get("network")
            if net is not None:         # priced on the profile's alpha and beta: its name
                net["name"] = model.name
            return report
        return plan(**kw)

    def run(self, call: Call, run: RunOptions) -> dict:
        from daskhpc.runtime import worker_addresses

        from ._api import allreduce

        kw = _call_args(call)
        if kw.get("nparts") is None and "vectors" not in kw:
            kw["nparts"] = len(worker_addresses(run.client))
        return allreduce(run=run, **kw).report()

    def demo(self, client) -> dict:
        """N = 2^20, 4 ranks, density 0.1 %, auto, 5 calls, checked against the dense sum."""
        from ._api import allreduce

        return allreduce(N=2 ** 20, nparts=4, density=1e-3, algorithm="auto", client=client,
                         repeat=5, check_serial=True).report()

    def small_run(self) -> list:
        """Integer values: every algorithm's sum is exactly the serial one."""
        return ["--N", "100000", "--parts", "3", "--density", "0.01", "--dtype", "int64",
                "--repeat", "3", "--check-serial"]


def _call_args(call: Call) -> dict:
    o = call.options
    inputs = [i for i in call.inputs if i != "uniform"]
    opts = {"algorithm": o.algorithm, "group": o.group, "alpha": o.alpha, "beta": o.beta,
            "floor": o.floor, "repeat": o.repeat}
    if not inputs:
        return dict(N=o.N, nparts=call.parts, density=o.density, seed=o.seed, dtype=o.dtype,
                    **opts)
    vecs, N = call.data or read_vectors(inputs, o.N)      # what check read, else read
    return dict(vectors=vecs, nparts=call.parts, N=N, **opts)
