"""Per-epoch checkpoints of an SSGD run (``--checkpoint DIR``, ``--resume``); the directory,
manifest and completed steps are the frame's (``daskhpc.runtime.CheckpointDir``).

Step n is the state after n epochs: per part its W rows and the H rows it holds the
newest copy of. The row partition is saved beside the manifest and read back on resume
(partitioners need not be deterministic). The fingerprint covers what changes the
numbers; ``--epochs`` and ``--strategy`` may change on resume."""

from __future__ import annotations

import os
from dataclasses import replace

from ._serial import assemble
from ._setup import Setup

PARTITION = "partition.txt"


def fingerprint(s: Setup) -> dict:
    """What must not change between a run and its resumption."""
    from daskhpc.runtime import array_digest

    o, r = s.options, s.ratings
    # a collection's ratings (a DataFrame's ids too) are digested on the keeper
    ids = s.values.stats["ids_digest"] if r.on_workers else \
        array_digest(r.rows, r.cols) if s.values is not None else None
    ratings = r.digest() if s.values is None else \
        f"{ids[:32]}{s.values.stats['digest'][:32]}"
    return {"ratings": ratings, "shape": list(r.shape),
            "parts": s.K, "rank": o.rank, "seed": o.seed, "lr": o.lr, "reg": o.reg,
            "init_scale": s.init_scale, "test_fraction": o.test_fraction,
            "strata": o.strata, "ring_seed": o.ring_seed,
            "partition": array_digest(s.assignment.row_parts, s.assignment.col_blocks),
            # only where set: unbiased checkpoints keep the fingerprint they had
            **({"biased": True, "reg_bias": o.bias_reg} if o.biased else {})}


def check_input(path, ratings, collection: bool = False) -> None:
    """Refuse to resume ``path`` with other ratings than it was made from."""
    import json

    from daskhpc.errors import InputError
    from daskhpc.runtime import array_digest

    where = os.path.join(os.fspath(path), "manifest.json")
    try:
        with open(where) as f:
            old = json.load(f).get("fingerprint", {})
    except (OSError, ValueError, AttributeError):
        return                      # no manifest (yet): the frame says what is wrong
    r = ratings
    now = {"ratings": array_digest(r.rows, r.cols)[:32] if collection else
           r.digest(), "shape": list(r.shape)}
    if r.on_workers:
        now = {"shape": list(r.shape)}
    then = dict(old, ratings=str(old.get("ratings"))[:32]) if collection and "ratings" in old \
        else old
    if any(k in then and then[k] != v for k, v in now.items()):
        raise InputError(
            f"{where}: this checkpoint was made from another input (ratings sha256 "
            f"{str(old.get('ratings'))[:12]}... shape {old.get('shape')} there, "
            f"{now.get('ratings', '?')[:12]}... shape {now['shape']} now); use another "
            "--checkpoint directory")


def save_partition(s: Setup, ck) -> None:
    """Write the row parts and column blocks next to the manifest (once)."""
    from daskhpc.hypergraph import write_pair_file

    if not os.path.exists(ck.extra(PARTITION)):
        write_pair_file(ck.extra(PARTITION), s.assignment.row_parts, s.assignment.col_blocks)


def restore(s: Setup, ck, n: int):
    """W and H after ``n`` epochs, from the parts' files of step n."""
    from daskhpc.runtime import load_arrays

    return assemble(replace(s, start=None, epoch0=0),
                    ((p, load_arrays(ck.file(n, f"part-{p}.npz"))) for p in range(s.K)))
