"""A checkpoint directory that long runs write step by step and resume from."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import warnings
import zipfile
import zlib

import numpy as np

from daskhpc.errors import InputError

MANIFEST = "manifest.json"

#: What a damaged file raises when it is read (np.load of a truncated .npz: BadZipFile,
#: EOFError, a zlib error, KeyError for a missing member, ValueError for a bad header).
_DAMAGED = (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error)


class CheckpointWarning(UserWarning):
    """A checkpoint step was damaged and the run falls back to an older one."""


class CheckpointDir:
    """The checkpoint of one run in ``path``.

    ``path`` holds ``manifest.json`` (workflow, fingerprint, the complete steps) and
    ``step-000004/``-style folders the workers write themselves (:func:`save_arrays`, on a
    file system every worker sees). :meth:`complete` rewrites the manifest atomically, so a
    run killed at any moment leaves the previous step usable. Refused: another run's
    checkpoint (the message shows where the fingerprints differ), a checkpoint without
    ``resume``, step folders without a manifest. On resume a damaged newest step is named in
    a :class:`CheckpointWarning` and the run falls back to the newest intact one.

    Parameters
    ----------
    path : str or Path
        Created if missing.
    workflow : str
    fingerprint : dict
        JSON-serialisable; what changes the run's numbers. Must equal the stored one.
    resume, keep : bool, int
        Continue from a checkpoint found in ``path``; complete steps kept on disk.

    Examples
    --------
    >>> import tempfile
    >>> ck = CheckpointDir(tempfile.mkdtemp(), "demo", {"seed": 0})
    >>> _ = save_arrays(ck.file(3, "part-0.npz"), x=np.arange(3))
    >>> ck.complete(3, loss=1.5)
    >>> ck.latest()
    (3, {'step': 3, 'loss': 1.5})
    """

    def __init__(self, path, workflow: str, fingerprint: dict, *, resume: bool = False,
                 keep: int = 2):
        self.path = os.path.abspath(os.fspath(path))
        self.workflow = workflow
        self.fingerprint = json.loads(json.dumps(fingerprint))   # as stored
        self.keep = max(int(keep), 1)
        try:
            os.makedirs(self.path, exist_ok=True)
        except OSError as e:
            raise InputError(f"{self.path}: cannot create the checkpoint directory: "
                             f"{e.strerror}") from e
        self.manifest = self._read()
        self.dropped: list[dict] = []       # damaged steps left out on resume
        if self.manifest is None:
            steps = sorted(n for n in os.listdir(self.path) if _is_step(n))
            if steps:
                raise InputError(f"{self.path}: has checkpoint step folders ({steps[0]}"
                                 f"{', ...' if len(steps) > 1 else ''}) but no {MANIFEST}: "
                                 "not a checkpoint this run can use (or its manifest was "
                                 "lost); use an empty --checkpoint directory")
            self.manifest = {"workflow": workflow, "fingerprint": self.fingerprint,
                             "complete": []}
            self._write()
            return
        where = os.path.join(self.path, MANIFEST)
        if self.manifest.get("workflow") != workflow:
            raise InputError(f"{where}: a checkpoint of workflow "
                             f"{self.manifest.get('workflow')!r}, not {workflow!r}")
        old = self.manifest.get("fingerprint", {})
        diff = sorted(k for k in set(old) | set(self.fingerprint)
                      if old.get(k) != self.fingerprint.get(k))
        if diff:
            raise InputError(f"{where}: {_different(old, self.fingerprint, diff)}; use "
                             "another --checkpoint directory")
        if self.manifest["complete"] and not resume:
            raise InputError(f"{where}: holds a checkpoint at step "
                             f"{self.manifest['complete'][-1]['step']}; pass --resume to "
                             "continue from it, or use an empty directory")
        if resume:
            self._drop_damaged()

    def _drop_damaged(self) -> None:
        """Leave out the newest complete steps whose files cannot be read."""
        done = self.manifest["complete"]
        while done:
            step = int(done[-1]["step"])
            problem = check_step(self.path, step)
            if problem is None:
                return
            done.pop()
            self.dropped.append({"step": step, "problem": problem})
            back = f"falling back to step {done[-1]['step']}" if done else \
                "no older step: starting from the beginning"
            warnings.warn(f"checkpoint step {step} is damaged ({problem}); {back}",
                          CheckpointWarning, stacklevel=3)

    def _read(self) -> dict | None:
        where = os.path.join(self.path, MANIFEST)
        if not os.path.exists(where):
            return None
        try:
            with open(where) as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            raise InputError(f"{where}: unreadable checkpoint manifest: {e}") from e
        if not isinstance(data, dict) or not isinstance(data.get("complete"), list):
            raise InputError(f"{where}: not a daskhpc checkpoint manifest")
        return data

    def latest(self) -> tuple[int, dict] | None:
        """``(step, metadata)`` of the newest complete step, or None."""
        done = self.manifest["complete"]
        return (int(done[-1]["step"]), dict(done[-1])) if done else None

    def steps(self) -> list[dict]:
        """Metadata of every complete step, oldest first (including removed ones)."""
        return [dict(d) for d in self.manifest["complete"]]

    def file(self, step: int, name: str) -> str:
        """Path of file ``name`` of ``step`` (its directory is created)."""
        return step_file(self.path, step, name)

    def extra(self, name: str) -> str:
        """Path of a run-wide file (e.g. the partition) next to the manifest."""
        return os.path.join(self.path, name)

    @staticmethod
    def saved(path, name: str) -> str | None:
        """The run-wide file ``name`` next to the manifest in ``path``, if there is one."""
        p = os.path.join(os.fspath(path), name)
        return p if os.path.exists(p) else None

    def write_extra(self, name: str, data: dict) -> str:
        """Write a run-wide JSON file next to the manifest, atomically; returns its path."""
        path = self.extra(name)
        _atomic_write(path, json.dumps(data).encode())
        return path

    def complete(self, step: int, **meta) -> None:
        """Record ``step`` as complete (all its files written) and prune old steps."""
        self.manifest["complete"].append({"step": int(step), **meta})
        self._write()
        kept = {int(d["step"]) for d in self.manifest["complete"][-self.keep:]}
        for name in os.listdir(self.path):
            if _is_step(name) and int(name[5:]) not in kept and int(name[5:]) < int(step):
                shutil.rmtree(os.path.join(self.path, name), ignore_errors=True)

    def _write(self) -> None:
        _atomic_write(os.path.join(self.path, MANIFEST),
                      json.dumps(self.manifest, indent=1).encode())


def _is_step(name: str) -> bool:
    return name.startswith("step-") and name[5:].isdigit()


def _different(old: dict, new: dict, keys: list) -> str:
    """How two fingerprints differ: the input digests first, both values each."""
    def short(v):
        t = repr(v)
        return f"{v[:12]}..." if isinstance(v, str) and len(v) == 64 else \
            (t if len(t) <= 40 else t[:37] + "...")

    digests = [k for k in keys if any(isinstance(d.get(k), str) and len(d.get(k)) == 64
                                      for d in (old, new))]
    what = "made from another input" if digests else "of a run with other options"
    shown = "; ".join(f"{k}: {short(old.get(k))} there, {short(new.get(k))} now"
                      for k in (digests + [k for k in keys if k not in digests])[:5])
    return f"this checkpoint was {what} ({shown})"


def check_step(path: str, step: int) -> str | None:
    """None if every ``.npz`` file of ``step`` reads back whole (CRCs), else what is wrong."""
    d = os.path.join(path, f"step-{int(step):06d}")
    if not os.path.isdir(d):
        return None          # a step that wrote no files (SpGEMM batches kept nowhere)
    for name in sorted(os.listdir(d)):
        f = os.path.join(d, name)
        if name.startswith(".tmp-") or not name.endswith(".npz"):
            continue
        try:
            with zipfile.ZipFile(f) as z:
                bad = z.testzip()
            if bad is not None:
                return f"{f}: member {bad} is corrupt"
        except _DAMAGED as e:
            return f"{f}: {e or type(e).__name__}"
    return None


def step_file(path: str, step: int, name: str) -> str:
    """Path of file ``name`` of ``step`` in checkpoint directory ``path`` (created)."""
    d = os.path.join(path, f"step-{int(step):06d}")
    os.makedirs(d, exist_ok=True)
    return os.path.join(d, name)


def array_digest(*arrays) -> str:
    """A hash of the arrays' bytes (for a fingerprint: the same data, the same text)."""
    h = hashlib.sha256()
    for a in arrays:
        h.update(memoryview(np.ascontiguousarray(a)).cast("B"))
    return h.hexdigest()


def save_arrays(path: str, **arrays) -> str:
    """Write ``arrays`` to ``path`` (.npz) atomically; returns ``path``."""
    d = os.path.dirname(path)
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=".npz")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def load_arrays(path: str) -> dict:
    """The arrays of a file written by :func:`save_arrays`."""
    try:
        # our own handle: np.load leaks its file when a truncated zip fails to open
        with open(path, "rb") as f, np.load(f, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except _DAMAGED as e:
        raise InputError(f"{path}: unreadable checkpoint file ({type(e).__name__}: "
                         f"{e}); resume from an older step or an empty directory") from e


def _atomic_write(path: str, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
