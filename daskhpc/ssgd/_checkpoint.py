"""Per-epoch checkpoints of an SSGD run (``--checkpoint DIR``, ``--resume``).

Step n of the checkpoint is the state after n epochs: one file per part, written by the
part's worker at the end of epoch n-1 (``_tasks.checkpoint``): its W rows and the H rows
it holds the newest copy of (together the parts hold every H row that has been
updated; the others are still initial). The manifest keeps each complete epoch's
history row (loss, test RMSE, time), so a resumed run reports the whole run.

The row partition is saved next to the manifest in the SSGD pair format on first use
and read back on ``--resume``: a resumed job uses the same blocks even where the
partitioner is not deterministic. The fingerprint covers what changes the numbers
(ratings, parts, rank, seeds, learning rate, regularisation, initial scale, split,
strata, partition); ``--epochs`` and ``--strategy`` may change on resume (all
strategies compute the same W and H; more epochs continue the same schedule).

Examples
--------
>>> ck = SSGDCheckpoint.open(tmpdir, setup)                       # doctest: +SKIP
>>> run, history = ck.restore(setup)                              # doctest: +SKIP
>>> run.epoch0                                                    # doctest: +SKIP
7
"""

from __future__ import annotations

import os
from dataclasses import replace

import numpy as np

from daskhpc.runtime import CheckpointDir, array_digest, load_arrays

from ._kernel import learning_rate
from ._serial import initial_factors
from ._setup import Setup

__all__ = ["SSGDCheckpoint", "fingerprint", "partition_path"]

PARTITION = "partition.txt"


def partition_path(path) -> str | None:
    """The partition saved in checkpoint directory ``path``, if there is one."""
    p = os.path.join(os.fspath(path), PARTITION)
    return p if os.path.exists(p) else None


def fingerprint(s: Setup) -> dict:
    """What must not change between a run and its resumption."""
    o, r = s.options, s.ratings
    return {"ratings": array_digest(r.rows, r.cols, r.vals), "shape": list(r.shape),
            "parts": s.K, "rank": o.rank, "seed": o.seed, "lr": o.lr, "reg": o.reg,
            "init_scale": s.init_scale, "test_fraction": o.test_fraction,
            "strata": o.strata, "ring_seed": o.ring_seed,
            "partition": array_digest(s.assignment.row_parts, s.assignment.col_blocks)}


class SSGDCheckpoint:
    """The checkpoint directory of one SSGD run (see the module docstring)."""

    def __init__(self, store: CheckpointDir):
        self.store = store

    @classmethod
    def open(cls, path, s: Setup, *, resume: bool = False) -> SSGDCheckpoint:
        """Open (or start) the checkpoint of the run prepared in ``s``."""
        from daskhpc.hypergraph import write_pair_file

        store = CheckpointDir(path, "ssgd", fingerprint(s), resume=resume)
        if partition_path(path) is None:
            write_pair_file(store.extra(PARTITION), s.assignment.row_parts,
                            s.assignment.col_blocks)
        return cls(store)

    @property
    def path(self) -> str:
        return self.store.path

    def latest(self) -> int | None:
        """Epochs done in the newest complete step (None: nothing saved yet)."""
        got = self.store.latest()
        return None if got is None else got[0]

    def part_file(self, epoch: int, part: int) -> str:
        """Where part ``part`` writes its state after (run) epoch ``epoch``."""
        return self.store.file(epoch + 1, f"part-{part}.npz")

    def complete(self, step: int, history: dict) -> None:
        self.store.complete(step, history=history)

    def catch_up(self, s: Setup) -> int:
        """Mark complete every next step whose part files all exist; returns how many.

        The history row of epoch n - 1 (step n) is made from the files: the loss partial
        sums added in part order (as the driver adds them, so the numbers are the same),
        the test RMSE from the parts' squared errors, the time from the first step start
        to the last step end of the epoch.
        """
        done = 0
        n = (self.latest() or 0) + 1
        while n <= s.options.epochs:
            d = os.path.join(self.path, f"step-{n:06d}")
            files = [os.path.join(d, f"part-{p}.npz") for p in range(s.K)]
            if not all(os.path.exists(f) for f in files):
                break
            loss, sse, t0, t1 = 0.0, [], [], []
            for f in files:
                with np.load(f) as z:          # only the small arrays are read
                    loss += float(z["loss"])
                    sse.append(float(z["sse"]))
                    t0.append(z["times"][:, 0].min(initial=np.inf))
                    t1.append(z["times"][:, 1].max(initial=-np.inf))
            e = n - 1
            row = {"epoch": e, "lr": learning_rate(s.options.lr, e), "train_loss": loss,
                   "time_s": float(max(t1) - min(t0))}
            if not np.isnan(sse).any():
                total = 0.0
                for v in sse:
                    total += v
                row["test_rmse"] = float(np.sqrt(total / s.test.nnz))
            self.complete(n, row)
            done += 1
            n += 1
        return done

    def restore(self, s: Setup) -> tuple[Setup, list[dict]]:
        """The rest of the run from the newest complete step, and the history before it.

        Returns ``s`` itself (and no history) when nothing is saved yet.
        """
        n = self.latest()
        if n is None:
            return s, []
        W, H = initial_factors(replace(s, start=None, epoch0=0))
        for p in range(s.K):
            got = load_arrays(os.path.join(self.path, f"step-{n:06d}", f"part-{p}.npz"))
            W[s.layout.row_parts == p] = got["W"]
            H[got["cols"]] = got["rows"]
        before = [r for r in _dedupe([d["history"] for d in self.store.steps()
                                      if "history" in d]) if r["epoch"] < n]
        if n >= s.options.epochs:       # nothing left to run: the saved state is the end
            return replace(s, epoch0=s.options.epochs, start=(W, H)), before
        return s.resumed(n, W, H), before


def _dedupe(rows: list[dict]) -> list[dict]:
    """One row per epoch, the last written (a restart re-completes epochs it redid)."""
    by_epoch = {}
    for r in rows:
        by_epoch[int(r["epoch"])] = r
    return [by_epoch[e] for e in sorted(by_epoch)]
