"""The linear classifiers as a :class:`~daskhpc.runtime.Workflow` (``daskhpc plan|run linear``)."""

from __future__ import annotations

from daskhpc import datasets
from daskhpc._workflows import Call, RunOptions, Workflow

from . import _api
from ._setup import CommandOptions, validate_input


class Linear(Workflow):
    """Data-parallel linear classifiers over the sparse allreduce (Renggli 2017)."""

    name = "linear"
    help = "data-parallel logistic regression / linear SVM, Top-k SGD, over the sparse allreduce"
    Options = CommandOptions
    inputs = "a LIBSVM training file"

    def check(self, call: Call) -> None:
        """The options, the files and their widths, and --parts, before the cluster starts."""
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
        """a9a, 2 epochs of B = 512, hinge loss (integer gradients: equal to serial bit for bit)."""
        return [datasets.path("libsvm"), "--test", datasets.path("libsvm-test"), "--parts",
                "3", "--batch", "512", "--epochs", "2", "--loss", "hinge", "--check-serial"]
