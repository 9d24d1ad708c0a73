"""Part data on the workers: scattered once, scattered again only where parts moved."""

from __future__ import annotations

from daskhpc.runtime._calls import together
from daskhpc.runtime._fault import WorkerLost, lost_in_scatter, release_futures


class PartStore:
    """Named per-part data sets on the workers of a placement.

    A run's static data goes to the worker of its part once and stays across attempts:
    :meth:`move` (after a lost worker) re-sends only the parts whose worker changed, from
    the client's copy (kept until :meth:`release`) or built again (:meth:`put_each`).

    Parameters
    ----------
    client : distributed.Client
    placement : Placement
    run : str
        Run id (the scattered keys' names).
    part_of : callable, optional
        The part a data key belongs to (default: keys are part numbers; SpGEMM keys its
        blocks by grid cell).

    Examples
    --------
    >>> store = PartStore(client, placement, "ab12")                   # doctest: +SKIP
    >>> futs = store.put("static", {p: data[p] for p in range(K)})     # doctest: +SKIP
    >>> moved = store.move(new_placement)                              # doctest: +SKIP
    """

    def __init__(self, client, placement, run: str, part_of=None):
        self.client, self.placement, self.run = client, placement, run
        self.part_of = part_of or int
        self.data: dict[str, dict] = {}       # name -> part -> value (client copy)
        self.futures: dict[str, dict] = {}    # name -> part -> Future
        self.where: dict[str, dict] = {}      # name -> part -> the worker holding it
        self.generation = 0
        self.transient: set[str] = set()      # names an attempt puts anew (not moved)
        self.adopted: set[str] = set()        # names built on the workers (``adopt``)
        self.rebuild: dict = {}               # name -> how to build its parts again
        self.built: dict = {}                 # name -> (parts, build): no client copy

    def put(self, name: str, values: dict, *, transient: bool = False) -> dict:
        """Scatter ``{part: value}`` to the parts' workers; returns ``{part: Future}``.

        Putting a name again replaces its data (new keys). ``transient`` data belongs to one
        attempt: a move drops it instead of sending it again.
        """
        if transient:
            self.transient.add(name)
        self._drop(name)
        self.built.pop(name, None)
        # transient data is never sent again: the client keeps no copy
        self.data[name] = dict.fromkeys(values) if transient else dict(values)
        self._scatter(name, values)
        return self.futures[name]

    def put_each(self, name: str, parts, build, *, transient: bool = False) -> dict:
        """Scatter ``build(part)`` of every part, one at a time, keeping no client copy: a
        move builds the moved parts again, unless ``transient``. Returns ``{part: Future}``."""
        self._drop(name)
        parts = list(parts)
        if transient:
            self.transient.add(name)
            self.built.pop(name, None)
            self.data[name] = dict.fromkeys(parts)
        else:
            self.data.pop(name, None)
            self.built[name] = (parts, build)
        self.futures[name] = {}
        for p in parts:
            self._scatter(name, {p: build(p)})
        return self.futures[name]

    def adopt(self, name: str, futures: dict, rebuild=None) -> dict:
        """Record ``{part: Future}`` that tasks pinned on the parts' workers made (no client copy).

        ``rebuild(parts, placement) -> {part: Future}`` builds moved parts again; without it a
        move of such a part raises :class:`RuntimeError`.
        """
        self._drop(name)
        self.data.pop(name, None)
        self.built.pop(name, None)
        self.adopted.add(name)
        if rebuild is not None:
            self.rebuild[name] = rebuild
        self.futures[name] = dict(futures)
        self.where[name] = {p: self.placement.worker(self.part_of(p)) for p in futures}
        return self.futures[name]

    def __getitem__(self, name: str) -> dict:
        return self.futures[name]

    def get(self, name: str):
        return self.futures.get(name)

    def _drop(self, name: str) -> None:
        """Release data set ``name``'s futures and its records."""
        release_futures(self.futures.pop(name, {}).values())
        self.where.pop(name, None)

    def _scatter(self, name: str, values: dict) -> None:
        """Send ``values`` to their parts' workers, every worker at once; a part's records
        change only once its data is there, so a scatter a lost worker stops half way
        (WorkerLost) leaves them true."""
        self.generation += 1
        by_worker: dict[str, dict] = {}
        for p, v in values.items():
            key = f"daskhpc-{name}-{self.run}-{self.generation}-{_label(p)}"
            by_worker.setdefault(self.placement.worker(self.part_of(p)), {})[key] = (p, v)
        coros = [self.client.scatter({k: v for k, (_, v) in items.items()}, workers=[w],
                                     broadcast=False, hash=False, asynchronous=True)
                 for w, items in by_worker.items()]
        got = self.client.sync(together, coros) if coros else []
        futures = self.futures.setdefault(name, {})
        where = self.where.setdefault(name, {})
        lost, error = set(), None
        for (w, items), sent in zip(by_worker.items(), got):
            if isinstance(sent, BaseException):
                if lost_in_scatter(sent, w):
                    lost.add(w)
                else:
                    error = error or sent
                continue
            for k, (p, _) in items.items():
                old, futures[p], where[p] = futures.get(p), sent[k], w
                if old is not None:      # its data died with its worker, or moves now
                    release_futures([old])
        if error is not None:
            raise error
        if lost:
            raise WorkerLost(lost)

    def move(self, placement) -> list:
        """Adopt ``placement``; scatter again the data of parts not on their worker.

        Returns the parts that moved. A worker lost meanwhile raises :class:`WorkerLost`; a
        ``move`` to the next placement then sends what is still not in place.
        """
        self.placement = placement
        moved_all = set()
        for name in [n for n in self.data if n in self.transient]:
            self._drop(name)
            del self.data[name]
        for name in self.adopted:
            lost = [p for p, w in self.where.get(name, {}).items()
                    if placement.worker(self.part_of(p)) != w]
            if lost and name in self.rebuild:
                self._rebuilt(name, lost)
                moved_all.update(lost)
            elif lost:
                raise RuntimeError(
                    f"part data {name!r} of part {_label(lost[0])} was built on its worker "
                    "from a Dask collection (or futures) and died with it (the client holds "
                    "no copy to send again); run again")
        for name, values in self.data.items():
            where = self.where.get(name, {})
            moved = [p for p in values if placement.worker(self.part_of(p)) != where.get(p)]
            if not moved:
                continue
            self._scatter(name, {p: values[p] for p in moved})
            moved_all.update(moved)
        for name, (parts, build) in self.built.items():
            where = self.where.get(name, {})
            for p in parts:
                if placement.worker(self.part_of(p)) != where.get(p):
                    self._scatter(name, {p: build(p)})
                    moved_all.add(p)
        return sorted(moved_all, key=_label)

    def _rebuilt(self, name: str, parts: list) -> None:
        """Build adopted ``parts`` again on their workers; their records change once all are
        there."""
        from daskhpc.runtime._fault import WorkerWatch, gather_watching

        new = self.rebuild[name](list(parts), self.placement)
        workers = {self.placement.worker(self.part_of(p)) for p in parts}
        try:
            with WorkerWatch(self.client, workers) as watch:
                gather_watching(self.client, [new[p] for p in parts], watch, values=False)
        except BaseException:
            release_futures(new.values())
            raise
        futures, where = self.futures[name], self.where[name]
        for p in parts:
            old, futures[p], where[p] = futures.get(p), new[p], \
                self.placement.worker(self.part_of(p))
            if old is not None:
                release_futures([old])

    def release(self) -> None:
        """Drop the futures (the workers free the data) and the client's copies."""
        for futs in self.futures.values():
            release_futures(futs.values())
        self.futures, self.data, self.where = {}, {}, {}
        self.adopted, self.rebuild, self.built = set(), {}, {}


def _label(key) -> str:
    return "-".join(str(int(x)) for x in key) if isinstance(key, tuple) else str(int(key))
