"""C kept on disk as scipy ``save_npz`` pieces whose sum is C (``result.save(DIR)``).

A result saved after the run: C in the client's memory (one piece), on the workers
(a piece per chunk, written there) or already written elsewhere (copied).
"""

from __future__ import annotations

import os
import shutil

import numpy as np
import scipy.sparse as sp

#: The sub-directory of ``--save DIR`` that holds C's pieces (the result's ``matrix``).
PIECES = "matrix"


def piece_name(t: int, cell: tuple) -> str:
    """``matrix/piece-<batch>-<i>-<j>-<k>.npz`` (``all`` for i: a block of whole columns)."""
    return "{}/piece-{:05d}-{}.npz".format(PIECES, int(t), "-".join(
        "all" if x is None else str(int(x)) for x in cell))


def pieces_descriptor(files: list, shape) -> dict:
    """The manifest's description of C kept as save_npz pieces (``daskhpc._saved``)."""
    return {"format": "scipy.sparse.save_npz", "combine": "sum",
            "shape": [int(x) for x in shape], "dtype": "<f8",
            "nnz": int(sum(e["nnz"] for e in files)), "files": list(files)}


def prepare_save(directory) -> str:
    """The absolute ``DIR`` for C's pieces, created and emptied of a previous save."""
    import glob

    from daskhpc.errors import InputError

    d = os.path.abspath(os.fspath(directory))
    try:
        os.makedirs(os.path.join(d, PIECES), exist_ok=True)
        for old in [os.path.join(d, "manifest.json"),
                    *glob.glob(os.path.join(d, PIECES, "piece-*.npz"))]:
            if os.path.exists(old):
                os.remove(old)
    except OSError as e:
        raise InputError(f"--save {directory}: cannot write there ({e.strerror})") from e
    return d


def write_whole(matrix, directory) -> dict:
    """C from the client's memory as one piece."""
    from daskhpc._saved import write_npz

    d = prepare_save(directory)
    name = f"{PIECES}/piece-all.npz"
    entry = {"file": name, **write_npz(os.path.join(d, name), sp.csr_array(matrix))}
    return pieces_descriptor([entry], matrix.shape)


def write_chunks(matrix, directory) -> dict:
    """C as a dask array (``keep="workers"``): every chunk written by a task next to it."""
    import dask

    from ._collect import client_of

    d = prepare_save(directory)
    offsets = [np.concatenate([[0], np.cumsum(c)]).astype(np.int64) for c in matrix.chunks]
    blocks = matrix.to_delayed()
    tasks = [dask.delayed(_save_chunk, pure=False)(
        blocks[i, j], (int(offsets[0][i]), int(offsets[1][j])), matrix.shape, d,
        f"{PIECES}/piece-chunk-{i}-{j}.npz")
        for i in range(blocks.shape[0]) for j in range(blocks.shape[1])]
    entries = [e for e in dask.compute(*tasks, scheduler=client_of(matrix)) if e is not None]
    return pieces_descriptor(sorted(entries, key=lambda e: e["file"]), matrix.shape)


def _save_chunk(chunk, origin, shape, directory, name) -> dict | None:
    from daskhpc._saved import write_npz

    c = sp.coo_array(chunk)
    if c.nnz == 0:
        return None
    piece = sp.coo_array((c.data, (c.row.astype(np.int64) + origin[0],
                                   c.col.astype(np.int64) + origin[1])), shape=tuple(shape))
    return {"file": name, **write_npz(os.path.join(directory, name), piece)}


def copy_pieces(source: str, desc: dict, directory) -> dict:
    """The pieces ``desc`` names under ``source``, copied atomically to ``directory``."""
    d = prepare_save(directory)
    for e in desc["files"]:
        dst = os.path.join(d, e["file"])
        tmp = f"{dst}.tmp-{os.getpid()}"
        shutil.copyfile(os.path.join(source, e["file"]), tmp)
        os.replace(tmp, dst)
    return desc
