"""Jupyter: whether this process is a notebook's kernel, and how a bokeh figure shows
itself as a cell's value there. IPython and bokeh are imported only when asked for."""

from __future__ import annotations

import sys
import types


def in_kernel() -> bool:
    """True inside a Jupyter kernel: its shell has a ``kernel`` (a terminal IPython's has none)."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    shell = ipython.get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def displayable(fig):
    """``fig`` (a bokeh figure), drawn when it is a notebook cell's value as ``bokeh.io.show``
    draws it (BokehJS inline, once per kernel: offline and in exported HTML), instead of
    bokeh's list of properties; outside a kernel its ``repr``. It stays a bokeh figure."""
    # bokeh lets private attributes through its property checks: the hook is this
    # figure's own (the class's figures keep bokeh's behaviour)
    fig._ipython_display_ = types.MethodType(_show, fig)
    return fig


def _show(fig) -> None:
    if not in_kernel():
        print(repr(fig))
        return
    from bokeh.io import output_notebook, show
    from bokeh.io.state import curstate
    from bokeh.resources import INLINE

    if not curstate().notebook:
        # inline, not bokeh's default CDN: a notebook opened or exported offline (a
        # cluster's login node, nbconvert's HTML) would otherwise show empty plots
        output_notebook(INLINE, hide_banner=True)
    show(fig)
