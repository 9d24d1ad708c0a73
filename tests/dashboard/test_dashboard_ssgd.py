"""``/daskhpc`` in headless Chromium during and after an SSGD run, in both exchange modes
(the page and the console disagreed).

During the run (held at an epoch by the history callback until the page has been seen,
so no race with a fast run; the workers go on meanwhile) the page must say it runs and
show the strata timeline; after ``fit`` returned it must say the run finished and print
the planned bytes, measured bytes and their ratio that the command line's summary prints
(the same ``daskhpc.report.summarize`` of the same report), with the planned heatmap
under a colour bar of its own. Screenshots go to the test's tmp dir, and to ``$DASKHPC_SCREENSHOTS``
when set (``docs/img`` was made that way).
"""

from __future__ import annotations

import os
import re
import shutil
import threading

import numpy as np
import pytest
from dashboard_browser import colourful_pixels, models_js

import daskhpc as dh
from daskhpc.dashboard import format_bytes
from daskhpc.report import summarize

K, EPOCHS = 4, 6
HOLD = EPOCHS // 2          # the epoch whose history row holds the run (client side)
SOURCES = ["daskhpc-comm-planned", "daskhpc-comm-measured", "daskhpc-load", "daskhpc-strata"]
TEXTS = ["daskhpc-heading", "daskhpc-comm-summary", "daskhpc-strata-summary"]
PANELS = ["daskhpc-panel-spgemm", "daskhpc-panel-strata"]
#: the id of the colour mapper of every colour bar on the page
BARS_JS = """(() => {
  const doc = Bokeh.documents[0];
  const all = doc._all_models instanceof Map ? [...doc._all_models.values()]
                                             : [...(doc.all_models || [])];
  return all.filter(m => m.constructor && m.constructor.__name__ === "ColorBar")
            .map(m => m.color_mapper.id);
})()"""
BYTES = r"([\d.,]+ [kMGT]?B)"
SUMMARY = re.compile(
    rf"per run: planned {BYTES}; after (\d+)/(\d+) epochs: planned {BYTES}, measured {BYTES} "
    rf"\(([\d.]+) x planned\); per epoch \(mean of (\d+)\): planned {BYTES}, measured {BYTES}")
CLI = re.compile(rf"traffic +planned {BYTES} in [\d,]+ messages, measured {BYTES} in [\d,]+ "
                 r"\(([\d.]+)x the plan\)")


def shot(got: dict, tmp_path, name: str) -> None:
    png = tmp_path / name
    png.write_bytes(got["png"])
    if os.environ.get("DASKHPC_SCREENSHOTS"):
        shutil.copy(png, os.path.join(os.environ["DASKHPC_SCREENSHOTS"], name))


@pytest.mark.parametrize("exchange", ["direct", pytest.param("graph", marks=pytest.mark.slow)])
def test_ssgd_overview_agrees_with_the_console(browser, dash_client, tmp_path, exchange):
    client = dash_client
    base = client.dashboard_link.rsplit("/", 1)[0]
    held, seen, out = threading.Event(), threading.Event(), {}

    def hold(row):
        if row["epoch"] == HOLD:       # the run waits here until the page has been seen
            held.set()
            seen.wait(600)

    def work():
        try:
            out["res"] = dh.ssgd.fit(dh.datasets.ratings(), K, client=client, epochs=EPOCHS,
                                     strategy="hc", partition="random", exchange=exchange,
                                     callback=hold)
        finally:
            held.set()

    thread = threading.Thread(target=work, name=f"ssgd-{exchange}")
    thread.start()
    # the page's sources, texts and panels, and the mapper each colour bar reads
    probe = "(() => { const v = %s; if (v) v.bars = %s; return v; })()" % (
        models_js(SOURCES, TEXTS, PANELS), BARS_JS)
    try:
        held.wait(600)                 # epoch HOLD is done (however slow the machine is)
        during = browser.page(
            base + "/daskhpc", probe_js=probe, timeout=120, height=1500,
            ready=lambda v: "Running: <b>ssgd</b>" in v["texts"].get("daskhpc-heading", "")
            and v["totals"].get("daskhpc-strata", 0) > 0)
    finally:
        seen.set()
        thread.join(300)
    shot(during, tmp_path, f"dashboard-ssgd-{exchange}-running.png")
    assert "res" in out, "the SSGD run failed"
    # the strata timeline shows while the run goes, in both modes
    assert during["ready"], f"no strata timeline during the run: {during['value']}"
    assert during["errors"] == [], during["errors"]
    v = during["value"]
    assert v["visible"] == {"daskhpc-panel-spgemm": False, "daskhpc-panel-strata": True}, v
    assert "steps on 2 workers" in v["texts"]["daskhpc-strata-summary"]

    res = out["res"]
    rep = res.report()
    m = rep["measured"]
    cli = CLI.search(summarize(rep))              # what `daskhpc run ssgd` prints
    assert cli, summarize(rep)
    per_unit = m["bytes"]["per_unit"]

    def finished(v):
        return "Finished: <b>ssgd</b>" in v["texts"].get("daskhpc-heading", "") and \
            v["totals"].get("daskhpc-comm-measured") == m["inter_worker_bytes"]

    after = browser.page(base + "/daskhpc", probe_js=probe, ready=finished, timeout=120,
                         height=1500)
    shot(after, tmp_path, f"dashboard-ssgd-{exchange}-finished.png")
    # the heading says the run is over once fit returned
    assert after["ready"], f"the page never said the run finished: {after['value']}"
    assert after["errors"] == [], after["errors"]
    assert colourful_pixels(after["png"]) > 5_000
    v = after["value"]
    assert f"{EPOCHS}/{EPOCHS} epochs done" in v["texts"]["daskhpc-heading"]
    # the page's planned and measured bytes and ratio are the console's
    got = SUMMARY.search(v["texts"]["daskhpc-comm-summary"])
    assert got, v["texts"]["daskhpc-comm-summary"]
    run_planned, done, total, planned, measured, ratio, n, unit_planned, unit_measured = \
        got.groups()
    assert (int(done), int(total), int(n)) == (EPOCHS, EPOCHS, EPOCHS)
    assert planned == run_planned == format_bytes(m["planned_bytes"])
    assert measured == format_bytes(m["inter_worker_bytes"])
    assert ratio == cli[3], (ratio, cli[0])
    for page, console in ((planned, cli[1]), (measured, cli[2])):     # 1 vs 3 digits
        assert abs(_bytes(page) - _bytes(console)) <= 0.051 * _scale(page), (page, console)
    assert unit_planned == format_bytes(np.mean(per_unit["planned_bytes"]))
    assert unit_measured == format_bytes(np.mean(per_unit["measured_bytes"]))
    # the heatmaps hold exactly the report's bytes
    assert v["totals"]["daskhpc-comm-planned"] == m["planned_bytes"]
    assert v["totals"]["daskhpc-comm-measured"] == m["inter_worker_bytes"]
    # item 1 again: every sweep of the run is on the timeline after it
    rows = v["totals"]["daskhpc-strata"]
    assert rows >= 2 * K * EPOCHS, v["texts"]["daskhpc-strata-summary"]   # 2 workers
    if exchange == "direct":
        assert rows == K * K * EPOCHS                 # one row per part and sub-epoch
    # the planned heatmap has a colour bar too, on the measured one's scale
    assert len(v["bars"]) == 2, v["bars"]
    assert len(set(v["bars"])) == 1, "the two colour bars read different mappers"


def _bytes(text: str) -> float:
    return float(text.split()[0].replace(",", "")) * _scale(text)


def _scale(text: str) -> float:
    return {"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}[text.split()[1]]
