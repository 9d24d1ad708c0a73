"""The package's version, in a module of its own: the modules that write it into reports
and saved results import it from here, not from the package root (which only hands
names on)."""

__version__ = "0.1.0"
