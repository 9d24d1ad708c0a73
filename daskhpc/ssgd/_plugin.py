"""The stratum-order scheduler plugin: :class:`StratumPolicy` on the kit's holding engine.

A step key ``("ssgd-step-<token>", part(s), epoch, subepoch, block(s), i)`` holds the
units of every part it sweeps; a unit whose predecessors are neither done nor upstream
is parked until they finish (:class:`daskhpc.runtime.HoldingPlugin`). Its rows are the
dashboard's strata timeline."""

from __future__ import annotations

from daskhpc.runtime import HoldingPlugin, install, take

from ._policy import StratumPolicy

NAME = "daskhpc-stratum-order"
PREFIX = "ssgd-step-"


class StratumOrderPlugin(HoldingPlugin):
    """Hold SSGD steps that would break the stratum order; record the timeline."""

    name = NAME

    def __init__(self, prefix: str = PREFIX):
        super().__init__()
        self.prefix = prefix
        self.policy = StratumPolicy()

    @property
    def timeline(self) -> list[dict]:
        return self.rows

    def units_of(self, key):
        if not (isinstance(key, tuple) and len(key) == 6 and isinstance(key[0], str)
                and key[0].startswith(self.prefix)):
            return None
        return [(key[0], p, (key[2], key[3]), b) for p, b in zip(_labels(key[1]), _labels(key[4]))]

    def add(self, scheduler, units_by_key) -> None:
        self.policy.add(u for units in units_by_key.values() for u in units)

    def hold(self, scheduler, key, units) -> list:
        deps = {d.key for d in scheduler.tasks[key].dependencies}
        deps |= {dd.key for d in scheduler.tasks[key].dependencies for dd in d.dependencies}
        held = [u for u in units if any(not self.policy.done(p) and
                                        not deps & set(self._keys.get(p, ()))
                                        for p in self.policy.predecessors(u))]
        for u in held:
            self.policy.hold(u)
        return held

    def finish(self, key, units, state, now) -> list:
        return [f for u in units for f in self.policy.finish(u)]

    def describe(self, key, u) -> dict:
        return {"run": u[0], "part": u[1], "epoch": u[2][0], "subepoch": u[2][1], "T": u[2],
                "block": u[3], "task": key[5]}

    def forget(self, run) -> None:
        super().forget(run)
        self.policy.forget(run)


def _labels(x) -> list[int]:
    return [x] if isinstance(x, int) else [int(t) for t in str(x).split("+")]


def register(client) -> None:
    """Register the plugin on the client's scheduler (once; later calls are no-ops)."""
    install(client, StratumOrderPlugin)


def installed(client) -> bool:
    """Whether the scheduler has the plugin (it then records every SSGD step group)."""
    def has(dask_scheduler):
        return NAME in dask_scheduler.plugins

    return bool(client.run_on_scheduler(has))


def fetch_timeline(client, run: str) -> list[dict]:
    """The recorded steps of ``run`` (and forget them on the scheduler)."""
    return take(client, NAME, run)
