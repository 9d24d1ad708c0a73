"""What an allreduce run measured: bytes and messages between workers per call and stage.

Next to the plan projected on the same workers; the difference per message is Dask's
framing (``framing_bytes_per_message``).
"""

from __future__ import annotations


def owner_index(owner, workers):
    """Worker index of every rank (workers in stable order) and the workers used."""
    order = sorted(set(owner), key=workers.index) if workers else sorted(set(owner))
    return [order.index(w) for w in owner], order


def measure(s, entries, owner, workers, stage_of, calls) -> dict:
    """Measured bytes and messages (per call and stage) next to the plan on the workers.

    A measured message is one key moved; the plan's messages are bundled per stage and
    worker pair, as the Program sends them, so the counts compare on any worker count."""
    idx, order = owner_index(owner, workers)
    placed = s.plan.placed(idx, len(order))
    pb = placed.message_bytes()
    nmsg = [int((placed.phase == t).sum()) for t in range(s.algo.nstages)]
    plan_stage = {int(t): (int(pb[placed.phase == t].sum()), nmsg[t])
                  for t in range(s.algo.nstages)}
    stages: dict = {t: {"planned_worker_bytes": b * calls, "planned_worker_messages": m * calls,
                        "measured_bytes": 0, "measured_messages": 0}
                    for t, (b, m) in plan_stage.items()}
    total_b = total_m = 0
    for e in entries:
        hits = [ct for ct in map(stage_of, e["keys"]) if ct is not None]
        if not hits:                    # not a message of these calls
            continue
        total_b += e["bytes"]
        total_m += len(hits)
        _, t = hits[0]                  # a transfer carries keys of one call and stage
        stages.setdefault(t, {"measured_bytes": 0, "measured_messages": 0})
        stages[t]["measured_bytes"] += e["bytes"]
        stages[t]["measured_messages"] += len(hits)
    planned_b = sum(b for b, _ in plan_stage.values()) * calls
    planned_m = sum(m for _, m in plan_stage.values()) * calls
    summary = {"inter_worker_bytes": total_b, "inter_worker_messages": total_m,
               "planned_bytes": planned_b, "planned_messages": planned_m, "calls": calls,
               "workers": len(order)}
    if total_m:
        summary["framing_bytes_per_message"] = (total_b - planned_b) / total_m
    return {"summary": summary, "stages": stages}

