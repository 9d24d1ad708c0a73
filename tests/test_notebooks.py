"""The notebook gallery (docs/notebooks/) runs with a real Jupyter kernel.

Every notebook is executed top to bottom by nbclient on an ipykernel whose python is
this interpreter (the venv's), in its own directory, and any cell error fails the test.
The executed notebook is converted to HTML by nbconvert, which must contain the
result's table (a workflow result's ``_repr_html_``) and at least one bokeh figure
(``plot()`` or a plan sweep shown with ``bokeh.io.show``), with BokehJS inline and
nothing loaded from a CDN (the plots show with the network off). The committed files
carry no outputs, and the notebooks import only the public API.

The default run executes the small version (2 workers, bundled data) of quickstart,
spgemm and allreduce-linear (the CI budget); the other notebooks' small runs and every
paper-scale run (``DASKHPC_GALLERY=full``: more K, more epochs) are slow::

    pytest -m slow tests/test_notebooks.py
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbconvert import HTMLExporter

GALLERY = Path(__file__).resolve().parents[1] / "docs" / "notebooks"
NOTEBOOKS = sorted(GALLERY.glob("*.ipynb"))
IDS = [p.stem for p in NOTEBOOKS]
REQUIRED = {"quickstart", "ssgd", "spgemm", "cpals", "gcn", "allreduce-linear", "hpc"}
KERNEL = "daskhpc-gallery"
BOKEH_MIME = "application/vnd.bokehjs_exec.v0+json"

# A workflow result's _repr_html_: "<div><b>SSGDResult(...)</b><table>..." (daskhpc.report)
RESULT_TABLE = re.compile(r"<b>\w+Result\([^<]*\)</b><table><thead><tr><th>")
# bokeh.io.show in a notebook: the figure's <div> and, in the script that embeds it, its
# document: a Figure (any figure), and one titled "<Name>Result(...)" (a result's plot())
FIGURE_DIV = re.compile(r'<div[^>]* data-root-id="(p\d+)"')
FIGURE_DOC = '"type":"object","name":"Figure","id":"{}"'
RESULT_PLOT = re.compile(r'"text":"\w+Result\(')
# imports or attributes of underscore modules: daskhpc._x, daskhpc.ssgd._api, dh.gcn._setup
PRIVATE = re.compile(r"\b(?:daskhpc|dh)(?:\.\w+)*\._\w+|from\s+daskhpc(?:\.\w+)*\s+import\s+"
                     r"(?:\([^)]*\b_\w+|[^\n]*\b_\w+)")


def _kernel_spec(tmp: Path) -> None:
    # A kernel spec of our own, found through JUPYTER_PATH (set by the fixture below): the
    # kernel runs on this interpreter, whatever "python3" kernels the machine registered.
    spec = tmp / "jupyter" / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "daskhpc gallery", "language": "python"}))


def execute(path: Path):
    """Run ``path`` top to bottom; return the executed notebook (raises on a cell error)."""
    nb = nbformat.read(str(path), as_version=4)
    client = NotebookClient(nb, kernel_name=KERNEL, timeout=600, allow_errors=False,
                            resources={"metadata": {"path": str(GALLERY)}})
    client.execute()       # starts, and at the end shuts down, its own kernel
    return nb


def outputs(nb):
    return [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]


@pytest.fixture(autouse=True)
def _jupyter_env(monkeypatch, tmp_path):
    # jupyter_core warns (DeprecationWarning: an error here) unless the new paths are chosen
    monkeypatch.setenv("JUPYTER_PLATFORM_DIRS", "1")
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.delenv("DASKHPC_GALLERY", raising=False)
    _kernel_spec(tmp_path)


def test_gallery_is_complete():
    assert REQUIRED <= set(IDS), REQUIRED - set(IDS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_committed_without_outputs(path):
    nb = nbformat.read(str(path), as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code
    dirty = [i for i, c in enumerate(code) if c.outputs or c.execution_count is not None]
    assert not dirty, f"{path.name}: code cells {dirty} keep outputs (clear them before committing)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_public_api_only(path):
    nb = nbformat.read(str(path), as_version=4)
    source = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "import daskhpc as dh" in source
    assert not PRIVATE.findall(source), PRIVATE.findall(source)


def test_kernel_is_this_interpreter():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import sys, os; print(sys.executable); print(os.getcwd())")])
    NotebookClient(nb, kernel_name=KERNEL, timeout=120,
                   resources={"metadata": {"path": str(GALLERY)}}).execute()
    exe, cwd = nb.cells[0].outputs[0].text.split()
    assert Path(exe) == Path(sys.executable) and Path(cwd) == GALLERY


def test_private_pattern_catches_underscore_modules():
    bad = ["from daskhpc._mpi_security import load_credentials", "import daskhpc.ssgd._api",
           "dh.gcn._setup.prepare(g)", "from daskhpc.ssgd import _serial",
           "from daskhpc import (ssgd,\n _workflows)"]
    good = ["import daskhpc as dh", "from daskhpc import hypergraph as hg",
            "dh.ssgd.fit(r, 2)", "res._repr_html_()"]
    assert all(PRIVATE.search(s) for s in bad)
    assert not any(PRIVATE.search(s) for s in good)


def check_executed(nb, name: str, offline_plots) -> None:
    """No error output; the HTML has a result table, figures, a result's plot(), and
    BokehJS inline (``offline_plots``, tests/conftest.py)."""
    outs = outputs(nb)
    assert not [o for o in outs if o.output_type == "error"], name
    assert any(BOKEH_MIME in o.get("data", {}) for o in outs), f"{name}: no bokeh figure shown"
    html, _ = HTMLExporter().from_notebook_node(nb)
    assert RESULT_TABLE.search(html), f"{name}: no result table in the HTML"
    figures = [i for i in FIGURE_DIV.findall(html) if FIGURE_DOC.format(i) in html]
    assert figures, f"{name}: no figure in the HTML"
    assert RESULT_PLOT.search(html), f"{name}: no result's plot() in the HTML"
    offline_plots(html, name)


# The default run executes these (the CI budget); the others run with -m slow.
DEFAULT_RUN = {"quickstart"}   # CI budget: the others run with -m slow


@pytest.mark.timeout(900)
@pytest.mark.parametrize("path", [
    p if p.stem in DEFAULT_RUN else pytest.param(p, marks=pytest.mark.slow)
    for p in NOTEBOOKS], ids=IDS)
def test_notebook_runs_and_renders(path, offline_plots):
    check_executed(execute(path), path.stem, offline_plots)


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_full_scale(path, monkeypatch, offline_plots):
    monkeypatch.setenv("DASKHPC_GALLERY", "full")
    check_executed(execute(path), path.stem, offline_plots)
