"""SSGD as a :class:`~daskhpc.runtime.Workflow`: what ``daskhpc plan|run ssgd``,
``daskhpc demo`` and the launchers know of it (flags from ``_setup.Options``)."""

from __future__ import annotations

from daskhpc._workflows import Call, RunOptions, Workflow
from daskhpc.errors import InputError

from ._setup import Options, load


class SSGD(Workflow):
    """Matrix completion by stratified SGD (Abubaker, Karsavuran, Aykanat, TKDE 2023)."""

    name = "ssgd"
    help = "matrix completion by stratified SGD (DSGD, P2P, Hold-and-Combine)"
    Options = Options
    inputs = ("a ratings file (CSV/TSV, MatrixMarket, SNAP edge list, LIBSVM), or Parquet "
              "files, a directory of them, or several CSV files: read by the workers")

    def check(self, call: Call) -> None:
        """Read and validate the ratings once, and the partition file against them."""
        from ._assign import read_partition
        from ._data import check_parts

        if _collection(call.inputs):
            from daskhpc.io import ratings_files

            # only metadata here (schemas, first lines); the workers read the ratings
            call.data = ratings_files(call.inputs)
            return
        path = call.one_input("ratings file")
        inp = load(path, format=call.format, keep_empty=call.options.keep_empty)
        if call.parts is not None:
            check_parts(call.parts, inp.ratings)
        if call.partition_file is not None:
            read_partition(call.partition_file, *inp.ratings.shape, call.parts, inp)
        call.data = inp

    def plan(self, call: Call) -> dict:
        from ._api import plan

        if _collection(call.inputs):
            raise InputError("plan reads one ratings file on the client; Parquet files, "
                             "directories and several files are for 'daskhpc run ssgd'")
        opts = dict(call.values("plan"), format=call.format)
        return _noted(plan(call.one_input("ratings file"), call.parts_or(None, "ssgd"),
                           partition_file=call.partition_file, network=call.network,
                           **opts))

    def run(self, call: Call, run: RunOptions) -> dict:
        from daskhpc.runtime import worker_addresses

        from ._api import fit

        opts = dict(call.values("run"), format=call.format)
        K = call.parts_or(len(worker_addresses(run.client)), "ssgd")
        return _noted(fit(call.one_input("ratings file"), K, run=run,
                          partition_file=call.partition_file, **opts).report())

    def predict(self, result, path: str) -> dict:
        """Every (user, item) of a ratings file by the saved model, and the RMSE."""
        from ._result import predict_file

        return predict_file(result, path)

    def demo(self, client) -> dict:
        """ml-latest-small, K = 2, Hold-and-Combine, 5 epochs, checked against serial."""
        from daskhpc import datasets

        from ._api import fit

        return fit(datasets.path("ratings"), 2, client=client, strategy="hc", epochs=5,
                   partition="hp", check_serial=True).report()

    def small_run(self) -> list:
        from daskhpc import datasets

        return [datasets.path("ratings"), "--parts", "3", "--epochs", "2", "--check-serial"]


def _collection(inputs) -> bool:
    """Inputs the workers read as a Dask DataFrame: several files, a directory, Parquet."""
    import os

    inputs = list(inputs or ())
    return len(inputs) > 1 or any(os.path.isdir(p) or str(p).endswith((".parquet", ".pq"))
                                  for p in inputs)


def _noted(report: dict) -> dict:
    """Print the input's notes (empty rows dropped) on stderr: the user must see them."""
    import sys

    for note in (report.get("input") or {}).get("notes", []):
        print(f"note: {note}", file=sys.stderr)
    return report
