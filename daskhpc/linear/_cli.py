"""The linear classifiers as a :class:`~daskhpc.runtime.Workflow`: what ``daskhpc
plan|run linear``, ``daskhpc demo`` and the launchers know of them (flags from
``_setup.Options``, and ``--test``).

Examples
--------
>>> import argparse
>>> from daskhpc import datasets
>>> p = argparse.ArgumentParser()
>>> Linear.add_arguments(p, "plan")
>>> call, _ = Linear.call_of(p.parse_args([datasets.path("libsvm"), "--parts", "4",
...                                        "--batch", "8"]))
>>> Linear().plan(call)["plan"]["steps_per_epoch"]
2037
"""

from __future__ import annotations

from daskhpc import datasets
from daskhpc._workflows import Call, RunOptions, Workflow

from . import _api
from ._setup import CommandOptions, validate_input

__all__ = ["Linear"]


class Linear(Workflow):
    """Data-parallel linear classifiers over the sparse allreduce (Renggli 2017)."""

    name = "linear"
    help = "data-parallel logistic regression / linear SVM, Top-k SGD, over the sparse allreduce"
    Options = CommandOptions
    inputs = "a LIBSVM training file"
    dashboard = "daskhpc.linear._dashboard"

    def check(self, call: Call) -> None:
        """The options, the files and their widths, and --parts against them, before the
        cluster starts (read once: the run reuses what was read)."""
        call.data = validate_input(call.one_input("LIBSVM training file"), call.parts,
                                   **call.options.fit_keywords())

    def plan(self, call: Call) -> dict:
        return _api.plan(call.one_input("LIBSVM training file"),
                         nparts=call.parts_or(None, "plan linear"),
                         **call.options.fit_keywords(call.data))

    def run(self, call: Call, run: RunOptions) -> dict:
        return _api.fit(call.one_input("LIBSVM training file"), nparts=call.parts, run=run,
                        **call.options.fit_keywords(call.data)).report()

    def demo(self, client) -> dict:
        """a9a / a9a.t, 4 parts, B = 512, 3 epochs, logistic loss, checked against serial."""
        return _api.fit(datasets.path("libsvm"), nparts=4, batch=512, epochs=3, client=client,
                        test=datasets.path("libsvm-test"), check_serial=True).report()

    def small_run(self) -> list:
        """a9a, 2 epochs of B = 512, hinge loss (its gradients are integers on a9a's binary
        features, so the run equals the plain serial reference bit for bit)."""
        return [datasets.path("libsvm"), "--test", datasets.path("libsvm-test"), "--parts",
                "3", "--batch", "512", "--epochs", "2", "--loss", "hinge", "--check-serial"]
