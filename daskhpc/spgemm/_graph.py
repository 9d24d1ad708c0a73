"""The Dask graphs of Symbolic3D and BatchedSumma3D: one pinned task per step and cell.

Every task runs on the worker of the grid cell it belongs to (``owner[cell]``),
so the only transfers are the ones the algorithms prescribe:

==============  ===========================================  ======================
step            task (key ``("spgemm-<run>-<step>", t, ...)``)  worker
==============  ===========================================  ======================
A-Broadcast     ``sendA`` (t, i, s, k): A(i,s,k) for batch t    owner of (i, s, k)
B-Broadcast     ``bpiece`` (t, s, j, k): B~(s,j,k)[t]            owner of (s, j, k)
Local-Multiply  ``mult`` (t, i, j, k, s)                         owner of (i, j, k)
Merge-Layer     ``layer`` (t, i, j, k)  (``cblock`` when l = 1)   owner of (i, j, k)
AllToAll-Fiber  ``part`` (t, i, j, k, k2): columns for layer k2   owner of (i, j, k)
                ``recv`` (t, i, j, k, k2): fetches it early       owner of (i, j, k2)
Merge-Fiber     ``cblock`` (t, i, j, k)                          owner of (i, j, k)
consume         ``consume`` (t, i, j, k), ``combine`` (t, j, k)   owner of (i, j, k)
kept size       ``summary`` or, with a checkpoint, ``ckpt``      where the block is kept
batch done      ``done`` (t,)                                   owner of (0, 0, 0)
==============  ===========================================  ======================

A receiver reads ``sendA`` and ``bpiece`` keys, which exist for one batch only,
so their replicas are dropped after the batch and A is sent again in the next
(Table II: A-Broadcast happens b times).
"""

from __future__ import annotations

import numpy as np

from . import _tasks as T
from ._grid import Layout
from ._plugin import step_key
from ._tasks import summary

__all__ = ["symbolic_graph", "batch_graph", "step_of_key", "kept_name", "step_key"]


#: ledger key name -> communicating step of the report
_STEP_OF = {"sendA": "a_bcast", "bpiece": "b_bcast", "part": "fiber",
            "symA": "symbolic", "symB": "symbolic"}


def step_of_key(key) -> str:
    """Which step a transferred key belongs to (``other`` for consumers etc.)."""
    name = key[0] if isinstance(key, tuple) else str(key)
    return _STEP_OF.get(name.rsplit("-", 1)[-1], "other")


def symbolic_graph(run: str, lay: Layout, owner: dict, a_keys: dict, b_keys: dict,
                   mask_keys: dict | None = None, complement: bool = False):
    """Algorithm 3, lines 2-8: per cell, the sum over stages of LocalSymbolic.

    With ``mask_keys`` (cell -> key of the mask's piece rows_i x column block j) each
    stage counts only the entries the mask keeps: the exact masked count.

    Returns ``(tasks, workers, total_keys)`` with one total per cell.
    """
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

    Parameters
    ----------
    ids : dict
        ``rows[i]``: original row ids of row block i; ``cols``: original id of
        every column (the run may permute); ``shape``: C's shape.
    row_keys : dict, optional
        ``cell -> key`` of the cell's row ids stored on its worker: the consumer tasks
        take them from there instead of carrying ``ids["rows"]`` (a worker holds the
        tasks of every batch whose ``done`` result it keeps: an array in each would
        grow its memory with b).
    local : {"staged", "fused"}
        ``staged``: a ``mult`` task per SUMMA stage, then Merge-Layer (the paper).
        ``fused``: all stages go into one accumulator per column
        (:func:`~daskhpc.spgemm._local.fused_multiply`); same transfers, no
        partial products. With l > 1 each fiber piece bound for another layer
        is its own ``part`` task, computed first; Merge-Fiber (``cblock``)
        multiplies the piece that stays into the same accumulator as the
        pieces received (no separate merge pass, no stored own piece).
    batches : sequence of int, optional
        The batches to build, in this order (default all ``lay.b``): a run that
        lost a worker computes again only the batches whose results were lost.
    save : callable, optional
        ``save(t, name) -> path``: with a consumer that keeps its blocks, every
        kept block is also written to ``path`` (the checkpoint) by a ``ckpt``
        task on its own worker, and the batch's ``done`` task waits for the
        writes, so a finished batch is a batch on disk.
    topic : str, optional
        The ``done`` task of every batch also reports its summary to the clients
        subscribed to this event topic (:func:`~daskhpc.spgemm._tasks.batch_done_reported`).
    checkpointed : bool
        The run keeps a checkpoint: the report says the batch is saved (its summary goes
        to the manifest; kept blocks were written before, see ``save``).
    semiring : int
        The semiring's code (``_kernels.SEMIRINGS``) every multiply and merge uses.
    mask_keys : dict, optional
        ``cell -> key`` of the mask's piece (rows of the cell x its column block): C<M>,
        every multiply task forms only the entries the mask keeps (not in it, with
        ``complement``); an ``mpiece`` task per batch selects the batch's columns.

    Returns
    -------
    tasks, workers : dict
    done_keys : list
        One per batch (the plugin admits the next batch when it finishes).
    kept_keys : list
        Consumer outputs that stay on the workers (``consumer.keeps``).
    """
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
                # one task per fiber piece that leaves the cell (the piece that
                # stays is computed by Merge-Fiber itself, below)
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
                # a worker fetches a task's inputs only once the task is ready, so
                # Merge-Fiber alone would fetch the other layers' pieces after the
                # last one (its own) is done; a receive task per incoming piece
                # starts each fetch as soon as the piece exists (overlapping it
                # with the computation of the rest)
                recvs = [put("recv", t, (i, j, k2, k), (T.send, step_key(run, "part", t, i, j,
                                                                         k2, k)), cell)
                         for k2 in range(l) if k2 != k]
                if local == "fused":
                    # Merge-Fiber fused with the multiply of the piece that stays:
                    # the received pieces go into the same accumulator
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
                    # the first cell of a chained batch starts its output afresh
                    # (a batch computed again after a lost worker overwrites it)
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
            # the done task needs only sizes: a summary next to each kept block
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
