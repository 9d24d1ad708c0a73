"""Dask's messages that mean nothing to a user stay off stderr."""

from __future__ import annotations

import logging
import subprocess
import sys

SCRIPT = r"""
import logging, sys
import distributed                                   # sets up its stderr handler
from daskhpc.runtime._logs import quiet_dask_noise
quiet_dask_noise()
logging.getLogger("distributed.nanny").warning(
    "Worker process still alive after 4.0 seconds, killing")
try:
    assert False, "the document is gone"
except AssertionError:
    logging.getLogger("bokeh.server.views.ws").error("Handler threw", exc_info=True)
try:
    future
except NameError:
    logging.getLogger("tornado.application").error("Exception in callback", exc_info=True)
logging.getLogger("distributed.scheduler").warning("a real warning stays")
"""


def _stderr(*args, env=None):
    import os

    return subprocess.run([sys.executable, "-c", SCRIPT, *args], capture_output=True,
                          text=True, env={**os.environ, **(env or {})}).stderr


def test_known_dask_noise_is_kept_off_stderr():
    err = _stderr()
    assert "a real warning stays" in err
    assert "still alive" not in err and "Traceback" not in err, err


def test_debug_shows_it():
    err = _stderr("--debug")
    assert "still alive" in err and "AssertionError" in err and "NameError" in err, err


def test_is_noise_leaves_other_records_alone():
    from daskhpc.runtime._logs import is_noise

    rec = logging.LogRecord("distributed.worker", logging.WARNING, __file__, 1,
                            "Worker process still alive", None, None)
    assert not is_noise(rec)          # only the nanny's message, from the nanny
    try:
        raise ValueError("x")
    except ValueError:
        bad = logging.LogRecord("bokeh.server", logging.ERROR, __file__, 1, "m", None,
                                sys.exc_info())
    assert not is_noise(bad)


def _record(name, msg, exc):
    try:
        raise exc
    except type(exc):
        return logging.LogRecord(name, logging.ERROR, __file__, 1, msg, None, sys.exc_info())


def test_a_heartbeat_into_a_closing_scheduler_is_noise():
    from distributed.comm.core import CommClosedError

    from daskhpc.runtime._logs import is_noise

    msg = "Failed to communicate with scheduler during heartbeat."
    assert is_noise(_record("distributed.worker", msg, CommClosedError("Stream is closed")))
    # the scheduler not answering in time, another message, another logger: real news
    assert not is_noise(_record("distributed.worker", msg, TimeoutError("no answer")))
    assert not is_noise(_record("distributed.worker", "Unexpected exception during heartbeat",
                                CommClosedError("x")))
    assert not is_noise(_record("distributed.client", msg, CommClosedError("x")))


def _worker_filters(dask_worker=None):
    from daskhpc.runtime._logs import _QUIET

    return [any(f is _QUIET for f in h.filters)
            for h in logging.getLogger("distributed").handlers]


def test_a_local_clusters_workers_filter_the_noise():
    from daskhpc.runtime import connect

    with connect(n_workers=1, dashboard_address=None) as client:
        [got] = client.run(_worker_filters).values()
    assert got and all(got), got          # every handler of the worker process filters
