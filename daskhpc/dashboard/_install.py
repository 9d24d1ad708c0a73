"""Put the daskhpc pages on a scheduler's dashboard server: :func:`install` before a scheduler
is built (it then serves and lists them), :func:`serve` on one already running (a second
Bokeh application, not listed for JupyterLab; it also adds the "Daskhpc" navigation link, to
the list distributed's ``template_variables`` memoises: if that changes, only the link goes)."""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)
NAV_PAGE = "daskhpc"


def install() -> None:
    """Make every scheduler started later in this process serve the daskhpc pages.

    Idempotent. Must run before the scheduler is built.

    Examples
    --------
    >>> from daskhpc.dashboard import install
    >>> install()
    >>> from daskhpc._dask_internals import applications
    >>> "/individual-daskhpc-comm" in applications
    True
    """
    try:
        from daskhpc._dask_internals import applications
        from daskhpc.dashboard._pages import pages
    except ImportError as e:   # no bokeh: the scheduler must still start
        logger.warning("daskhpc dashboard pages unavailable: %s", e)
        return

    for url, fn in pages().items():
        applications.setdefault(url, fn)


def served(scheduler) -> bool:
    """Does this scheduler's HTTP server already serve the daskhpc pages?"""
    from bokeh.server.tornado import BokehTornado

    app = getattr(scheduler, "http_application", None)
    return any(isinstance(a, BokehTornado) and "/daskhpc" in a.app_paths
               for a in getattr(app, "applications", ()))


def serve(scheduler) -> None:
    """Serve the pages on a running scheduler (if it does not yet) and link them."""
    if getattr(scheduler, "http_application", None) is None:
        return   # started with dashboard=False
    from daskhpc._dask_internals import template_variables

    variables = template_variables(scheduler)
    if not served(scheduler):
        from tornado.ioloop import IOLoop

        from daskhpc._dask_internals import BokehApplication
        from daskhpc.dashboard._pages import pages

        # The scheduler does not keep its http_prefix: pages added late live at
        # the root (the default, and what dask-mpi and LocalCluster use).
        app = BokehApplication(pages(), scheduler, prefix="", template_variables=variables)
        scheduler.http_application.add_application(app)
        app.initialize(IOLoop.current())
        app.start()
    try:
        if NAV_PAGE not in variables["pages"]:
            variables["pages"].append(NAV_PAGE)
    except (KeyError, TypeError, AttributeError):   # internals changed: no link, pages still there
        logger.debug("could not add the daskhpc link to the dashboard navigation")
