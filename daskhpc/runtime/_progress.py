"""Progress of a long run (batches, epochs) in a terminal, a job log or a notebook.

A workflow wraps the wait for its per-step futures::

    with progress(batch_futures, "spgemm batches"):
        client.gather(batch_futures)

or, when steps are counted another way (the frame counts completed units from their
reports), gives the total and advances it::

    with progress(20, "cpals iterations") as bar:
        ...; bar.advance()

and, depending on where it runs, the user sees

- in a Jupyter notebook: Dask's progress widget (``distributed.progress``);
- on a terminal (stderr is a TTY): one line redrawn in place,
  ``spgemm batches [#########-----------]  9/20  3.1 s``;
- in a batch job's log (``python -m daskhpc.mpi`` turns this on): a line per
  step at most every few seconds, and a last line with the total time;
- elsewhere (scripts piped to files, tests): nothing.

Setting ``daskhpc.runtime.progress`` (``DASK_DASKHPC__RUNTIME__PROGRESS``) to
``true`` forces lines even without a terminal, ``false`` turns it off.

Examples
--------
>>> from daskhpc.runtime import progress
>>> futs = client.map(slow, range(10))              # doctest: +SKIP
>>> with progress(futs, "steps"):                   # doctest: +SKIP
...     results = client.gather(futs)
steps [####################] 10/10  2.0 s
"""

from __future__ import annotations

import sys
import threading
import time

from daskhpc import _config

__all__ = ["progress"]

BAR = 20


class progress:  # noqa: N801 - used like a function: `with progress(futs, label):`
    """Show how many of ``futures`` are done while the block runs.

    Parameters
    ----------
    futures : list of distributed.Future, or int
        One per step (batch, epoch); completion of each one is a step done. An int is
        the number of steps, counted by :meth:`advance`.
    label : str
        What the steps are, e.g. ``"spgemm batches"``.
    mode : {"auto", "on", "notebook", "bar", "lines", "off"}, optional
        Default from ``daskhpc.runtime.progress``: unset means ``auto`` (the
        widget in a notebook, a bar on a TTY, else nothing), ``True`` means
        ``on`` (``auto`` but lines instead of nothing), ``False`` means ``off``.
    file : file object, default sys.stderr
    interval : float, default 2.0
        Seconds between two lines in ``lines`` mode.

    Examples
    --------
    >>> with progress([], "nothing", mode="off"):
    ...     pass
    """

    def __init__(self, futures, label: str, *, mode: str | None = None, file=None,
                 interval: float = 2.0):
        counted = isinstance(futures, int)
        self.futures = [] if counted else list(futures)
        self.label = label
        self.file = file if file is not None else sys.stderr
        self.mode = _resolve(mode, self.file)
        if counted and self.mode == "notebook":
            self.mode = "bar"          # the widget follows futures only
        self.interval = interval
        self.total = int(futures) if counted else len(self.futures)
        self.done = 0
        self._lock = threading.Lock()
        self._t0 = 0.0
        self._last = 0.0
        self._closing = False

    def __enter__(self) -> progress:
        self._t0 = time.perf_counter()
        if self.mode == "off" or not self.total:
            return self
        if self.mode == "notebook":
            try:
                from distributed import progress as dask_progress

                dask_progress(self.futures, notebook=True, multi=False)
                return self
            except ImportError:   # no ipywidgets: fall back to text
                self.mode = "lines"
        for fut in self.futures:
            fut.add_done_callback(self._one_done)
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if self.mode in ("bar", "lines") and self.total:
            with self._lock:
                self._closing = True   # end the bar's line even if the run failed
                self._print(final=exc_type is None)

    def advance(self, n: int = 1) -> None:
        """``n`` more steps are done (when counting without futures)."""
        if self.mode in ("bar", "lines"):
            for _ in range(n):
                self._one_done(None)

    def _one_done(self, _future) -> None:
        # runs on a thread of the client: one step finished
        with self._lock:
            self.done += 1
            now = time.perf_counter()
            # in a log, the last step is said once, by __exit__ ("done in")
            if self.mode == "bar" or (now - self._last >= self.interval
                                      and self.done < self.total):
                self._print()
                self._last = now

    def _print(self, final: bool = False) -> None:
        elapsed = time.perf_counter() - self._t0
        done = self.total if final else min(self.done, self.total)
        width = len(str(self.total))
        if self.mode == "bar":
            fill = round(BAR * done / self.total)
            text = (f"\r{self.label} [{'#' * fill}{'-' * (BAR - fill)}] "
                    f"{done:>{width}}/{self.total}  {elapsed:.1f} s")
            self.file.write(text + ("\n" if final or self._closing else ""))
        else:
            state = "done in" if final else "after"
            self.file.write(f"{self.label}: {done}/{self.total} {state} {elapsed:.1f} s\n")
        self.file.flush()


def _resolve(mode: str | None, file) -> str:
    if mode is not None:
        if mode not in ("auto", "on", "notebook", "bar", "lines", "off"):
            raise ValueError(f"unknown progress mode {mode!r}")
        if mode not in ("auto", "on"):
            return mode
        setting = True if mode == "on" else None
    else:
        setting = _config.progress_setting()
    if setting is False:
        return "off"
    if _in_notebook():
        return "notebook"
    if getattr(file, "isatty", lambda: False)():
        return "bar"
    return "lines" if setting else "off"


def _in_notebook() -> bool:
    shell = sys.modules.get("IPython")
    if shell is None:
        return False
    ip = shell.get_ipython()
    return ip is not None and type(ip).__name__ == "ZMQInteractiveShell"
