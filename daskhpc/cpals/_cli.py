"""``daskhpc plan cpals`` (and the options of ``daskhpc run cpals``): the CLI plug-in.

The lead's ``daskhpc.cli`` adds ``inputs``, ``--parts``, ``--seed``, ``--json``,
``--partition-file`` (and, for ``run``, the cluster options); this module adds the CP-ALS
options and turns parsed arguments into calls of :mod:`daskhpc.cpals`.

Examples
--------
>>> import argparse
>>> p = argparse.ArgumentParser()
>>> _ = p.add_argument("inputs", nargs="+"); _ = p.add_argument("--parts", type=int)
>>> _ = p.add_argument("--seed", type=int, default=0)
>>> _ = p.add_argument("--partition-file")
>>> add_arguments(p, "plan")
>>> a = p.parse_args(["x.tns", "--parts", "4", "--grain", "coarse", "--partition", "block"])
>>> a.grain, a.partition, a.rank
('coarse', 'block', 10)
"""

from __future__ import annotations

from daskhpc.errors import InputError

NAME = "cpals"
CHECKPOINTS = True      # daskhpc.cli adds --checkpoint DIR and --resume to `run cpals`
EXCHANGE = True         # daskhpc.cli adds --exchange direct|graph to `run cpals`
DASHBOARD = "daskhpc.cpals._dashboard"     # its panel on the dashboard (PANELS)
HELP = "CP-ALS sparse tensor decomposition (coarse- and fine-grain MTTKRP)"


def MPI_TEST_ARGS():  # noqa: N802 - the launcher tests' convention (docs/hpc.md)
    """Arguments after ``cpals`` for a few-second run on 3 workers under mpiexec."""
    from daskhpc import datasets

    return [datasets.path("tensor"), "--parts", "3", "--rank", "8", "--iters", "5",
            "--tol", "0", "--check-serial"]


def add_arguments(parser, mode: str) -> None:
    """Add the CP-ALS options (``mode`` is ``"plan"`` or ``"run"``)."""
    from ._setup import DEFAULTS as d

    g = parser.add_argument_group("cpals")
    g.add_argument("--rank", type=int, default=d.rank, help=f"R, components ({d.rank})")
    g.add_argument("--grain", choices=("fine", "coarse"), default=d.grain,
                   help="fine: nonzeros partitioned, fold + expand per mode (Algorithm 4); "
                        "coarse: slices, one expand per mode (Algorithm 3)")
    g.add_argument("--partition", choices=("hp", "random", "block"), default=d.partition,
                   help="hp: hypergraph model (Mt-KaHyPar); random: fine-grain baseline; "
                        "block: coarse-grain baseline (consecutive slices of equal nonzeros)")
    g.add_argument("--partitioner", default=d.partitioner,
                   help="backend for --partition hp: auto (Mt-KaHyPar deterministic or "
                        "default preset, or label propagation, by size), mtkahypar, lp, kahypar")
    g.add_argument("--epsilon", type=float, default=d.epsilon,
                   help="allowed imbalance (hp partitions, fine-grain row placement)")
    if mode == "run":
        g.add_argument("--iters", type=int, default=d.iters, help=f"iterations ({d.iters})")
        g.add_argument("--tol", type=float, default=d.tol,
                       help=f"stop when the fit changes by less than this ({d.tol})")
        g.add_argument("--check-serial", action="store_true",
                       help="also run the serial references and compare factors, lambda, "
                            "fit (partition-aware: bit for bit; plain serial: 1e-9)")


def _options(args) -> dict:
    keys = ("rank", "grain", "partition", "partitioner", "epsilon", "iters", "tol")
    out = {k: getattr(args, k) for k in keys if hasattr(args, k)}
    out["seed"] = getattr(args, "seed", 0) or 0
    return out


def check(args) -> None:
    """Options and the tensor, read and checked before the cluster starts (exit 2)."""
    from ._setup import validate_input

    args._cpals_input = validate_input(_input(args), getattr(args, "parts", None),
                                       **_options(args))


def _input(args):
    """What ``check`` read (a Tensor), else the one path."""
    if getattr(args, "_cpals_input", None) is not None:
        return args._cpals_input
    inputs = list(getattr(args, "inputs", []) or [])
    if len(inputs) != 1:
        raise InputError(f"cpals takes one tensor file (.tns), got {len(inputs)}: {inputs}")
    return inputs[0]


def plan(args) -> dict:
    """``daskhpc plan cpals X.tns --parts K ...``: the JSON report, no cluster."""
    from ._api import plan as plan_

    K = getattr(args, "parts", None)
    if K is None:
        raise InputError("--parts is required for plan cpals")
    opts = _options(args)
    opts.pop("iters", None)
    opts.pop("tol", None)
    return plan_(_input(args), K, partition_file=getattr(args, "partition_file", None), **opts)


def run(args, client) -> dict:
    """``daskhpc run cpals X.tns [--parts K] ...`` on a connected client (K defaults to
    the number of workers)."""
    from ._api import fit

    opts = _options(args)
    res = fit(_input(args), opts.pop("rank"), getattr(args, "parts", None), client=client,
              partition_file=getattr(args, "partition_file", None),
              check_serial=bool(getattr(args, "check_serial", False)),
              progress=getattr(args, "progress", None),
              checkpoint=getattr(args, "checkpoint", None),
              resume=bool(getattr(args, "resume", False)),
              exchange=getattr(args, "exchange", None), **opts)
    return res.report()


def demo(client) -> dict:
    """The bundled UMLS tensor, fine-hp over 2 parts, R = 10, 10 iterations, checked
    against both serial references."""
    from daskhpc import datasets

    from ._api import fit

    res = fit(datasets.path("tensor"), 10, 2, client=client, grain="fine", partition="hp",
              iters=10, tol=0, check_serial=True)
    return res.report()


def summary(report: dict) -> str:
    """What the CLI prints: the common block, Table 2's columns per mode, per-iteration
    plan, the Gram all-reduce, the plain serial check."""
    from daskhpc.report import summarize, summary_line

    lines = [summarize({k: v for k, v in report.items() if k != "plan"})]
    modes = report.get("modes")
    if modes:
        head = ("mode", "load max", "load avg", "vol max", "vol avg", "msgs max", "msgs avg")
        rows = [(str(m["mode"]), str(m["load_max"]), f"{m['load_avg']:.0f}", str(m["vol_max"]),
                 f"{m['vol_avg']:.0f}", str(m["msgs_max"]), f"{m['msgs_avg']:.0f}")
                for m in modes]
        w = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
        lines.append("    " + "  ".join(h.rjust(x) for h, x in zip(head, w)))
        lines += ["    " + "  ".join(c.rjust(x) for c, x in zip(r, w)) for r in rows]
    p = report.get("plan")
    if p:
        lines.append(summary_line(
            "plan", f"per iteration {p['tot_vol']:,} rows of {p['words_per_unit']} words in "
                    f"{p['tot_msgs']:,} messages (sum of the phases' max {p['sum_max_vol']:,} "
                    f"rows; at most {p['max_msgs']} messages a part), {p['phases']} phases"))
    a = report.get("allreduce")
    if a:
        lines.append(summary_line("gram", f"all-reduce of {a['tot_msgs']} messages, "
                                          f"{a['planned_bytes']:,} bytes per iteration, in "
                                          f"{a['phases']} rounds"))
    t = report.get("timing") or {}
    per = sorted(x for x in t.get("per_iteration_s") or [] if x is not None)
    if per:
        lines.append(summary_line("iteration", f"{1e3 * per[len(per) // 2]:.1f} ms median"))
    plain = (report.get("serial_check") or {}).get("plain_serial")
    if plain:
        ok = "within" if plain["within_tolerance"] else "NOT within"
        lines.append(summary_line(
            "plain", f"textbook serial CP-ALS: max relative difference "
                     f"{plain['max_rel_diff']:.2g} ({ok} {plain['rtol']:g})"))
    return "\n".join(lines)
