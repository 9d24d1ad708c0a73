"""Progress of a long run (batches, epochs) in a terminal, a job log or a notebook."""

from __future__ import annotations

import html
import sys
import threading
import time

from daskhpc import _config
from daskhpc._notebook import in_kernel

BAR = 20
#: Seconds between two updates of a notebook's display.
NOTEBOOK_S = 0.25
#: Longest gap between two lines of a job log while no step completes.
QUIET_MAX_S = 60.0


class progress:  # noqa: N801 - used like a function: `with progress(futs, label):`
    """Show how many of ``futures`` are done while the block runs.

    In a notebook: one output updated in place (an HTML bar); on a terminal: one line
    redrawn in place, ``spgemm batches [#########-----------]  9/20  3.1 s``; in a batch
    job's log (``python -m daskhpc.mpi``, or ``daskhpc.runtime.progress: true``): a line
    every ``interval`` seconds and a last one with the total time; elsewhere nothing.

    Parameters
    ----------
    futures : list of distributed.Future, or int
        One per step (batch, epoch), or the number of steps, counted by :meth:`advance`.
    label : str
        What the steps are, e.g. ``"spgemm batches"``.
    mode : {"auto", "on", "notebook", "bar", "lines", "off"}, optional
        Default from ``daskhpc.runtime.progress``: unset means ``auto`` (a display in a
        notebook, a bar on a TTY, else nothing), ``True`` means ``on`` (``auto`` but lines
        instead of nothing), ``False`` means ``off``.
    file : file object, default sys.stderr
    interval : float, default 2.0
        Seconds between two lines in ``lines`` mode; each line that repeats the last count
        doubles the gap, up to :data:`QUIET_MAX_S`.

    Examples
    --------
    >>> with progress(futs, "steps"):                   # doctest: +SKIP
    ...     results = client.gather(futs)
    steps [####################] 10/10  2.0 s
    >>> with progress(20, "cpals iterations") as bar:   # doctest: +SKIP
    ...     bar.advance()
    """

    def __init__(self, futures, label: str, *, mode: str | None = None, file=None,
                 interval: float = 2.0):
        counted = isinstance(futures, int)
        self.futures = [] if counted else list(futures)
        self.label = label
        self.file = file if file is not None else sys.stderr
        self.mode = _resolve(mode, self.file)
        self.interval = interval
        self.total = int(futures) if counted else len(self.futures)
        self.done = 0
        self._lock = threading.Lock()
        self._t0 = 0.0
        self._last = 0.0
        self._closing = False
        self._display = None           # notebook mode: the cell's display handle
        self._gap = interval           # lines mode: seconds until the next line is due
        self._said = -1                # lines mode: the count of the last line
        self._stop = threading.Event()
        self._clock = None             # lines mode: the thread that keeps the lines coming

    def __enter__(self) -> progress:
        self._t0 = time.perf_counter()
        if self.mode == "off" or not self.total:
            return self
        if self.mode == "notebook":
            from IPython.display import display

            self._display = display(self._bundle(0, 0.0), raw=True, display_id=True)
        for fut in self.futures:
            fut.add_done_callback(self._one_done)
        if self.mode == "lines" and self.interval > 0:
            # a log shows every `interval` that the run goes on, steps done or not
            self._last = self._t0
            self._clock = threading.Thread(target=self._tick, name="daskhpc-progress",
                                           daemon=True)
            self._clock.start()
        return self

    def __exit__(self, exc_type, *exc) -> None:
        self._stop.set()
        if self._clock is not None:
            self._clock.join()
        if self.mode in ("bar", "lines", "notebook") and self.total:
            with self._lock:
                self._closing = True   # end the bar's line even if the run failed
                self._print(final=exc_type is None)

    def advance(self, n: int = 1) -> None:
        """``n`` more steps are done (when counting without futures)."""
        if self.mode in ("bar", "lines", "notebook"):
            for _ in range(n):
                self._one_done(None)

    def _one_done(self, _future) -> None:
        # runs on a thread of the client: one step finished
        with self._lock:
            self.done += 1
            now = time.perf_counter()
            # the first step at once, the last by __exit__; then at most every _every()
            if self.mode == "bar" or ((now - self._last >= self._every() or self._said <= 0)
                                      and self.done < self.total):
                self._print()
                self._last = now

    def _every(self) -> float:
        return NOTEBOOK_S if self.mode == "notebook" else self.interval

    def _tick(self) -> None:
        """Lines mode: a line whenever one is due, whether a step completed or not."""
        while not self._stop.wait(self.interval / 4):
            with self._lock:
                now = time.perf_counter()
                gap = self.interval if self.done != self._said else self._gap
                if self._closing or now - self._last < gap:
                    continue
                self._print()
                self._last = now

    def _bundle(self, done: int, elapsed: float, final: bool = False) -> dict:
        """The notebook display: an HTML bar and the text."""
        text = f"{self.label}: {done}/{self.total} {'done in' if final else 'after'} " \
               f"{elapsed:.1f} s"
        return {"text/plain": text,
                "text/html": f'<progress value="{done}" max="{self.total}" '
                             f'style="width: 20em"></progress> '
                             f"<code>{html.escape(text)}</code>"}

    def _print(self, final: bool = False) -> None:
        elapsed = time.perf_counter() - self._t0
        done = self.total if final else min(self.done, self.total)
        width = len(str(self.total))
        if self.mode == "notebook":
            if self._display is not None:
                self._display.update(self._bundle(done, elapsed, final), raw=True)
            return
        if self.mode == "bar":
            fill = round(BAR * done / self.total)
            text = (f"\r{self.label} [{'#' * fill}{'-' * (BAR - fill)}] "
                    f"{done:>{width}}/{self.total}  {elapsed:.1f} s")
            self.file.write(text + ("\n" if final or self._closing else ""))
        else:
            state = "done in" if final else "after"
            self.file.write(f"{self.label}: {done}/{self.total} {state} {elapsed:.1f} s\n")
            # the same count again: the next line waits twice as long
            self._gap = min(2 * self._gap, max(QUIET_MAX_S, self.interval)) \
                if done == self._said else self.interval
            self._said = done
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
    if getattr(file, "isatty", lambda: False)():
        return "bar"
    if in_kernel() and file is sys.stderr:
        return "notebook"      # the kernel's stderr: the cell's output
    return "lines" if setting else "off"
