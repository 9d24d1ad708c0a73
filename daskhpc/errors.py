"""The error a user can fix: bad input files or options (CLI exit status 2, no traceback)."""


class InputError(ValueError):
    """Bad input or options; the message says what and where (file, line, option)."""
