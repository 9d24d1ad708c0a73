"""A ticking ``label ... 12 s`` line written by a small process of its own, for
:class:`daskhpc._terminal.stage` and the first-run kernel compile on a terminal."""

from __future__ import annotations

import subprocess
import sys

#: The ticking line's writer, a process of its own: a thread would need the GIL, which a
#: partitioner's native call (Mt-KaHyPar, KaHyPar) holds for its whole run, so the
#: seconds froze and then jumped (1 s to 42 s on a9a). It stops at EOF on its stdin,
#: which also comes when this process dies.
_TICKER = """
import os, select, sys, time
fd, label, t0 = int(sys.argv[1]), sys.argv[2], time.monotonic()
while not select.select([0], [], [], 1.0)[0]:
    os.write(fd, f"\\r{label} ... {time.monotonic() - t0:.0f} s".encode())
"""


def start_ticker(label: str, file):
    """Start the ticker process writing to ``file``'s descriptor, or None."""
    try:
        fd = file.fileno()
        # its own session: a Ctrl-C at the terminal does not reach it (no traceback)
        return subprocess.Popen([sys.executable, "-I", "-S", "-c", _TICKER, str(fd), label],
                                stdin=subprocess.PIPE, pass_fds=(fd,),
                                start_new_session=True)
    except (OSError, ValueError, AttributeError):
        return None


def stop_ticker(proc) -> None:
    """End the ticker process (its last line stays; the caller writes over it)."""
    try:
        proc.stdin.close()                    # EOF: it ends within its next select
        proc.wait(timeout=10)
    except Exception:  # noqa: BLE001 - never let the display fail the work
        proc.kill()
        proc.wait()
