"""What the command line shows while it works (:class:`stage`: a ticking line on a terminal,
start and end lines in a log, nothing when piped), and :func:`json_on_stdout`, which keeps
stdout for the report alone under ``--json -``."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time

from daskhpc._ticker import start_ticker, stop_ticker


def progress_mode(file=None) -> str:
    """``"tick"`` (a terminal), ``"lines"`` (``daskhpc.runtime.progress: true`` off a
    terminal) or ``"off"`` (piped, or the setting is false)."""
    from daskhpc import _config

    file = file if file is not None else sys.stderr
    setting = _config.progress_setting()
    if setting is False:
        return "off"
    if getattr(file, "isatty", lambda: False)():
        return "tick"
    return "lines" if setting else "off"


class stage:  # noqa: N801 - used like a function: `with stage("partitioning"):`
    """Say on stderr that the step ``label`` runs, and how long it took (``mode``: ``tick``,
    ``lines`` or ``off``; default :func:`progress_mode`)."""

    def __init__(self, label: str, *, mode: str | None = None, file=None):
        self.label = label
        self.file = file if file is not None else sys.stderr
        self.mode = mode or progress_mode(self.file)
        self._stop = threading.Event()
        self._thread = None
        self._ticker = None
        self._lock = threading.Lock()
        self._t0 = 0.0

    def __enter__(self) -> stage:
        self._t0 = time.perf_counter()
        if self.mode == "tick":
            self._write(f"\r{self.label} ...")
            self._ticker = start_ticker(self.label, self.file)
            if self._ticker is None:        # no process to tick from: a thread then
                self._thread = threading.Thread(target=self._tick, daemon=True,
                                                name="daskhpc-stage")
                self._thread.start()
        elif self.mode == "lines":
            self._write(f"{self.label} ...\n")
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if self.mode == "off":
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._ticker is not None:
            stop_ticker(self._ticker)
        took = time.perf_counter() - self._t0
        end = "done" if exc_type is None else "stopped"
        if self.mode == "tick":     # \033[K: clear what the ticking line left behind
            self._write(f"\r{self.label} ... {end} in {took:.1f} s\033[K\n")
        else:
            self._write(f"{self.label} ... {end} in {took:.1f} s\n")

    def _tick(self) -> None:
        while not self._stop.wait(1.0):
            self._write(f"\r{self.label} ... {time.perf_counter() - self._t0:.0f} s")

    def _write(self, text: str) -> None:
        with self._lock:
            self.file.write(text)
            self.file.flush()


@contextlib.contextmanager
def json_on_stdout(enabled: bool):
    """While the block runs, stdout (Python's and file descriptor 1) goes to stderr."""
    if not enabled:
        yield
        return
    real = sys.stdout
    real.flush()
    saved_fd = None
    try:
        fd, err_fd = real.fileno(), sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):   # pytest's capture, a StringIO
        fd = err_fd = None
    if fd is not None:
        # A C++ partitioner or a worker started now writes to fd 1, not sys.stdout.
        saved_fd = os.dup(fd)
        os.dup2(err_fd, fd)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stderr.flush()
        if saved_fd is not None:
            os.dup2(saved_fd, fd)
            os.close(saved_fd)
