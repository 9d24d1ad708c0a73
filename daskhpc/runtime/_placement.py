"""Which worker owns which part."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from daskhpc.runtime._connect import worker_addresses

if TYPE_CHECKING:
    from distributed import Client


class Placement:
    """A map from part number to worker address: every task of part ``p`` is pinned on
    ``placement.worker(p)``.

    Parameters
    ----------
    nparts : int
        Number of parts, numbered ``0 .. nparts-1``.
    workers : sequence of str
        Worker addresses, in the order parts are dealt out (use
        :func:`~daskhpc.runtime.worker_addresses` for a stable order).
    owners : sequence of str, optional
        The worker of each part. Default round robin: part ``p`` goes to
        ``workers[p % len(workers)]``.

    Examples
    --------
    >>> pl = Placement(5, ["tcp://a:1", "tcp://b:1"])
    >>> pl.worker(3)
    'tcp://b:1'
    >>> pl.parts_of("tcp://a:1")
    [0, 2, 4]
    """

    def __init__(
        self,
        nparts: int,
        workers: Sequence[str],
        owners: Sequence[str] | None = None,
    ):
        workers = tuple(workers)
        if nparts < 0:
            raise ValueError(f"nparts must be >= 0, got {nparts}")
        if not workers:
            raise ValueError("a placement needs at least one worker")
        if len(set(workers)) != len(workers):
            raise ValueError(f"duplicate worker addresses in {workers}")
        if owners is None:
            owners = tuple(workers[p % len(workers)] for p in range(nparts))
        else:
            owners = tuple(owners)
            if len(owners) != nparts:
                raise ValueError(f"{len(owners)} owners given for {nparts} parts")
            unknown = set(owners) - set(workers)
            if unknown:
                raise ValueError(f"owners name workers not in the list: {sorted(unknown)}")
        self._workers = workers
        self._owners = owners

    @classmethod
    def from_client(cls, client: Client, nparts: int) -> Placement:
        """Round-robin placement over the client's workers in stable order."""
        return cls(nparts, worker_addresses(client))

    @property
    def nparts(self) -> int:
        return len(self._owners)

    @property
    def workers(self) -> tuple[str, ...]:
        """All workers of the placement, in dealing order (some may own no part)."""
        return self._workers

    def worker(self, part: int) -> str:
        """Address of the worker that owns ``part``."""
        if not 0 <= part < len(self._owners):
            raise IndexError(f"part {part} not in 0..{len(self._owners) - 1}")
        return self._owners[part]

    def parts_of(self, worker: str) -> list[int]:
        """Parts owned by ``worker``, ascending (empty for an unknown worker)."""
        return [p for p, w in enumerate(self._owners) if w == worker]

    def as_dict(self) -> dict[int, str]:
        """``{part: worker address}`` for every part."""
        return dict(enumerate(self._owners))

    def remap(self, alive_workers: Iterable[str]) -> Placement:
        """Move the parts of lost workers onto the workers still alive.

        Parts whose worker is in ``alive_workers`` stay. Each orphaned part, in ascending order,
        goes to the alive worker owning fewest parts then (ties: the order of
        ``alive_workers``), so new workers fill up first. Returns a placement over
        ``alive_workers``, in the given order.

        Examples
        --------
        >>> pl = Placement(6, ["a", "b", "c"])
        >>> pl.remap(["a", "c"]).as_dict()
        {0: 'a', 1: 'a', 2: 'c', 3: 'a', 4: 'c', 5: 'c'}
        """
        alive = tuple(alive_workers)
        if not alive:
            raise ValueError("no worker left to take the parts")
        rank = {w: i for i, w in enumerate(alive)}
        load = dict.fromkeys(alive, 0)
        for w in self._owners:
            if w in load:
                load[w] += 1
        owners = list(self._owners)
        for p, w in enumerate(owners):
            if w not in load:
                target = min(alive, key=lambda a: (load[a], rank[a]))
                owners[p] = target
                load[target] += 1
        return Placement(len(owners), alive, owners)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Placement):
            return NotImplemented
        return self._workers == other._workers and self._owners == other._owners

    def __hash__(self) -> int:
        return hash((self._workers, self._owners))

    def __dask_tokenize__(self) -> tuple:
        # Plain tuples of str tokenize the same in every process and session.
        return ("daskhpc.runtime.Placement", self._workers, self._owners)

    def __repr__(self) -> str:
        shown = ", ".join(f"{w!r}: {self.parts_of(w)}" for w in self._workers[:4])
        more = ", ..." if len(self._workers) > 4 else ""
        return (
            f"Placement({self.nparts} parts on {len(self._workers)} workers: "
            f"{shown}{more})"
        )
