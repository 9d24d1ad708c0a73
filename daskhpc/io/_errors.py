"""The one exception every reader raises for a file it cannot read correctly."""

from __future__ import annotations

from daskhpc.errors import InputError


class ReadError(InputError):
    """A file could not be read; names the file, the line and the problem.

    A :class:`daskhpc.errors.InputError` (a ``ValueError``); ``str(e)`` is
    ``"path:line: problem"`` (``"path: problem"`` without a line), as compilers write it,
    so editors and terminals jump to the line.

    Parameters
    ----------
    path : str
    line : int or None
        1-based line number in the (decompressed) text, or None.
    problem : str

    Examples
    --------
    >>> e = ReadError("ratings.csv", 17, "expected 3 or 4 columns, found 2")
    >>> str(e)
    'ratings.csv:17: expected 3 or 4 columns, found 2'
    >>> str(ReadError("a.mtx.gz", None, "truncated gzip"))
    'a.mtx.gz: truncated gzip'
    """

    def __init__(self, path, line: int | None, problem: str):
        self.path = str(path)
        self.line = None if line is None else int(line)
        self.problem = problem
        super().__init__(str(self))

    def __str__(self) -> str:
        if self.line is None:
            return f"{self.path}: {self.problem}"
        return f"{self.path}:{self.line}: {self.problem}"

    def __reduce__(self):
        # the three attributes across pickling (dask ships errors back from workers):
        # the default would call __init__ with one argument
        return (type(self), (self.path, self.line, self.problem))
