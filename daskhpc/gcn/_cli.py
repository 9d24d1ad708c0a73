"""GCN training as a :class:`~daskhpc.runtime.Workflow`: what ``daskhpc plan|run gcn``,
``daskhpc demo`` and the launchers know of it (flags from ``_setup.CommandOptions``)."""

from __future__ import annotations

from daskhpc._workflows import Call, RunOptions, Workflow
from daskhpc.report import summarize, summary_line

from . import _api
from ._plan import vs_rp_line
from ._result import random_caveat
from ._setup import CommandOptions, Options, validate_input


class GCN(Workflow):
    """Full-batch and mini-batch GCN training on 1D row partitions (Demirci et al.)."""

    name = "gcn"
    help = "GCN training on 1D row partitions (hypergraph, graph or random rows)"
    Options = CommandOptions
    inputs = "a graph: 'cora', a Planetoid .npz, a node-table directory or an edge list"
    by_name = ("cora",)

    def check(self, call: Call) -> None:
        """The graph read and checked, and --parts against it (the run reuses it)."""
        opts = {k: getattr(call.options, k) for k in Options.__dataclass_fields__}
        call.data = validate_input(call.one_input("graph (a file, a directory or 'cora')"),
                                   call.parts, **opts)

    def plan(self, call: Call) -> dict:
        opts = {k: v for k, v in call.values("plan").items() if k in Options.__dataclass_fields__}
        return _api.plan(call.one_input("graph"), call.parts_or(None, "plan gcn"),
                         partition_file=call.partition_file, compare_rp=call.options.compare,
                         network=call.network, **opts)

    def run(self, call: Call, run: RunOptions) -> dict:
        from daskhpc.runtime import worker_addresses

        K = call.parts_or(len(worker_addresses(run.client)), "gcn")
        return _api.fit(call.one_input("graph"), nparts=K, partition_file=call.partition_file,
                        run=run, **call.options.fit_keywords()).report()

    def demo(self, client) -> dict:
        """Cora, one part per worker (HP rows), 50 epochs, checked against both references."""
        from daskhpc.runtime import worker_addresses

        return _api.fit("cora", nparts=len(worker_addresses(client)), client=client,
                        epochs=50, partition="hp", check_serial=True).report()

    def small_run(self) -> list:
        return ["cora", "--parts", "3", "--epochs", "5", "--check-serial"]

    def summary(self, report: dict) -> str:
        return summary(report)


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
    lines += [vs_rp_line(report["vs_rp"])] if report.get("vs_rp") else []
    gm = report.get("graph_model")
    if gm:
        lines.append(f"graph model: {gm['cut_edges']} cut edges -> {gm['rows_per_exchange']} "
                     f"rows per exchange estimated, {gm['true_rows_forward']} true")
    ar = report.get("allreduce")
    if ar and ar.get("tot_msgs"):
        line = (f"dW allreduce: {ar['words_per_unit']} words, {ar['tot_msgs']} messages, "
                f"{ar['planned_bytes']} bytes an epoch")
        rows = ar.get("dW1_rows")
        if rows:
            line += (f"; dW1 as {rows['tot_vol']} shared rows in {rows['tot_msgs']} messages, "
                     f"{rows['planned_bytes']} bytes (dense: {rows['dense_bytes']})")
        lines.append(line)
    t = report.get("timing", {})
    if t:
        lines.append("timing: " + ", ".join(f"{k}={v:.3g}" for k, v in t.items()
                                            if isinstance(v, float)))
    return "\n".join(lines)


def _run_summary(report: dict) -> str:
    """A run: the common block, then accuracy and time per epoch."""
    q, t = report.get("quality", {}), report.get("timing", {})
    lines = summarize({k: v for k, v in report.items() if k != "quality"}).splitlines()
    at = next((i for i, x in enumerate(lines) if x.startswith("  serial")), len(lines))
    if "final_test_acc" in q:
        lines.insert(at, summary_line(
            "accuracy", f"train {q.get('final_train_acc', float('nan')):.4f}, val "
                        f"{q.get('final_val_acc', float('nan')):.4f}, test "
                        f"{q['final_test_acc']:.4f} (final weights{random_caveat(report)})"))
    if "median_epoch_s" in t:
        lines.append(summary_line(
            "epoch", f"{1000 * t['median_epoch_s']:.1f} ms median, {t['steps_per_epoch']} "
                     f"steps ({1000 * t['median_step_s']:.2f} ms a step)"))
    return "\n".join(lines)
