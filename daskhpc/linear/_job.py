"""The frame's Job of a linear-classifier run: epochs are its units."""

from __future__ import annotations

import functools

from ._program import assemble, program, row, statics, warm_up
from ._setup import Setup
from ._update import stop_rule


def linear_job(s: Setup, fingerprint: dict, *, with_statics: bool = True,
               in_loop: bool = True, exchange: str = "direct"):
    """The Job of the run prepared in ``s`` (``with_statics=False``: already on the workers)."""
    from daskhpc.runtime import Job

    return Job("linear", s.nparts, s.options.epochs, row=functools.partial(row, s),
               fingerprint=fingerprint, program=functools.partial(program, s),
               statics=statics(s) if with_statics else None,
               assemble=functools.partial(assemble, s), warm_up=warm_up,
               unit_name="epochs", in_loop=in_loop, exchange=exchange,
               stop=stop_rule(s.options))
