"""``daskhpc plan gcn`` / ``daskhpc run gcn``: the CLI plug-in (see daskhpc._workflows).

``daskhpc.cli`` adds ``inputs``, ``--parts``, ``--seed``, ``--json``, ``--partition-file``
(and, for ``run``, the cluster options); this module adds the GCN options.

Examples
--------
>>> import argparse
>>> p = argparse.ArgumentParser()
>>> _ = p.add_argument("inputs", nargs="+"); _ = p.add_argument("--parts", type=int)
>>> _ = p.add_argument("--seed", type=int, default=0)
>>> _ = p.add_argument("--partition-file")
>>> add_arguments(p, "plan")
>>> a = p.parse_args(["cora", "--parts", "4", "--partition", "gp", "--layers", "32,16"])
>>> a.partition, _options(a)["layers"]
('gp', (32, 16))
"""

from __future__ import annotations

from daskhpc.errors import InputError

NAME = "gcn"
CHECKPOINTS = True      # daskhpc.cli adds --checkpoint DIR and --resume to `run gcn`
DASHBOARD = "daskhpc.gcn._dashboard"      # the accuracy/loss panel (PANELS)
EXCHANGE = True         # daskhpc.cli adds --exchange direct|graph to `run gcn`
HELP = "GCN training on 1D row partitions (hypergraph, graph or random rows)"


def MPI_TEST_ARGS():  # noqa: N802 - the launcher tests' convention (docs/hpc.md)
    """Arguments after ``gcn`` for a few-second run on 3 workers under mpiexec."""
    return ["cora", "--parts", "3", "--epochs", "5", "--check-serial"]


def _layers(text: str) -> tuple:
    try:
        return tuple(int(t) for t in str(text).split(",") if t.strip())
    except ValueError:
        raise InputError(f"--layers takes hidden widths like 16 or 32,16, got {text!r}") from None


def add_arguments(parser, mode: str) -> None:
    """Add the GCN options (``mode`` is ``"plan"`` or ``"run"``)."""
    from ._setup import DEFAULTS as d

    g = parser.add_argument_group("gcn")
    g.add_argument("--layers", default=",".join(map(str, d.layers)),
                   help="hidden widths d_1,...,d_{L-1} (16: a 2-layer GCN)")
    g.add_argument("--epochs", type=int, default=d.epochs, help=f"epochs ({d.epochs})")
    g.add_argument("--partition", choices=("hp", "gp", "rp", "random"), default=d.partition,
                   help="rows by the column-net hypergraph (hp), the graph model (gp), "
                        "uniformly random rows as the paper's RP (rp), or our balanced "
                        "random (random)")
    g.add_argument("--partitioner", default=d.partitioner,
                   help="hypergraph backend for hp: auto, mtkahypar, kahypar, lp")
    g.add_argument("--epsilon", type=float, default=d.epsilon,
                   help="allowed imbalance of the rows' nonzeros (0.03; the paper: 0.01)")
    g.add_argument("--order", choices=("auto", "aggregate", "transform"), default=d.order,
                   help="per layer: exchange rows of H (aggregate first, the paper's order: "
                        "d_{k-1} words) or of H W (transform first: d_k words); auto "
                        "transforms first where d_k < d_{k-1}")
    g.add_argument("--symmetrize", action="store_true",
                   help="train on A + A^T (undirected) instead of the exact directed gradient")
    g.add_argument("--random-features", type=int, default=d.random_features,
                   help="feature width drawn for graphs without node data (64)")
    g.add_argument("--random-classes", type=int, default=d.random_classes,
                   help="classes drawn for graphs without node data (8)")
    g.add_argument("--no-compare", action="store_true",
                   help="plan only: skip the comparison with random rows (RP)")
    if mode == "run":
        g.add_argument("--optimizer", choices=("adam", "sgd"), default=d.optimizer)
        g.add_argument("--lr", type=float, default=d.lr, help=f"learning rate ({d.lr})")
        g.add_argument("--weight-decay", type=float, default=d.weight_decay,
                       help="L2 on layer 1 (5e-4)")
        g.add_argument("--dropout", type=float, default=d.dropout, help="dropout (0.5)")
        g.add_argument("--no-bias", action="store_true", help="layers without bias")
        g.add_argument("--eval-every", type=int, default=d.eval_every,
                       help="evaluate every N epochs (0: only after the last)")
        g.add_argument("--check-serial", action="store_true",
                       help="also run the serial references: the same program in one "
                            "process (bit for bit) and the textbook epoch (1e-10)")
        g.add_argument("--minibatch", action="store_true",
                       help="mini-batch training (one sampled batch per step, section 4.3.3)")
        g.add_argument("--batch-size", type=float, default=0.5,
                       help="--minibatch: nodes per batch, a fraction (< 1) or a count (0.5)")
        g.add_argument("--steps", type=int, default=200,
                       help="--minibatch: batches drawn (200; those without a training node "
                            "are skipped)")
        g.add_argument("--sampler", choices=("node", "uniform"), default="node",
                       help="--minibatch: GraphSAINT's node sampler or uniform nodes")
        g.add_argument("--no-shp", action="store_true",
                       help="--minibatch: keep --partition instead of SHP (Algorithm 3)")
        g.add_argument("--in-loop", choices=("auto", "yes", "no"), default="auto",
                       help="run the steps in the workers' event loops (short steps)")


def _options(args) -> dict:
    out = {"layers": _layers(getattr(args, "layers", "16")),
           "seed": getattr(args, "seed", 0) or 0}
    for k in ("epochs", "partition", "partitioner", "epsilon", "symmetrize", "order",
              "random_features", "random_classes", "optimizer", "lr", "weight_decay",
              "dropout", "eval_every"):
        if hasattr(args, k):
            out[k] = getattr(args, k)
    if getattr(args, "no_bias", False):
        out["bias"] = False
    return out


def check(args) -> None:
    """Options and the graph, read and checked before the cluster starts (exit 2)."""
    from ._setup import validate_input

    args._gcn_input = validate_input(_input(args), getattr(args, "parts", None),
                                     **_options(args))


def _input(args):
    """What ``check`` read (a Graph), else the one graph name or path."""
    if getattr(args, "_gcn_input", None) is not None:
        return args._gcn_input
    inputs = list(getattr(args, "inputs", []) or [])
    if len(inputs) != 1:
        raise InputError(f"gcn takes one graph (a file, a directory or 'cora'), got "
                         f"{len(inputs)}: {inputs}")
    return inputs[0]


def plan(args) -> dict:
    """``daskhpc plan gcn GRAPH --parts K ...``: the JSON report, no cluster."""
    from ._api import plan as plan_

    K = getattr(args, "parts", None)
    if K is None:
        raise InputError("--parts is required for plan gcn")
    return plan_(_input(args), int(K), partition_file=getattr(args, "partition_file", None),
                 compare_rp=not getattr(args, "no_compare", False), **_options(args))


def _minibatch(args):
    if not getattr(args, "minibatch", False):
        return None
    size = args.batch_size
    return {"batch_size": int(size) if size >= 1 else float(size), "steps": args.steps,
            "sampler": args.sampler, "shp": not args.no_shp}


def run(args, client) -> dict:
    """``daskhpc run gcn GRAPH [--parts K] ...`` on a connected client."""
    from daskhpc.runtime import worker_addresses

    from ._api import fit

    K = getattr(args, "parts", None) or len(worker_addresses(client))
    loop = {"auto": "auto", "yes": True, "no": False}[getattr(args, "in_loop", "auto")]
    res = fit(_input(args), nparts=int(K), client=client,
              partition_file=getattr(args, "partition_file", None),
              check_serial=bool(getattr(args, "check_serial", False)),
              minibatch=_minibatch(args), progress=getattr(args, "progress", None),
              checkpoint=getattr(args, "checkpoint", None),
              resume=bool(getattr(args, "resume", False)), in_loop=loop,
              exchange=getattr(args, "exchange", None), **_options(args))
    return res.report()


def demo(client) -> dict:
    """Cora, one part per worker (HP rows), 50 epochs, checked against both serial
    references (a few seconds)."""
    from daskhpc.runtime import worker_addresses

    from ._api import fit

    res = fit("cora", nparts=len(worker_addresses(client)), client=client, epochs=50,
              partition="hp", check_serial=True)
    return res.report()


def summary(report: dict) -> str:
    """What ``daskhpc plan gcn`` and ``daskhpc run gcn`` print."""
    if "measured" in report:
        return _run_summary(report)
    lines = [f"gcn: {report.get('graph')} ({report['input']['shape'][0]} nodes, "
             f"nnz(A_hat) {report['input']['nnz']}), {report['parts']} parts, "
             f"{report.get('partition_method')} rows"]
    p, v = report.get("plan"), report.get("volume")
    if p and v:
        lines.append(f"epoch: {p['tot_msgs']} messages, {p['tot_vol']} rows, {p['words']} "
                     f"words (km1 forward {v['km1_forward']}, backward {v['km1_backward']})")
    pp = report.get("per_part")
    if pp:
        lines.append("per part: avg vol {avg_vol:.0f}, max vol {max_vol:.0f} words; avg msgs "
                     "{avg_msgs:.1f}, max msgs {max_msgs:.0f}".format(**pp))
    rp = report.get("vs_rp")
    if rp:
        line = ("vs RP: avg vol {avg_vol:.3f}, max vol {max_vol:.3f}, avg msgs {avg_msgs:.3f}, "
                "max msgs {max_msgs:.3f}").format(**rp)
        if "paper_table2" in rp:
            line += " (paper Table 2: avg vol {avg_vol}, max vol {max_vol}, avg msgs "\
                    "{avg_msgs}, max msgs {max_msgs})".format(**rp["paper_table2"])
        lines.append(line)
    gm = report.get("graph_model")
    if gm:
        lines.append(f"graph model: {gm['cut_edges']} cut edges -> {gm['rows_per_exchange']} "
                     f"rows per exchange estimated, {gm['true_rows_forward']} true")
    t = report.get("timing", {})
    if t:
        lines.append("timing: " + ", ".join(f"{k}={v:.3g}" for k, v in t.items()
                                            if isinstance(v, float)))
    return "\n".join(lines)


def _run_summary(report: dict) -> str:
    """A run: the common block, then accuracy and time per epoch."""
    from daskhpc.report import summarize, summary_line

    q, t = report.get("quality", {}), report.get("timing", {})
    lines = summarize({k: v for k, v in report.items() if k != "quality"}).splitlines()
    at = next((i for i, x in enumerate(lines) if x.startswith("  serial")), len(lines))
    if "final_test_acc" in q:
        lines.insert(at, summary_line(
            "accuracy", f"train {q.get('final_train_acc', float('nan')):.4f}, val "
                        f"{q.get('final_val_acc', float('nan')):.4f}, test "
                        f"{q['final_test_acc']:.4f} (final weights)"))
    if "median_epoch_s" in t:
        lines.append(summary_line(
            "epoch", f"{1000 * t['median_epoch_s']:.1f} ms median, {t['steps_per_epoch']} "
                     f"steps ({1000 * t['median_step_s']:.2f} ms a step)"))
    return "\n".join(lines)
