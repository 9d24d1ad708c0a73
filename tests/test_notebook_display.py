"""What a notebook shows: a result's ``plot()`` as a cell's value, and the
progress of a run as one display updated in place.

The cells run on a real Jupyter kernel (nbclient, ipykernel on this interpreter), which
is the only honest way to be "in a notebook": the outputs counted are what the notebook
file (and JupyterLab) keeps.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbconvert import HTMLExporter

KERNEL = "daskhpc-display"
BOKEH_EXEC = "application/vnd.bokehjs_exec.v0+json"

SETUP = """\
import time
import daskhpc as dh
from daskhpc.runtime import progress
"""
COUNTED = """\
with progress(40, "steps") as bar:
    for _ in range(40):
        time.sleep(0.01)
        bar.advance()
"""
RUN = """\
client = dh.connect("SCHEDULER")    # the session's cluster (the CI budget)
A = dh.datasets.cora().adjacency
res = dh.spgemm.multiply(A, client=client, grid="1x1x2", batches=4, consume="count")
futs = client.map(lambda i: time.sleep(0.05) or i, range(6), pure=False)
with progress(futs, "tasks"):          # steps counted on the client's event loop thread
    client.gather(futs)
client.close()
"""
PLOT = "res.plot()"


@pytest.fixture(scope="module")
def cells(tmp_path_factory, client2):
    """The executed cells of one notebook: setup, a counted bar, a run, a plot."""
    tmp = tmp_path_factory.mktemp("jupyter")
    spec = tmp / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "daskhpc display", "language": "python"}))
    mp = pytest.MonkeyPatch()
    mp.setenv("JUPYTER_PLATFORM_DIRS", "1")
    mp.setenv("JUPYTER_PATH", str(tmp))
    mp.delenv("DASK_DASKHPC__RUNTIME__PROGRESS", raising=False)
    root = Path(__file__).resolve().parents[1]
    # the kernel imports this tree's daskhpc
    mp.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(root),
                                                        os.environ.get("PYTHONPATH")])))
    try:
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c)
                                             for c in (SETUP, COUNTED, RUN.replace(
                                                 "SCHEDULER", client2.scheduler.address), PLOT)])
        NotebookClient(nb, kernel_name=KERNEL, timeout=600, allow_errors=False,
                       resources={"metadata": {"path": str(tmp)}}).execute()
    finally:
        mp.undo()
    return dict(zip(("setup", "counted", "run", "plot"), nb.cells))


def _texts(output) -> str:
    return output.get("text", "") + output.get("data", {}).get("text/plain", "")


@pytest.mark.timeout(900)
def test_a_counted_bar_is_one_updated_display(cells):
    outs = cells["counted"].outputs
    assert len(outs) == 1, [_texts(o) for o in outs]      # not a stderr line per step
    out = outs[0]
    assert out.output_type == "display_data"
    assert out.data["text/plain"].startswith("steps: 40/40 done in ")
    assert '<progress value="40" max="40"' in out.data["text/html"]


@pytest.mark.slow             # CI budget: a cluster inside a notebook kernel
@pytest.mark.timeout(900)
def test_a_run_shows_its_batches_in_one_display(cells):
    outs = cells["run"].outputs
    bars = {label: [o for o in outs if label in _texts(o)]
            for label in ("spgemm batches", "tasks")}
    for label, found in bars.items():
        assert len(found) == 1, (label, [_texts(o) for o in outs])
        assert found[0].output_type == "display_data"
    assert bars["spgemm batches"][0].data["text/plain"].startswith("spgemm batches: 4/4 done")
    assert bars["tasks"][0].data["text/plain"].startswith("tasks: 6/6 done")


@pytest.mark.timeout(900)
def test_a_plot_renders_as_the_cells_value(cells):
    outs = cells["plot"].outputs
    html = "".join(o.get("data", {}).get("text/html", "") for o in outs)
    assert 'data-root-id="p' in html                             # the figure's <div>
    shown = [o for o in outs if BOKEH_EXEC in o.get("data", {})]
    assert len(shown) == 1                                      # bokeh's embed script
    script = shown[0].data["application/javascript"]
    assert "embed_items_notebook" in script and '"text":"SpgemmResult(' in script
    assert not any("figure(id=" in _texts(o) for o in outs)     # not bokeh's property list


@pytest.mark.timeout(900)
def test_an_exported_plot_shows_offline(cells, offline_plots):
    """The notebook exported to HTML (``jupyter nbconvert --to html``) carries BokehJS
    itself: a result's plot() loads it inline, not from bokeh's CDN."""
    nb = nbformat.v4.new_notebook(cells=[cells["setup"], cells["plot"]])
    html, _ = HTMLExporter().from_notebook_node(nb)
    assert 'data-root-id="p' in html
    offline_plots(html, "plot()")
