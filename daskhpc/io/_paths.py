"""Input paths as a user types them: a quoted shell pattern is expanded here."""

from __future__ import annotations

import glob
import os

from daskhpc.errors import InputError

#: the characters that make a path a pattern (``glob``'s own)
_MAGIC = frozenset("*?[")


def expand_patterns(paths) -> list:
    """``paths`` with every shell pattern replaced by the files it matches, sorted.

    A path that exists as written is kept as written (a file may be named ``a[1].csv``);
    anything that is not a string or a path (a DataFrame, a data set name) is kept; a
    pattern that matches no file is an InputError.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> for name in ("b.parquet", "a.parquet", "c.csv"):
    ...     _ = (d / name).write_text("")
    >>> [os.path.basename(p) for p in expand_patterns([str(d / "*.parquet")])]
    ['a.parquet', 'b.parquet']
    >>> expand_patterns([str(d / "*.pq")])                   # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    daskhpc.errors.InputError: .../*.pq: no file matches this pattern
    """
    out = []
    for p in paths:
        text = os.fspath(p) if isinstance(p, (str, os.PathLike)) else None
        if text is None or os.path.exists(text) or not _MAGIC & set(text):
            out.append(p)
            continue
        found = sorted(glob.glob(text))
        if not found:
            raise InputError(f"{text}: no file matches this pattern")
        out += found
    return out
