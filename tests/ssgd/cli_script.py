"""The real ``daskhpc`` console script for the SSGD CLI tests, and a small input."""

from __future__ import annotations

import os
import subprocess
import sys

EXE = os.path.join(os.path.dirname(sys.executable), "daskhpc")

#: A 6 x 4 MatrixMarket matrix whose rows 3 and 5 (1-based) are empty.
EMPTY_ROWS = ("%%MatrixMarket matrix coordinate real general\n6 4 8\n1 1 4\n1 2 3\n2 3 5\n"
              "2 4 1\n4 1 2\n4 3 4\n6 2 5\n6 4 3\n")


def daskhpc(*argv, timeout=300):
    """(exit status, stdout, stderr) of ``daskhpc argv...``."""
    done = subprocess.run([EXE, *map(str, argv)], capture_output=True, text=True,
                          timeout=timeout)
    return done.returncode, done.stdout, done.stderr
