"""The Dask graphs of Symbolic3D and BatchedSumma3D: one pinned task per step and cell.

Every task runs on its grid cell's worker, so the only transfers are the algorithms'.
``sendA`` and ``bpiece`` keys live for one batch: A is sent again in the next (Table II).
"""

from __future__ import annotations

import numpy as np

from . import _tasks as T
from ._grid import Layout
from ._plugin import step_key
from ._tasks import summary


#: ledger key name -> communicating step of the report
_STEP_OF = {"sendA": "a_bcast", "bpiece": "b_bcast", "part": "fiber",
            "symA": "symbolic", "symB": "symbolic"}


def step_of_key(key) -> str:
    """Which step a transferred key belongs to (``other`` for consumers etc.)."""
    name = key[0] if isinstance(key, tuple) else str(key)
    return _STEP_OF.get(name.rsplit("-", 1)[-1], "other")


def symbolic_graph(run: str, lay: Layout, owner: dict, a_keys: dict, b_keys: dict,
                   mask_keys: dict | None = None, complement: bool = False):
    """Algorithm 3, lines 2-8: per cell, the (masked) LocalSymbolic summed over stages."""
    q = lay.grid.q
    tasks, where, totals = {}, {}, {}

    def put(key, task, cell):
        tasks[key] = task
        where[key] = owner[cell]

    for cell in lay.grid.cells():
        i, j, k = cell
        put((f"spgemmsym-{run}-symA", i, j, k), (T.send, a_keys[cell]), cell)
        put((f"spgemmsym-{run}-symB", i, j, k), (T.send, b_keys[cell]), cell)
    for cell in lay.grid.cells():
        i, j, k = cell
        stages = []
        for s in range(q):
            key = (f"spgemmsym-{run}-stage", i, j, k, s)
            put(key, (T.stage_symbolic, (f"spgemmsym-{run}-symA", i, s, k),
                      (f"spgemmsym-{run}-symB", s, j, k),
                      None if mask_keys is None else mask_keys[cell], complement), cell)
            stages.append(key)
        totals[cell] = (f"spgemmsym-{run}-total", i, j, k)
        put(totals[cell], (T.cell_total, *stages), cell)
    return tasks, where, totals


def batch_graph(run: str, lay: Layout, owner: dict, a_keys: dict, b_keys: dict,
                consumer, ids: dict, operand_keys: dict | None = None,
                local: str = "fused", batches=None, save=None, topic=None,
                checkpointed: bool = False, row_keys: dict | None = None,
                semiring: int = 0, mask_keys: dict | None = None, complement: bool = False):
    """Algorithm 4: every batch of BatchedSumma3D with its consumer tasks.

    ``ids``: ``rows[i]``, ``cols`` (original ids), ``shape``; ``row_keys``: the cells'
    row ids on their workers (not carried by every task); ``local``: ``staged`` (a
    ``mult`` per stage, then Merge-Layer) or ``fused`` (one accumulator; with l > 1 each
    outgoing fiber piece is its own ``part`` task and Merge-Fiber multiplies the piece
    that stays); ``batches``: the ones to build; ``save(t, name) -> path``: kept blocks
    written by ``ckpt`` tasks before ``done``; ``topic``: ``done`` reports its summary;
    ``mask_keys``: C<M> pieces. Returns ``tasks, workers, done_keys, kept_keys``."""
    g = lay.grid
    q, l, b = g.q, g.l, lay.b
    tasks, where = {}, {}
    done_keys, kept_keys = [], []

    def put(step, t, rest, task, cell):
        key = step_key(run, step, t, *rest)
        tasks[key] = task
        where[key] = owner[cell]
        return key

    col_offsets = _operand_offsets(lay)
    spec = (int(semiring), bool(complement))
    structural = int(semiring) != 0     # other semirings: an entry is an entry, even 0
    mk = {}
    for t in (range(b) if batches is None else batches):
        for cell in g.cells():
            i, j, k = cell
            put("sendA", t, cell, (T.send, a_keys[cell]), cell)
            bcols = lay.batch_columns(t, j) - lay.col_bounds[j]
            put("bpiece", t, cell, (T.b_piece, b_keys[cell], bcols), cell)
            mk[cell] = None if mask_keys is None else \
                put("mpiece", t, cell, (T.b_piece, mask_keys[cell], bcols), cell)
        finals, prev, ins = {}, None, {}
        for cell in g.cells():
            i, j, k = cell
            a_in, b_in = ins[cell] = ([step_key(run, "sendA", t, i, s, k) for s in range(q)],
                                      [step_key(run, "bpiece", t, s, j, k) for s in range(q)])
            off = lay.part_offsets(t, j)
            if local == "fused":
                if l == 1:
                    put("cblock", t, cell, (T.fused_layer, consumer.sort, q, spec, mk[cell],
                                            *a_in, *b_in), cell)
                    continue
                # a task per fiber piece that leaves (Merge-Fiber computes the rest)
                after = None
                for k2 in range(l):
                    if k2 != k:
                        after = put("part", t, (*cell, k2),
                                    (T.fused_part, q, int(off[k2]), int(off[k2 + 1]), after,
                                     spec, mk[cell], *a_in, *b_in), cell)
                continue
            mults = [put("mult", t, (*cell, s), (T.stage_multiply, a_in[s], b_in[s], spec,
                                                 mk[cell]), cell)
                     for s in range(q)]
            if l == 1:
                put("cblock", t, cell, (T.merge_fiber, consumer.sort, spec[0], *mults), cell)
                continue
            layer = put("layer", t, cell, (T.merge_layer, spec[0], *mults), cell)
            for k2 in range(l):
                put("part", t, (*cell, k2), (T.fiber_part, layer, int(off[k2]),
                                             int(off[k2 + 1])), cell)
        for cell in g.cells():
            i, j, k = cell
            if l > 1:
                # inputs are fetched only once a task is ready: a receive task per
                # incoming piece starts each fetch as soon as the piece exists
                recvs = [put("recv", t, (i, j, k2, k), (T.send, step_key(run, "part", t, i, j,
                                                                         k2, k)), cell)
                         for k2 in range(l) if k2 != k]
                if local == "fused":
                    off = lay.part_offsets(t, j)
                    put("cblock", t, cell, (T.fused_own, consumer.sort, q, int(off[k]),
                                            int(off[k + 1]), len(recvs), spec, mk[cell],
                                            *recvs, *ins[cell][0], *ins[cell][1]), cell)
                else:
                    parts = recvs[:k] + [step_key(run, "part", t, i, j, k, k)] + recvs[k:]
                    put("cblock", t, cell, (T.merge_fiber, consumer.sort, spec[0], *parts),
                        cell)
            info = {"batch": t, "cell": cell,
                    "cols": ids["cols"][lay.batch_columns(t, j, k)], "shape": ids["shape"],
                    "operand_cols": (int(col_offsets[cell][t]), int(col_offsets[cell][t + 1])),
                    # a chained batch's first cell starts its output afresh (a rerun)
                    "first": consumer.chained and prev is None}
            if structural:
                info["structural"] = True
            if row_keys is None:
                info["rows"] = ids["rows"][i]
            operand = operand_keys[cell] if operand_keys else None
            finals[cell] = put("consume", t, cell, (T.consume, consumer,
                                                    step_key(run, "cblock", t, *cell),
                                                    info, operand, prev,
                                                    None if row_keys is None else
                                                    row_keys[cell]), cell)
            if consumer.chained:
                prev = finals[cell]
        if consumer.columnwise:
            combined = {}
            for j in range(q):
                for k in range(l):
                    cols = [finals[(i, j, k)] for i in range(q)]
                    combined[(0, j, k)] = put("combine", t, (j, k),
                                              (_combine, consumer, *cols), (0, j, k))
            finals = combined
        if consumer.keeps:
            kept_keys.extend(finals.values())
            smalls = []
            for key in finals.values():
                # with ``save``: the same summary, once the block is in the checkpoint
                skey = (f"spgemm-{run}-{'summary' if save is None else 'ckpt'}", t, *key[2:])
                tasks[skey] = (summary, key) if save is None else \
                    (T.save_kept, save(t, kept_name(key)), key)
                where[skey] = where[key]
                smalls.append(skey)
        else:
            smalls = list(finals.values())
        done = ((T.batch_done, consumer, t, *smalls) if topic is None else
                (T.batch_done_reported, topic, consumer, t, checkpointed, *smalls))
        done_keys.append(put("done", t, (), done, (0, 0, 0)))
    return tasks, where, done_keys, kept_keys


def kept_name(key) -> str:
    """File name of a kept block in the checkpoint: ``kept-<step>-<cell or column>.npz``."""
    step = key[0].rsplit("-", 1)[-1]
    return "kept-{}-{}.npz".format(step, "-".join(str(int(x)) for x in key[2:]))


def _combine(consumer, *parts):
    return consumer.combine(list(parts), {})


def _operand_offsets(lay: Layout) -> dict:
    """Per cell: where batch t's columns start in the cell's operand (all batches)."""
    out = {}
    for (i, j, k) in lay.grid.cells():
        widths = [lay.batch_columns(t, j, k).size for t in range(lay.b)]
        out[(i, j, k)] = np.concatenate([[0], np.cumsum(widths)]).astype(np.int64)
    return out
