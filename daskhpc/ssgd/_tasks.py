"""What runs on the workers: a part's static data, its state, and the task functions.

A part's :class:`PartData` is scattered once to its worker; its :class:`PartState` lives
in a registry in that worker process for the whole run (never a Dask value, so never
copied, spilled or sent). One sub-epoch of a part is a group of tasks with the same
inputs, one per message it sends next: whichever runs first does the SGD sweep, each
returns its message's rows (one scheduler round trip per sub-epoch). H blocks keep their
last three versions, so a late send task still reads the rows of its sub-epoch.

.. warning::
   Tasks act on worker-side state and must not be re-run (Dask task retries stay off);
   a lost worker ends the attempt and ``_job`` resumes from the last checkpoint."""

from __future__ import annotations

import contextlib
import pickle
import time
from dataclasses import dataclass, field

import numpy as np

from daskhpc._clock import step_clock, step_times
from daskhpc._workflows import EXCHANGE_PLUGIN

from ._kernels import block_seed, error_sse, init_rows, initial_rows, sgd_block, sweep

KEEP_VERSIONS = 3
_REGISTRY: dict = {}   # (token, part) -> PartState, in each worker process
_STASH: dict = {}      # (token, bundle key) -> (bundle, last sub-epoch that reads it)


@dataclass(eq=False)
class PartData:
    """Everything static about one part (built on the client, scattered once)."""

    part: int
    K: int
    F: int
    whole: bool                      # DSGD: a block travels as a whole
    seed: int
    init_scale: float
    lr: np.ndarray                   # learning rate per epoch
    reg: float
    blocks: np.ndarray               # (epochs, K): block updated in (epoch, sub-epoch)
    rows: np.ndarray                 # global ids of the part's W rows
    cols: list                       # per block: global ids of the H rows held, ascending
    init_blocks: tuple               # blocks whose initial rows the part starts with
    bli: list                        # per block: local W row of each rating
    blj: list                        # per block: local H row of each rating
    bval: list                       # per block: the ratings, in block order
    send: dict = field(default_factory=dict)      # (q, m) -> [(block, positions)]
    recv: dict = field(default_factory=dict)      # (q, m) -> [(ty, block, lo, hi, pos)]
    local: dict = field(default_factory=dict)     # (q, m) -> a local sender's send spec
    eval_epochs: frozenset = frozenset()
    test_cols: np.ndarray | None = None
    test_li: np.ndarray | None = None
    test_lj: np.ndarray | None = None
    test_val: np.ndarray | None = None
    clip: tuple = (-np.inf, np.inf)
    ev_send: dict = field(default_factory=dict)   # (q, m) -> [(block, positions)]
    ev_recv: dict = field(default_factory=dict)   # (q, m) -> positions in test_cols
    ev_local: dict = field(default_factory=dict)  # q -> [(block, local pos, test pos)]
    ev_init: dict = field(default_factory=dict)   # q -> test positions of unheld rows
    final_held: list = field(default_factory=list)  # [(block, local positions)]
    topic: str | None = None         # event topic of the unit reports (runtime.send_report)
    strata: str | None = None        # timeline id: epoch reports carry the sweeps' rows
    epoch0: int = 0                  # epochs of the run before this setup's epoch 0
    shuffle: bool = True             # the ratings of a block in seeded random order
    W0: np.ndarray | None = None     # resuming: the W rows to start from
    H0: dict | None = None           # resuming: block -> the held H rows to start from
    ckpt_epochs: frozenset = frozenset()   # epochs after which the part checkpoints
    ckpt_held: dict = field(default_factory=dict)  # epoch (-1: every) -> [(block, pos)]
    bias: tuple | None = None        # biased model: (reg_bias, mu); a bias column more

    @property
    def width(self) -> int:
        """Columns of W and H (F, plus the bias column of the biased model)."""
        return self.F + (self.bias is not None)

    def initial(self, which: int, ids: np.ndarray) -> np.ndarray:
        """The seeded initial rows ``ids`` of W (``which=0``) or H."""
        return initial_rows(self.seed, which, ids, self.F, self.init_scale,
                            self.bias is not None)


class PartState:
    """W (updated in place), versions of the held H blocks, losses, step log."""

    def __init__(self, W, H):
        self.W = W
        self.H = H              # per block: [(sub-epoch of the sweep, array), ...]
        self.T = -1             # last sub-epoch swept
        self.loss: dict = {}    # epoch -> sum over its sub-epochs (in order)
        self.log: list = []     # (epoch, sub-epoch, block, start, stop)
        self.W_end: dict = {}   # epoch -> copy of W after it (evaluated epochs)
        self.W_ckpt: dict = {}  # epoch -> copy of W after it (checkpointed epochs)


def version(state: PartState, b: int, T: int) -> np.ndarray:
    """Block b as it was after sub-epoch T (the newest version swept at or before T)."""
    for t, arr in reversed(state.H[b]):
        if t <= T:
            return arr
    raise RuntimeError(f"block {b} rows for sub-epoch {T} are gone (kept versions "
                       f"{[t for t, _ in state.H[b]]}): a send task ran too late")


def warm_up() -> bool:
    """Load the compiled kernels (numba cache) before anything is timed."""
    W, H, i = np.zeros((1, 2)), np.zeros((1, 2)), np.zeros(1, np.int64)
    seed = block_seed(0, 0, 0, 0)
    # the parts' int32 indices and float32 ratings, and the serial reference's types
    for ix, v in ((i, np.ones(1)), (i.astype(np.int32), np.ones(1, np.float32)),
                  (i.astype(np.int32), np.ones(1))):
        sgd_block(W, H, ix, ix, v, 0.1, 0.1, seed, True)
        error_sse(W, H, ix, ix, v, 0.0, 1.0)
        sweep(W, H, ix, ix, v, 0.1, 0.1, seed, (0.1, 1.0), True)
        error_sse(W, H, ix, ix, v, 0.0, 1.0, (0.1, 1.0))
    init_rows(0, 0, i, 2, 1.0)
    return True


def init(team: list, token: str) -> None:
    """Create the states of the worker's parts from the seeded initial factors."""
    for d in team:
        if d.W0 is not None:         # resuming from a checkpoint
            W = d.W0.copy()
            H = [[(-1, d.H0[b].copy())] if b in d.init_blocks else [] for b in range(d.K)]
        else:
            W = d.initial(0, d.rows)
            H = [[(-1, d.initial(1, d.cols[b]))]
                 if b in d.init_blocks else [] for b in range(d.K)]
        _REGISTRY[(token, d.part)] = PartState(W, H)


def _rows(spec, st: PartState, T: int, whole: bool) -> np.ndarray:
    """A message's rows from a sender's state as they were after sub-epoch T."""
    if whole:
        return version(st, spec[0][0], T)
    if len(spec) == 1:
        b, pos = spec[0]
        return version(st, b, T)[pos]
    return np.concatenate([version(st, b, T)[pos] for b, pos in spec])


def _inbox(d: PartData, token: str, inputs):
    """(q, m, e, rows) of the inputs; a sender on this worker is read from its state."""
    for (_, q, m, ei, src, ts, _slot), arr in inputs:
        if src >= 0:
            arr = _rows(d.local[(q, m)], _REGISTRY[(token, src)], ts, d.whole)
        yield q, m, ei, arr


def _sweep(st: PartState, d: PartData, token: str, T: int, inputs) -> None:
    t0 = time.time()
    e, k = divmod(T, d.K)
    b = int(d.blocks[e, k])
    inbox = list(_inbox(d, token, inputs))
    if d.whole and inbox:
        Hb = inbox[0][3].copy()              # DSGD: the block arrives whole
    else:
        Hb = st.H[b][-1][1].copy()
        for q, m, ei, arr in inbox:
            for ty, _blk, lo, hi, pos in d.recv[(q, m)]:
                if ei * d.K + ty == T:       # the segment meant for this sub-epoch
                    Hb[pos] = arr[lo:hi]
    loss = sweep(st.W, Hb, d.bli[b], d.blj[b], d.bval[b], d.lr[e], d.reg,
                 block_seed(d.seed, d.epoch0 + e, d.part, b), d.bias, d.shuffle)
    st.H[b] = (st.H[b] + [(T, Hb)])[-KEEP_VERSIONS:]
    st.loss[e] = st.loss[e] + loss if k else loss
    if k == d.K - 1 and e in d.eval_epochs:
        st.W_end[e] = st.W.copy()
    if k == d.K - 1 and e in d.ckpt_epochs:
        st.W_ckpt[e] = st.W.copy()     # the next sweep updates W in place
    st.T = T
    st.log.append((e, k, b, t0, time.time()))
    if d.topic and k == d.K - 1:
        # the part's epoch is done: its loss partial sum and the span of its sweeps
        spans = [x for x in st.log if x[0] == e]
        rows = None if d.strata is None else [
            {"run": d.strata, "key": [d.part, e, kk], "task": f"part {d.part}", "part": d.part,
             "epoch": e, "subepoch": kk, "block": bb, "start": t0, "stop": t1}
            for _, kk, bb, t0, t1 in spans]
        _report(d, e, d.part, {"loss": st.loss[e]}, start=spans[0][3], stop=spans[-1][4],
                strata=rows)


@dataclass(frozen=True)
class Stashed:
    """A step's input read from the worker's registry: a bundle of an earlier window."""

    key: str            # str() of the bundle's task key (a key itself would be resolved)


def stash(token: str, name: str, last: int, bundle):
    """Keep ``bundle`` as ``name`` for later windows' steps, until sub-epoch ``last``."""
    _STASH[(token, name)] = (bundle, last)


def _unstash(token: str, T: int, msgs) -> list:
    out = [_STASH[(token, m.key)][0] if isinstance(m, Stashed) else m for m in msgs]
    for k in [k for k, (_, last) in _STASH.items() if k[0] == token and last < T]:
        del _STASH[k]            # read for the last time by an earlier sub-epoch
    return out


def work(team: list, token: str, T: int, bundle: np.ndarray, meta: np.ndarray, chain,
         *msgs):
    """Sub-epoch T of the worker's parts (unless done by the group), then send ``bundle``.

    ``meta`` has a row ``(dst, q, m, e, src, ts, slot)`` per input: with ``src = -1`` the
    next of ``msgs`` holds it at ``slot``, else it is read from part src's state on this
    worker as after sub-epoch ts. ``chain`` only orders the groups."""
    it = iter(_unstash(token, T, msgs) if _STASH else msgs)
    inputs = [(row, None if row[4] >= 0 else _slot(next(it), row[6])) for row in meta.tolist()]
    for d in team:
        st = _REGISTRY[(token, d.part)]
        if st.T == T - 1:
            _sweep(st, d, token, T, [x for x in inputs if x[0][0] == d.part])
        elif st.T < T - 1:
            raise RuntimeError(f"part {d.part}: sub-epoch {T} before {T - 1}")
    return _bundle({d.part: d for d in team}, token, T, bundle) if bundle.size else None


def _bundle(by_part: dict, token: str, T: int, items: np.ndarray):
    """The rows of ``items`` ``(q, m, src)`` after sub-epoch T (a lone one as a bare array)."""
    out = [_rows(by_part[src].send[(q, m)], _REGISTRY[(token, src)], T, by_part[src].whole)
           for q, m, src in items.tolist()]
    return out[0] if len(out) == 1 else out


async def work_in_loop(team: list, token: str, T: int, bundle: np.ndarray, meta: np.ndarray,
                       chain, *msgs):
    """:func:`work` in the worker's event loop (a sweep is shorter than a thread hand-off);
    the worker still counts it against its one thread."""
    return work(team, token, T, bundle, meta, chain, *msgs)


def _report(d: PartData, e: int, reporter, values: dict, **kw) -> None:
    from daskhpc.runtime import send_report

    send_report(d.topic, d.epoch0 + e, {reporter: values}, **kw)


def epoch_key(token: str, label: str, e: int) -> tuple:
    """Key of the direct mode's task of the parts ``label`` whose last epoch is ``e``."""
    return (f"ssgd-epoch-{token}", label, e)


async def epochs_direct(team: list, token: str, label: str, epochs: bytes, chain,
                        first: bool = False, last: bool = False):
    """Epochs of the worker's parts in the direct exchange mode, in the event loop.

    Per step ``(T, meta, waits, drop, out)``: wait for the bundles ``waits``, sweep, push
    ``out``, drop bundles past their last reader; then the epoch's test error and checkpoints."""
    from distributed import get_worker

    from daskhpc.runtime import Exchange, ReportBatch

    worker = get_worker()
    ext = worker.plugins[Exchange.name]
    by_part = {d.part: d for d in team}
    epochs = pickle.loads(epochs)
    key = epoch_key(token, label, epochs[-1][0])
    if first:
        init(team, token)
    # the reports go out together, at most one event per COALESCE_S: an event per part
    # and epoch slowed the sweeps (docs/benchmarks.md)
    topic = team[0].topic
    with ReportBatch(topic, worker).holding() if topic else contextlib.nullcontext():
        return await _epochs(team, token, epochs, ext, by_part, worker, key, last,
                             step_clock(token, label))


async def _epochs(team, token, epochs, ext, by_part, worker, key, last, spent):
    """The loop of :func:`epochs_direct`; ``spent`` is its StepClock."""
    spent.exchange = True
    clock = time.perf_counter
    for e, steps, ev, ckpts in epochs:
        for T, meta, waits, drop, out in steps:
            t0 = clock()
            ids = sorted(set(waits), key=str)
            got = await ext.wait(token, ids, keep=True, clock=spent)
            t1 = clock()
            work(team, token, T, _NOTHING, meta, None, *[got[k] for k in waits])
            ext.discard(token, drop)
            t2 = clock()
            await ext.push_all(token, [(receiver, bkey, [(bkey, _bundle(by_part, token, T, items))])
                                       for receiver, bkey, items in out])
            spent.compute += t2 - t1
            spent.wait += t1 - t0
            spent.send += clock() - t2
            spent.steps += 1
        t0 = clock()              # an epoch's test error and checkpoints count as compute
        sse = {} if ev is None else await _evaluate_direct(ext, by_part, token, e, ev)
        for p, path in ckpts.items():
            checkpoint(by_part[p], token, e, path, None, sse.get(p))
        spent.compute += clock() - t0
        ts = worker.state.tasks.get(key)      # nobody waits for it: the run stopped
        if ts is None or ts.state == "cancelled":
            return None
    return {d.part: final(d, token, None) for d in team} if last else None


async def _evaluate_direct(ext, by_part: dict, token: str, e: int, ev) -> dict:
    """``{part: test SSE}`` after epoch e: push the test H rows others read, evaluate."""
    q, sends, needs = ev
    have, pushes = {}, []
    for receiver, key, items in sends:
        msgs = [(mid, eval_send(by_part[src], token, e, q, m, None)) for mid, m, src in items]
        if receiver is None:            # read by a part of this worker
            have.update(msgs)
        else:
            pushes.append((receiver, key, msgs))
    await ext.push_all(token, pushes)
    have.update(await ext.wait(token, [mid for need in needs.values() for _, mid in need
                                       if mid not in have]))
    return {p: evaluate(by_part[p], token, e, q, np.array([m for m, _ in need], np.int64),
                        None, *[have[mid] for _, mid in need])
            for p, need in needs.items()}


_NOTHING = np.zeros((0, 3), np.int64)


def _slot(value, slot: int) -> np.ndarray:
    return value[slot] if isinstance(value, list) else value


def eval_send(d: PartData, token: str, e: int, q: int, m: int, chain) -> np.ndarray:
    """Rows a holder sends for another part's test error (as epoch e left them)."""
    st = _REGISTRY[(token, d.part)]
    T = (e + 1) * d.K - 1
    return np.concatenate([version(st, b, T)[pos] for b, pos in d.ev_send[(q, m)]])


def evaluate(d: PartData, token: str, e: int, q: int, ids: np.ndarray, chain, *msgs) -> float:
    """Squared test error of the part's ratings with W and H as epoch e left them."""
    st = _REGISTRY[(token, d.part)]
    T = (e + 1) * d.K - 1
    Ht = np.empty((d.test_cols.size, d.width))
    unheld = d.ev_init[q]
    if unheld.size:
        Ht[unheld] = d.initial(1, d.test_cols[unheld])
    for b, local, pos in d.ev_local[q]:
        Ht[pos] = version(st, b, T)[local]
    for m, arr in zip(ids.tolist(), msgs):
        Ht[d.ev_recv[(q, m)]] = arr
    sse = error_sse(st.W_end.pop(e), Ht, d.test_li, d.test_lj, d.test_val, *d.clip, d.bias)
    if d.topic:
        _report(d, e, ("eval", d.part), {"sse": float(sse)})
    return sse


def checkpoint(d: PartData, token: str, e: int, path: str, chain, sse=None) -> str:
    """Write the part's state after epoch e to ``path``: its files make the step complete."""
    from daskhpc.runtime import save_arrays

    st = _REGISTRY[(token, d.part)]
    T = (e + 1) * d.K - 1
    log = np.array([x[3:] for x in st.log if x[0] == e], np.float64).reshape(-1, 2)
    held = d.ckpt_held.get(e, d.ckpt_held.get(-1, []))
    save_arrays(path, W=st.W_ckpt.pop(e), **_held(d, st, T, held),
                loss=np.float64(st.loss[e]), times=log,
                sse=np.float64(np.nan if sse is None else sse))
    if d.topic:        # after the file is whole: the epoch is on disk for this part
        _report(d, e, ("ckpt", d.part), {}, saved=True)
    return path


def final(d: PartData, token: str, chain) -> dict:
    """After the last sub-epoch: W, the newest held H rows, the losses and the step log."""
    st = _REGISTRY[(token, d.part)]
    return {"W": st.W, **_held(d, st, None, d.final_held), "loss": dict(st.loss),
            "log": list(st.log)}


def _held(d: PartData, st: PartState, T, held) -> dict:
    """``cols`` and ``rows`` of the held H rows ``[(block, positions)]`` after sub-epoch T."""
    rows = [(st.H[b][-1][1] if T is None else version(st, b, T))[pos] for b, pos in held]
    return {"cols": np.concatenate([d.cols[b][pos] for b, pos in held]) if held
            else np.zeros(0, np.int64),
            "rows": np.concatenate(rows) if rows else np.zeros((0, d.width))}


def cleanup(token: str, dask_worker=None) -> dict:
    """Drop the run's states and mail from this worker; return its direct-mode time split."""

    ext = None if dask_worker is None else dask_worker.plugins.get(EXCHANGE_PLUGIN)
    if ext is not None:
        ext.forget(token)
    for key in [key for key in _STASH if key[0] == token]:
        del _STASH[key]
    for key in [key for key in _REGISTRY if key[0] == token]:
        del _REGISTRY[key]
    return step_times(token, forget=True)
