"""Compile a workflow's numba kernels once, in the client, and say so while it happens.

With a cold cache every worker of a LocalCluster would compile the same kernels at once,
silently. :func:`prepare_kernels` runs the warm-up of the workflow's kernels module
(``WARMUP``, ``WARMUP_PLAN``: functions, ``"module:function"`` references or tuples of them)
first, with one line at the first compile (numba's ``numba:compile`` fires only on a cache
miss); a stamp beside numba's cache skips it while nothing changed. No dask here.
"""

from __future__ import annotations

import json
import os
import pathlib
import sys
import time
from dataclasses import dataclass

from daskhpc import _workflows
from daskhpc._ticker import start_ticker, stop_ticker

_MESSAGE = "compiling kernels (first run only) ..."

#: ``(workflow, command)`` prepared in this process already: the next run of the process
#: skips even the stamp's file reads (0.5-4 ms a run)
_PREPARED: set = set()


@dataclass(frozen=True)
class KernelsReport:
    """What :func:`prepare_kernels` did.

    Attributes
    ----------
    workflows : tuple of str
    compiled : int
        Kernel specialisations compiled (0: every one came from numba's cache).
    seconds : float
        Wall time of the warm-up.
    """

    workflows: tuple
    compiled: int
    seconds: float

    @property
    def cached(self) -> bool:
        """Whether every kernel was already in numba's cache."""
        return self.compiled == 0


def warmup_of(workflow: str, command: str = "run") -> list:
    """The warm-up functions workflow ``workflow`` declares for ``command`` (``run``,
    ``demo``: ``WARMUP``, ``plan``: ``WARMUP_PLAN``), in call order."""
    module = _kernels_module(workflow)
    if module is None:
        return []
    return _workflows.load(workflow).warmup(command)


def _kernels_module(workflow: str):
    """The registered workflow's kernels module (None: unregistered, or without kernels)."""
    if workflow not in _workflows.available():
        return None
    return _workflows.load(workflow).kernels_module()


def prepare_kernels(*workflows: str, command: str = "run", file=None) -> KernelsReport:
    """Compile (or load from numba's cache) the kernels of ``workflows`` in this process.

    Call it before the cluster starts: its workers then load the kernels instead of each
    compiling them. A workflow warmed up before, with nothing changed since, is skipped.

    Parameters
    ----------
    *workflows : str
        Registered workflow names (``daskhpc demo``: all of them).
    command : {"run", "demo", "plan"}
        ``plan`` compiles only what a plan uses (``WARMUP_PLAN``).
    file : text stream, optional
        Where the "compiling kernels (first run only) ... done in 12.3 s" line goes (never
        stdout, which may carry JSON); None: silent. Returns a :class:`KernelsReport`.
    """
    todo = [(w, _stamp_path(w, command)) for w in workflows if (w, command) not in _PREPARED]
    todo = [(w, path) for w, path in todo if not _fresh(path)]
    announce = _announcer(file, ", ".join(workflows))
    t0 = time.perf_counter()
    try:
        if len(todo) > 1 and usable_cores() > 1:
            _warm_up_side_by_side([w for w, _ in todo], command, announce)
            todo = [(w, path) for w, path in todo if not _fresh(path)]   # what failed there
        for w, path in todo:
            _warm_up(w, command, path, announce)
        _PREPARED.update((w, command) for w in workflows)
    finally:
        if announce.stage is not None:          # the ticking line (a terminal)
            stop_ticker(announce.stage)
    seconds = time.perf_counter() - t0
    if announce.compiled and file is not None:
        if announce.stage is not None:
            print(f"\r{announce.label}: {_MESSAGE} done in {seconds:.1f} s\033[K", file=file,
                  flush=True)
        else:
            print(f" done in {seconds:.1f} s", file=file, flush=True)
    return KernelsReport(tuple(workflows), announce.compiled, seconds)


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask on Linux)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:     # not Linux
        return os.cpu_count() or 1


def _warm_up_side_by_side(workflows: list, command: str, announce) -> None:
    """The warm-ups of ``workflows`` in one spawned process per core, into the numba cache this
    process shares; one that failed there (no fresh stamp) runs here next, where its error shows."""
    import concurrent.futures as cf
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    started = ctx.Event()
    try:
        with cf.ProcessPoolExecutor(min(len(workflows), usable_cores()), mp_context=ctx,
                                    initializer=_child_init, initargs=(started,)) as pool:
            pending = {pool.submit(_warm_up_child, w, command) for w in workflows}
            while pending:
                done, pending = cf.wait(pending, timeout=0.2)
                if started.is_set():
                    announce.begin()
                for f in done:
                    announce.compiled += f.result()
    except Exception:  # noqa: BLE001 - a broken pool (no /dev/shm, killed child): serial
        pass


_STARTED = None


def _child_init(started) -> None:
    global _STARTED
    _STARTED = started


def _warm_up_child(workflow: str, command: str) -> int:
    """One workflow's warm-up in a side-by-side process; its first compile is told the parent."""
    announce = _announcer(None, workflow, on_first=_STARTED.set)
    _warm_up(workflow, command, _stamp_path(workflow, command), announce)
    return announce.compiled


def _warm_up(workflow: str, command: str, path, announce) -> None:
    """Run the workflow's warm-up functions with ``announce`` listening to numba's
    compilations, then write the stamp at ``path``."""
    from numba.core import event

    before = _overloads()
    with event.install_listener("numba:compile", announce):
        for fn in warmup_of(workflow, command):
            fn()
    _write_stamp(path, before)


# The stamp, beside numba's cache of the kernels module: the source files of every kernel
# the warm-up compiled or loaded with their size and mtime (numba's cache index keys),
# numba's version and the CPU. While they match, the warm-up (~0.5-3 s on a warm cache) is
# skipped; anything unexpected means "not fresh", and the warm-up runs.

def _stamp_path(workflow: str, command: str):
    from numba.core.dispatcher import Dispatcher

    module = _kernels_module(workflow)
    caches = [getattr(obj._cache, "_cache_path", None) for obj in vars(module).values()
              if isinstance(obj, Dispatcher)] if module else []
    where = next((c for c in caches if isinstance(c, str)), None)
    kind = "plan" if command == "plan" else "run"
    name = f"daskhpc-warmup-{workflow}-{kind}.json"
    return pathlib.Path(where) / name if where else None


def _overloads() -> dict:
    """Compiled/loaded specialisations of every daskhpc kernel in this process."""
    from numba.core.dispatcher import Dispatcher

    out = {}
    for name, mod in list(sys.modules.items()):
        if name.startswith("daskhpc.") and mod is not None:
            for obj in list(vars(mod).values()):
                if isinstance(obj, Dispatcher):
                    out[obj] = len(obj.overloads)
    return out


def _files_state(files) -> dict:
    state = {}
    for f in sorted(files):
        st = os.stat(f)
        state[f] = [st.st_size, st.st_mtime_ns]
    return state


def _machine() -> list:
    import numba
    from numba.core.registry import cpu_target

    magic = cpu_target.target_context.codegen().magic_tuple()
    return [numba.__version__, sys.version, repr(magic)]


def _fresh(path) -> bool:
    try:
        stamp = json.loads(path.read_text())
        return stamp["machine"] == _machine() and stamp["files"] == _files_state(stamp["files"])
    except Exception:  # noqa: BLE001 - missing, unreadable, a source file gone: warm up
        return False


def _write_stamp(path, before: dict) -> None:
    if path is None:
        return
    used = {d.py_func.__code__.co_filename for d in _overloads()
            if len(d.overloads) > before.get(d, 0)}
    if not used:        # all were in memory already: nothing to vouch for
        return
    try:
        path.write_text(json.dumps({"machine": _machine(), "files": _files_state(used)}))
    except OSError:
        pass        # no writable cache: the next run warms up again


def _announcer(file, label: str, on_first=None):
    """A ``numba:compile`` listener that counts the compiles of cached kernels and writes the
    message at the first (``begin``; ``on_first`` too). Uncached kernels (numba's own helpers)
    compile in every process: not "first run only", not counted."""
    from numba.core import event
    from numba.core.caching import NullCache

    from daskhpc._config import progress_setting

    class Announce(event.Listener):
        def __init__(self):
            self.depth = self.compiled = 0
            self.begun = False
            self.stack = []
            self.stage = None               # the ticker process, on a terminal
            self.label = label

        def on_start(self, ev):
            disp = ev.data.get("dispatcher")
            cached = not isinstance(getattr(disp, "_cache", None), (NullCache, type(None)))
            counted = cached and self.depth == 0      # a cached kernel's callees: inside it
            self.stack.append(counted)
            if counted:
                self.begin()
                self.compiled += 1
                self.depth += 1

        def begin(self):
            """The message, at the first compile."""
            if self.begun:
                return
            self.begun = True
            if on_first is not None:
                on_first()
            if file is not None:
                print(f"{label}: {_MESSAGE}", end="", file=file, flush=True)
                # seconds ticking on a terminal, not 40 s of silence (demo)
                if progress_setting() is not False and getattr(file, "isatty", bool)():
                    self.stage = start_ticker(f"{label}: {_MESSAGE[:-4]}", file)

        def on_end(self, ev):
            if self.stack.pop():
                self.depth -= 1

    return Announce()
