"""Jupyter: whether this process is a notebook's kernel, and how a bokeh figure shows
itself as a cell's value there.

No dask here; IPython and bokeh are imported only when a notebook asks for them.

Examples
--------
>>> in_kernel()          # a script, a terminal, pytest: not a notebook
False
"""

from __future__ import annotations

import sys
import types

__all__ = ["in_kernel", "displayable"]


def in_kernel() -> bool:
    """True inside a Jupyter kernel (ipykernel: JupyterLab, Notebook, VS Code, Colab).

    The shell of a kernel has a ``kernel``; a terminal IPython has none, and a process
    that never imported IPython is not a kernel at all."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    shell = ipython.get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def displayable(fig):
    """``fig`` (a bokeh figure), drawn when it is a notebook cell's value.

    Bokeh's own ``_repr_html_`` lists the figure's properties; this figure instead
    shows itself the way ``bokeh.io.show`` does in a notebook (loading BokehJS into the
    page first, once per kernel, inline: the plot shows offline and in an exported HTML).
    Outside a kernel it prints its usual ``repr``. It stays a bokeh figure: ``show``,
    ``save`` and layouts take it as before.

    Examples
    --------
    >>> from bokeh.plotting import figure
    >>> fig = displayable(figure())
    >>> type(fig).__name__, callable(fig._ipython_display_)
    ('figure', True)
    """
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
